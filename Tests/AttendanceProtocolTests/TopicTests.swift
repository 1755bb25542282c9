import Foundation
import Testing

@testable import AttendanceProtocol

@Suite("Topics and partition keys")
struct TopicTests {
    @Test("exactly the seven topics of the no-loss contract, each name once")
    func topicNames() {
        let names = Topic.allCases.map(\.name)
        #expect(names.count == Set(names).count)
        #expect(
            Set(names) == [
                "attendance.events.raw", "attendance.events.vetted", "attendance.verdicts", "attendance.sessions",
                "device.telemetry", "registry.changes", "attendance.dlq",
            ])
    }

    @Test("registry.changes is compacted with one partition; the others delete")
    func cleanupPolicies() {
        for topic in Topic.allCases {
            #expect(topic.cleanupPolicy == (topic == .registryChanges ? .compact : .delete), "\(topic.name)")
            #expect(topic.topicConfig["cleanup.policy"] == topic.cleanupPolicy.rawValue)
            #expect((topic.retentionMilliseconds == nil) == (topic == .registryChanges))
        }
        #expect(Topic.registryChanges.defaultPartitionCount == 1)
        #expect(Topic.rawEvents.defaultPartitionCount == Topic.vettedEvents.defaultPartitionCount)
        #expect(Topic.rawEvents.defaultPartitionCount == 6)
    }

    @Test("each topic's message type names that topic")
    func messageTypes() {
        for topic in Topic.allCases {
            #expect(topic.messageType.topic == topic)
            #expect(topic.messageType.schemaVersion == 1)
        }
    }

    @Test("every message keys itself for its own topic, by the documented field")
    func partitionKeys() throws {
        let raw = Sample.raw(.event(Sample.seedEvent))
        #expect(raw.partitionKey == .rawEvent(userId: "u_1024"))
        let vetted = VettedEvent(raw: raw, decision: Sample.decision)
        #expect(vetted.partitionKey.topic == .vettedEvents)
        #expect(vetted.partitionKey.value == "u_1024")
        let batch = DeviceTelemetryBatch(
            batchId: "b", deviceId: "d_7f3a", appVersion: "1", deviceModel: "m", receivedAt: Date(timeIntervalSince1970: 0), events: [])
        #expect(batch.partitionKey == .deviceTelemetry(deviceId: "d_7f3a"))
        #expect(PartitionKey.rawEvent(userId: "u") != PartitionKey.session(userId: "u"))

        let record = try ProtocolCodec.wire.record(for: raw)
        #expect(record.topic == .rawEvents)
        #expect(record.key == "u_1024")
        #expect(try ProtocolCodec.wire.decode(RawEventEnvelope.self, from: try #require(record.value)) == raw)
    }

    @Test("registry keys, tombstones and records")
    func registryRecords() throws {
        let key = try #require(RegistryKey("device:d_7f3a:legacy"))
        #expect(key.entityType == .device)
        #expect(key.entityId == "d_7f3a:legacy")
        #expect(key.description == "device:d_7f3a:legacy")
        #expect(RegistryKey("nocolon") == nil)
        #expect(RegistryKey(":x") == nil)
        #expect(RegistryKey("zone:Z1")?.entityType == .unrecognized("zone"))

        let tombstone = RegistryKey(entityType: .beacon, entityId: "B_0003").tombstone
        #expect(tombstone == TopicRecord(topic: .registryChanges, key: "beacon:B_0003", value: nil))
        #expect(
            try RegistryRecord.decode(key: tombstone.key, value: tombstone.value)
                == .delete(RegistryKey(entityType: .beacon, entityId: "B_0003")))

        let upsert = RegistryChange(
            entityType: .site, entityId: "S_HQ", version: 3, changedAt: ts("2025-09-01T00:00:00Z"), payload: ["name": "HQ"])
        let record = try ProtocolCodec.wire.record(for: upsert)
        #expect(record.key == "site:S_HQ")
        #expect(try RegistryRecord.decode(key: record.key, value: record.value) == .upsert(upsert))

        var deleted = upsert
        deleted.op = .delete
        deleted.payload = nil
        #expect(try RegistryRecord.decode(key: "site:S_HQ", value: try ProtocolCodec.wire.encode(deleted)) == .delete(upsert.key))

        #expect(throws: ProtocolDecodingError.self) { try RegistryRecord.decode(key: "garbage", value: nil) }
    }

    @Test("the payload of a registry change decodes with its path")
    func registryPayloadErrors() throws {
        struct Site: Decodable { var name: String; var radius: Int }
        let change = RegistryChange(
            entityType: .site, entityId: "S_HQ", version: 1, changedAt: Date(timeIntervalSince1970: 0),
            payload: ["name": "HQ", "radius": "wide"])
        #expect(throws: ProtocolDecodingError.wrongType(path: "payload.radius", expected: "integer")) {
            try change.decodePayload(as: Site.self)
        }
    }

    @Test("open enums keep unknown values; closed enums refuse them")
    func openAndClosedEnums() throws {
        #expect(AppAction(rawValue: "enable_bluetooth") == .enableBluetooth)
        #expect(AppAction(rawValue: "none") == .noAction)
        #expect(AppAction(rawValue: "reboot_phone") == .unrecognized("reboot_phone"))
        #expect(try ProtocolCodec.wire.encodeToString([AppAction.unrecognized("reboot_phone")]) == #"["reboot_phone"]"#)
        #expect(
            try ProtocolCodec.wire.decode([TelemetryEventName].self, from: #"["api_201","wifi_scan"]"#) == [
                .api201, .unrecognized("wifi_scan"),
            ])
        #expect(!TelemetryEventName.unrecognized("wifi_scan").isKnown)
        for name in [
            "region_enter", "region_exit", "ranging_start", "ranging_stop", "motion_query", "gatt_ok", "gatt_fail",
            "api_201", "api_200", "api_409", "bg_timeout", "offline_enqueue", "outbox_sent", "battery",
        ] {
            #expect(TelemetryEventName(rawValue: name).isKnown, "\(name)")
        }
        for action in ["none", "enable_bluetooth", "walk_to_gate", "update_app", "contact_admin", "retry_after", "manual_checkin"] {
            #expect(AppAction(rawValue: action).isKnown, "\(action)")
        }
        #expect(throws: ProtocolDecodingError.self) { try ProtocolCodec.wire.decode(VerdictOutcome.self, from: #""maybe""#) }
    }
}

