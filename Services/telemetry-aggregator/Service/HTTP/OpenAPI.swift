import Foundation
import ServiceRuntime

extension OpenAPIDocument {
    /// The telemetry aggregator's document, `Service/Resources/openapi.yaml`.
    package static let telemetry = OpenAPIDocument(bundle: .module)
}
