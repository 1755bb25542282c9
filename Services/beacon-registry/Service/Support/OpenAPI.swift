import Foundation
import ServiceRuntime

extension OpenAPIDocument {
    /// The registry's document, `Service/Resources/openapi.yaml`.
    package static let registry = OpenAPIDocument(bundle: .module)
}
