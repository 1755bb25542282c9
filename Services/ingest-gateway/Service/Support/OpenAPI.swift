import Foundation
import ServiceRuntime

extension OpenAPIDocument {
    /// The ingest gateway's document, `Service/Resources/openapi.yaml`.
    package static let gateway = OpenAPIDocument(bundle: .module)
}