@Suite("Problem catalogue")
struct ProblemCatalogueTests {
    @Test func typesAreDistinctURNsWithTheirStatuses() {
        let uris = ProblemType.all.map(\.uri)
        #expect(Set(uris).count == uris.count)
        #expect(uris.allSatisfy { $0.hasPrefix("urn:problem:attendance:") })
        let statuses = Dictionary(
            uniqueKeysWithValues: ProblemType.all.map { ($0.uri.replacingOccurrences(of: "urn:problem:attendance:", with: ""), $0.status) })
        #expect(statuses["validation"] == 400)
        #expect(statuses["missing-idempotency-key"] == 400)
        #expect(statuses["unauthorized"] == 401)
        #expect(statuses["forbidden"] == 403)
        #expect(statuses["not-found"] == 404)
        #expect(statuses["policy-conflict"] == 409)
        #expect(statuses["in-flight"] == 409)
        #expect(statuses["payload-mismatch"] == 422)
        #expect(statuses["payload-too-large"] == 413)
        #expect(statuses["rate-limited"] == 429)
        #expect(statuses["unavailable"] == 503)
        #expect(ProblemType.inFlight != ProblemType.policyConflict)
    }

    @Test func constructorsFillTheExtensionMembers() throws {
        let inFlight = ProblemDetails.inFlight(retryAfterSeconds: 1)
        #expect(inFlight.problemType == .inFlight)
        #expect(inFlight.action == .retryAfter)
        #expect(ProblemDetails.missingIdempotencyKey().status == 400)
        #expect(ProblemDetails.payloadTooLarge(limitBytes: 65536).status == 413)
        #expect(ProblemDetails.payloadMismatch().status == 422)
        #expect(ProblemDetails.unavailable(retryAfterSeconds: 5).retryAfterSeconds == 5)
        #expect(ProblemDetails.bannedBeaconUUID(prefix: "E2C56DB5", vendor: "Apple AirLocate").detail?.contains("Apple AirLocate") == true)
        // A problem without a type is about:blank (RFC 9457 sec. 4.2.1).
        let blank = try ProtocolCodec.wire.decode(ProblemDetails.self, from: #"{"title":"Bad Gateway","status":502}"#)
        #expect(blank.type == "about:blank")
        #expect(blank.problemType == nil)
    }
}
