import AttendanceProtocol
import Foundation
import Hummingbird
import ServiceRuntime
import TelemetryAggregatorCore

extension StrictQuery {
    /// The filter parameters every telemetry endpoint takes.
    static let telemetryFilterNames: Set<String> = ["site", "appVersion", "deviceModel"]

    /// site / appVersion / deviceModel: at most `Dimensions.maxLength` printable characters, as stored.
    func filter() throws(ProblemDetails) -> MetricsFilter {
        var errors: [FieldError] = []
        func value(_ name: String) -> String? {
            guard let text = self[name] else { return nil }
            if text.count > Dimensions.maxLength {
                errors.append(FieldError(field: name, reason: "must be at most \(Dimensions.maxLength) characters"))
                return nil
            }
            if text.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) }) {
                errors.append(FieldError(field: name, reason: "must not contain control characters"))
                return nil
            }
            if text != text.trimmingCharacters(in: .whitespacesAndNewlines) {
                errors.append(FieldError(field: name, reason: "must not start or end with white space"))
                return nil
            }
            return text
        }
        let filter = MetricsFilter(site: value("site"), appVersion: value("appVersion"), deviceModel: value("deviceModel"))
        if !errors.isEmpty { throw .validation(errors) }
        return filter
    }
}
