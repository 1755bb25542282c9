import Foundation
import ServiceRuntime

extension OpenAPIDocument {
    /// The session merger's document, `Service/Resources/openapi.yaml`.
    package static let merger = OpenAPIDocument(bundle: .module)
}
