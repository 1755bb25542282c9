import AttendanceProtocol
import Foundation

// The wire codec's hot paths on one core (`make bench-codec` pins it with taskset), each against
// Foundation's JSONDecoder / JSONEncoder on the same messages and types in the same run:
// - the merger decodes every vetted event (`VettedEventRecord`, keeping the raw envelope's bytes)
//   and encodes one verdict per event;
// - the gateway decodes every device payload and encodes its raw envelope.
// Foundation's coders use the types' own `init(from:)` / `encode(to:)`, so the work compared is the
// same; Foundation's output differs in member order and is not what the wire carries.

let messages = Int(ProcessInfo.processInfo.environment["BENCH_MESSAGES"] ?? "") ?? 20_000
let rounds = 5
/// `BENCH_FOUNDATION=0` skips the baseline (for profiling the codec alone).
let measuresFoundation = ProcessInfo.processInfo.environment["BENCH_FOUNDATION"] != "0"

let vettedTemplate = """
    {"schemaVersion":1,"raw":{"schemaVersion":1,"requestId":"req_01J8ZQ6W3K","idempotencyKey":\
    "fc3544f5ffdbf8e7878500171150720e20ff5021d0999795129b72fab41f2f59","userId":"u_1024","deviceId":"d_7f3a",\
    "siteId":"S_HQ","appVersion":"1.12.0","gatewayInstance":"gateway-0","receivedAt":"2025-09-18T06:35:12.431Z",\
    "payloadFingerprint":"0d6a1e4c3b2f5a7980e1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3a2b","kind":"event",\
    "payload":{"id":"6f1c2b9e-4d3a-4e8b-9c5d-2a7e1f0b3c4d","idempotencyKey":\
    "fc3544f5ffdbf8e7878500171150720e20ff5021d0999795129b72fab41f2f59","userId":"u_1024","deviceId":"d_7f3a",\
    "timestamp":"2025-09-18T06:35:12Z","type":"checkin","siteId":"S_HQ","beacon":{"uuid":\
    "8D4F2A61-3C7B-4E19-A5D0-6B2E9F1C7A34","major":10,"minor":3},"rssiSeries":[-75,-71,-68,-66],"txPower":-59,\
    "motion":{"state":"walking","steps2min":42},"geofence":{"inside":true,"radius":200},"handshake":{"ok":true,\
    "rt":180},"network":{"online":true,"latencyMs":210},"app":{"version":"1.12.0","build":345},"device":{"model":\
    "iPhone14,5","os":"iOS 18.0"}}},"decision":{"outcome":"accept","ruleResults":[{"ruleId":"beacon_validity",\
    "mode":"enforce","fired":false},{"ruleId":"rate_limit","mode":"enforce","fired":false},{"ruleId":\
    "motion_gating","mode":"monitor","fired":true,"reason":"12 steps in 2 min, 30 required"}],"riskScore":0.1,\
    "action":"none","policyVersion":7,"decidedAt":"2025-09-18T06:35:12.502Z"}}
    """

/// `messages` vetted events that differ in their keys and users, as the wire carries them.
func makeVettedEvents() throws -> [[UInt8]] {
    let template = try ProtocolCodec.wire.decode(VettedEvent.self, from: vettedTemplate)
    return try (0..<messages).map { index in
        var vetted = template
        vetted.raw.requestId = "req-\(index)"
        vetted.raw.idempotencyKey = String(repeating: String(index % 10), count: 64)
        vetted.raw.userId = "usr_\(index % 256)"
        return try ProtocolCodec.wire.encode(vetted)
    }
}

