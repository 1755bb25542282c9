import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import Logging
import PostgresNIO

/// Appends registry changes to `change_outbox`, always on the connection of the write's
/// own transaction: the change commits or rolls back with the write, so the feed can neither miss a
/// committed change nor announce one that never happened. A publisher later moves the rows to
/// `registry.changes` (key `<entityType>:<entityId>`, the row id as the change's version).
enum ChangeOutbox {
    /// An upsert carrying `entity` as the registry serves it (the protocol's wire JSON).
    static func upsert<Entity: Encodable>(
        _ kind: RegistryEntityKind, id: String, entity: Entity, on connection: PostgresConnection, logger: Logger
    ) async throws {
        let payload = try ProtocolCodec.wire.encodeToString(entity)
        let type = kind.rawValue
        try await connection.query(
            """
            INSERT INTO change_outbox (entity_type, entity_id, op, payload)
            VALUES (\(type), \(id), 'upsert', \(payload)::jsonb)
            """,
            logger: logger
        )
    }

    /// A beacon upsert: the beacon as the registry serves it plus `gattKey`, its GATT key sealed for
    /// the policy service (`SealedBeaconKey`), when it has one, and `previousGattKey` (with its
    /// `validUntil`) during a rotation's grace. The REST answers never carry them.
    static func upsertBeacon(_ beacon: Beacon, keys: StoredBeaconKeys?, on connection: PostgresConnection, logger: Logger) async throws {
        var payload = try JSONValue(encoding: beacon)
        if let keys, case .object(var members) = payload {
            members["gattKey"] = try JSONValue(encoding: keys.current)
            if let previous = keys.previous { members["previousGattKey"] = try JSONValue(encoding: previous) }
            payload = .object(members)
        }
        try await upsert(.beacon, id: beacon.id, entity: payload, on: connection, logger: logger)
    }
}
