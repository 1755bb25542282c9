import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Hummingbird
import ServiceRuntime

/// Limits of the admin API.
package enum RegistryLimits {
    /// The largest request body accepted (413 beyond).
    package static let maxBodyBytes = 64 * 1024
    package static let pageSizes: ClosedRange<Int> = 1...200
    package static let defaultPageSize = 50
}

extension Request {
    /// The JSON body as `T`, read up to `RegistryLimits.maxBodyBytes`; a field `T` does not have is a
    /// 400 (`AdminJSON.decodeBody`), except on the routes phones call (`fromDevice`), where it is
    /// ignored as in the rest of the device API: a newer app meets an older registry during an upgrade.
    /// An empty body decodes as `{}` when `emptyAs` is given (action endpoints whose body is optional),
    /// else it is a 400.
    func decodeJSON<T: Codable>(_ type: T.Type, emptyAs empty: T? = nil, fromDevice: Bool = false) async throws -> T {
        let body = try await bodyBytes(required: empty == nil)
        if body.isEmpty, let empty { return empty }
        return try AdminJSON.decodeBody(T.self, from: Data(body), refusingUnknown: !fromDevice)
    }

    /// The body's bytes as sent, read up to `RegistryLimits.maxBodyBytes`; an empty body is a 400 when
    /// `required`.
    func bodyBytes(required: Bool = true) async throws -> [UInt8] {
        var request = self
        let buffer = try await request.collectBody(upTo: RegistryLimits.maxBodyBytes)
        if required, buffer.readableBytes == 0 {
            throw ProblemDetails.validation([FieldError(field: "", reason: "a JSON body is required")])
        }
        return Array(buffer.readableBytesView)
    }
}

extension RequestContext {
    /// An id in the path: a 400 naming it unless it has the shape of every id the registry stores
    /// (`EntityId`), so an ill-formed one never reaches the database as a lookup that finds nothing.
    func pathId(_ name: String = "id") throws(ProblemDetails) -> String {
        guard let value = pathParameter(name), !value.isEmpty else {
            throw .validation([FieldError(field: name, reason: "is required in the path")])
        }
        guard EntityId.isValid(value) else {
            throw .validation([FieldError(field: name, reason: EntityId.rule)])
        }
        return value
    }
}

/// `?limit=` (1...200, default 50) and `?cursor=` (opaque: the previous page's `nextCursor`); any other
/// parameter is refused (`StrictQuery`).
struct PageRequest: Sendable {
    var after: String?
    var limit: Int

    init(_ request: Request) throws(ProblemDetails) {
        let query = try StrictQuery(request, allowed: ["limit", "cursor"])
        limit = try query.int("limit", default: RegistryLimits.defaultPageSize, in: RegistryLimits.pageSizes)
        if let cursor = query["cursor"] {
            guard let id = PageCursor.decode(cursor) else {
                throw .validation([FieldError(field: "cursor", reason: "is not a cursor this API returned")])
            }
            after = id
        }
    }

    /// Asks for one row more than the page to learn whether another page follows.
    func page<Item: Codable & Sendable>(
        _ fetch: (_ after: String?, _ limit: Int) async throws(RegistryError) -> [Item], id: (Item) -> String
    ) async throws(RegistryError) -> RegistryPage<Item> {
        let rows = try await fetch(after, limit + 1)
        let items = Array(rows.prefix(limit))
        let next = rows.count > limit ? items.last.map { PageCursor.encode(id($0)) } : nil
        return RegistryPage(items: items, nextCursor: next)
    }
}

/// The body of a POST that takes none; an empty request body reads as this.
struct EmptyBody: Codable {}

/// Opaque cursors: `PageCursorText` of version `c1` and the last id.
enum PageCursor {
    static func encode(_ id: String) -> String { PageCursorText.encode(version: "c1", id) }
    static func decode(_ cursor: String) -> String? { PageCursorText.decode(cursor, version: "c1", maxLength: 400) }
}