func verdicts(for vetted: [[UInt8]]) throws -> [AttendanceVerdict] {
    try vetted.map { bytes in
        let event = try ProtocolCodec.wire.decode(VettedEvent.self, from: bytes)
        return AttendanceVerdict(
            requestId: event.raw.requestId, idempotencyKey: event.raw.idempotencyKey, userId: event.raw.userId,
            deviceId: event.raw.deviceId, siteId: event.raw.siteId, outcome: .accepted, serverReceiptId: "rcpt_01J8ZQ6W9T",
            sessionId: "ses_01J8ZQ6WA2", policyVersion: 7, eventTime: event.raw.receivedAt, decidedAt: Date(),
            gatewayInstance: "gateway-0")
    }
}

struct Figure {
    var name: String
    var ours: Double
    var foundation: Double
}

/// Best of `rounds` runs, in nanoseconds per message.
func nanosecondsPerMessage(baseline: Bool = false, _ body: () throws -> Int) rethrows -> Double {
    if baseline, !measuresFoundation { return .nan }
    var best = Double.infinity
    let clock = ContinuousClock()
    for _ in 0..<rounds {
        var checksum = 0
        let elapsed = try clock.measure { checksum = try body() }
        precondition(checksum >= 0)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        best = min(best, seconds * 1e9 / Double(messages))
    }
    return best
}

let vetted = try makeVettedEvents()
let verdictValues = try verdicts(for: vetted)
let envelopes = try vetted.map { try ProtocolCodec.wire.decode(VettedEvent.self, from: $0).raw }
let devicePayloads = try envelopes.map { envelope -> [UInt8] in
    guard case .event(let event) = envelope.payload else { fatalError("the template is an event") }
    return try ProtocolCodec.wire.encode(event)
}
let foundationDecoder = JSONDecoder()
let foundationEncoder = JSONEncoder()

var figures: [Figure] = []
figures.append(
    Figure(
        name: "merger: decode a vetted event",
        ours: try nanosecondsPerMessage {
            try vetted.reduce(0) { sum, bytes in
                let (record, raw) = try ProtocolCodec.wire.decode(VettedEventRecord.self, from: bytes, keepingSourceOf: "raw")
                return sum + record.raw.userId.utf8.count + (raw?.count ?? 0)
            }
        },
        foundation: try nanosecondsPerMessage(baseline: true) {
            try vetted.reduce(0) { sum, bytes in
                sum + (try foundationDecoder.decode(VettedEventRecord.self, from: Data(bytes))).raw.userId.utf8.count
            }
        }))
figures.append(
    Figure(
        name: "merger: encode a verdict",
        ours: try nanosecondsPerMessage { try verdictValues.reduce(0) { $0 + (try ProtocolCodec.wire.encode($1)).count } },
        foundation: try nanosecondsPerMessage(baseline: true) {
            try verdictValues.reduce(0) { $0 + (try foundationEncoder.encode($1)).count }
        }))
figures.append(
    Figure(
        name: "gateway: decode a device payload",
        ours: try nanosecondsPerMessage {
            try devicePayloads.reduce(0) { $0 + (try ProtocolCodec.wire.decode(AttendanceEvent.self, from: $1)).userId.utf8.count }
        },
        foundation: try nanosecondsPerMessage(baseline: true) {
            try devicePayloads.reduce(0) { $0 + (try foundationDecoder.decode(AttendanceEvent.self, from: Data($1))).userId.utf8.count }
        }))
figures.append(
    Figure(
        name: "gateway: encode a raw envelope",
        ours: try nanosecondsPerMessage { try envelopes.reduce(0) { $0 + (try ProtocolCodec.wire.encode($1)).count } },
        foundation: try nanosecondsPerMessage(baseline: true) { try envelopes.reduce(0) { $0 + (try foundationEncoder.encode($1)).count } })
)

print("== wire codec, one core, \(messages) messages, best of \(rounds) (µs per message) ==")
for figure in figures {
    let padded = figure.name.padding(toLength: 36, withPad: " ", startingAt: 0)
    print(
        String(
            format: "%@ %7.2f   Foundation %7.2f   ratio %.2fx", padded, figure.ours / 1_000, figure.foundation / 1_000,
            figure.foundation / figure.ours))
}
