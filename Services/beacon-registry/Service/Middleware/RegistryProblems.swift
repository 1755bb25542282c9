import AttendanceProtocol
import BeaconRegistryCore
import ServiceRuntime

extension ProblemMapper {
    /// The registry's errors on top of the common mapping: `RegistryError` through its
    /// `problemDetails`, a CP28 plan that cannot be built as a 400 naming the setting, and 413 naming
    /// the registry's body limit.
    package static let registry = ProblemMapper(maxBodyBytes: RegistryLimits.maxBodyBytes) { error in
        switch error {
        case let registry as RegistryError: return registry.problemDetails
        case let plan as CP28PlanError: return .validation([plan.fieldError])
        default: return nil
        }
    }
}
