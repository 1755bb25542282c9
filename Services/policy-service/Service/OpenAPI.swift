import Foundation
import ServiceRuntime

extension OpenAPIDocument {
    /// The policy service's document, `Service/Resources/openapi.yaml`.
    package static let policy = OpenAPIDocument(bundle: .module)
}
