import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import Hummingbird
import HummingbirdTesting
import LocalStackTesting
import Logging
import NIOCore
import PostgresNIO
import RegistryFeed
import ServiceRuntime
import SessionMergerCore
import Testing

@testable import SessionMergerService

/// The admin REST routes over the real local PostgreSQL: registry API keys, sessions written by the
/// batch processor, the site's shift from a registry feed cache.
struct AdminHarness: Sendable {
    let db: MergerDB
    let admin: String
    let viewer: String
    let revoked: String
    let siteId: String
    let lateUser: String
    let onTimeUser: String
    /// The local day (Asia/Ho_Chi_Minh) the fixture's attendance is on.
    let day: CalendarDate

    static let zone = TimeZone(identifier: "Asia/Ho_Chi_Minh")!

    /// A passer-by checked in at `door` and out four minutes later, on offsets from 4 on: their user id.
    /// The check-out reaches the merger six minutes after it was made, past the soft-exit grace, so the
    /// session is closed by it at once (the timeline's clock is its latest receipt).
    func addPasser(at door: Date) async throws -> String {
        let passer = "u-passer-\(UUID().uuidString.prefix(8))"
        let out = door.addingTimeInterval(240)
        try await db.process(
            [
                Make.checkIn(user: passer, site: siteId, at: door, sessionKey: "sk-\(passer)", received: door),
                Make.checkOut(user: passer, at: out, sessionKey: "sk-\(passer)", received: out.addingTimeInterval(360)),
            ], from: 4)
        return passer
    }

    /// The fixture site's shift: 08:30-17:30, an hour's allowance before, two after.
    static let dayShift = ShiftSettings(
        start: TimeOfDay(hour: 8, minute: 30)!, end: TimeOfDay(hour: 17, minute: 30)!, checkInBeforeStartMinutes: 60,
        checkOutAfterEndMinutes: 120, lateEntryGraceMinutes: 10, earlyExitGraceMinutes: 5)

    static func run(
        shift: ShiftSettings = dayShift, minimumPresence: TimeInterval = AttendancePresence.defaultMinimumSeconds,
        maxDailyReportSessions: Int = MergerAdminLimits.maxDailyReportSessions,
        _ body: @escaping @Sendable (AdminHarness, any TestClientProtocol) async throws -> Void
    ) async throws {
        // The registry's API keys in a schema of their own, read by the merger as it reads the registry's.
        try await LocalStack.withMigratedSchema(.registry, prefix: "registry_merger") { registryClient, registrySchema in
            try await MergerDB.run { db in
                let logger = MergerDB.logger
                let signer = try DeviceTokenSigner(
                    activeKey: try DeviceSigningKey(id: "merger-test", secret: Array(repeating: 7, count: 32)))
                let registry = PostgresRegistryRepository(client: registryClient, logger: logger, tokenSigner: signer)
                let admin = try await registry.createAPIKey(name: "merger-test admin", role: .admin)
                let viewer = try await registry.createAPIKey(name: "merger-test viewer", role: .viewer)
                let revoked = try await registry.createAPIKey(name: "merger-test revoked", role: .admin)
                _ = try await registry.revokeAPIKey(id: revoked.key.id)

                // The registry's site as it publishes it on registry.changes.
                let siteId = "site-\(token())"
                let site = Site(
                    id: siteId, organizationId: "org-\(token())", name: "Head office", timezone: zone.identifier,
                    geofence: Geofence(latitude: 10.7769, longitude: 106.7009, radiusMeters: 200),
                    shift: shift, createdAt: Date())
                let cache = RegistryCache()
                cache.apply(.upsert(try RegistryChange.upsert(.site, id: siteId, version: 1, changedAt: Date(), entity: site)))

                // Three days ago, local time: one user late and early, one on time.
                var calendar = Calendar(identifier: .gregorian)
                calendar.timeZone = zone
                let dayStart = calendar.startOfDay(for: Date().addingTimeInterval(-3 * 86_400))
                let parts = calendar.dateComponents([.year, .month, .day], from: dayStart)
                let day = try #require(CalendarDate(year: parts.year!, month: parts.month!, day: parts.day!))
                func at(_ h: Int, _ m: Int) -> Date { dayStart.addingTimeInterval(Double(h * 3_600 + m * 60)) }
                let lateUser = "u-late-\(token())", onTimeUser = "u-ontime-\(token())"
                try await db.process(
                    [
                        Make.checkIn(user: lateUser, site: siteId, at: at(8, 50), sessionKey: "sk-\(lateUser)", received: at(8, 50)),
                        Make.checkOut(user: lateUser, at: at(17, 0), sessionKey: "sk-\(lateUser)", received: at(17, 0)),
                        Make.checkIn(user: onTimeUser, site: siteId, at: at(8, 20), sessionKey: "sk-\(onTimeUser)", received: at(8, 20)),
                        Make.checkOut(user: onTimeUser, at: at(17, 45), sessionKey: "sk-\(onTimeUser)", received: at(17, 45)),
                    ], from: 0)

                let router = buildRouter(
                    sessions: PostgresSessionQueryRepository(client: db.client, logger: logger),
                    shifts: RegistryCacheShiftProvider(cache: cache, isReady: { true }),
                    keyVerifier: PostgresAdminKeyVerifier(client: db.client, schema: registrySchema, logger: logger),
                    groupId: db.configuration.consumer.groupId, minimumPresence: minimumPresence,
                    maxDailyReportSessions: maxDailyReportSessions)
                let harness = AdminHarness(
                    db: db, admin: admin.secret, viewer: viewer.secret, revoked: revoked.secret, siteId: siteId,
                    lateUser: lateUser, onTimeUser: onTimeUser, day: day)
                try await Application(router: router).test(.router) { client in
                    try await body(harness, client)
                }
            }
        }
    }
}

extension TestClientProtocol {
    func get(_ uri: String, key: String?, accept: String? = nil) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let key { headers[.authorization] = "Bearer \(key)" }
        if let accept { headers[.accept] = accept }
        return try await execute(uri: uri, method: .get, headers: headers, body: nil)
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }

    func decode<T: Decodable>(_ type: T.Type, sourceLocation: SourceLocation = #_sourceLocation) throws -> T {
        #expect(status == .ok, "\(text)", sourceLocation: sourceLocation)
        return try AdminJSON.decoder().decode(T.self, from: Data(text.utf8))
    }

    /// The problem+json body, expecting `status`; returns the fields it names.
    @discardableResult
    func problem(_ expected: HTTPResponse.Status, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        #expect(status == expected, "\(text)", sourceLocation: sourceLocation)
        #expect(headers[.contentType] == ProblemDetails.mediaType, sourceLocation: sourceLocation)
        let problem = try JSONDecoder().decode(ProblemDetails.self, from: Data(text.utf8))
        #expect(problem.status == expected.code, sourceLocation: sourceLocation)
        return problem.errors?.map(\.field) ?? []
    }
}

extension SessionMergerServiceTests {
    @Suite("Admin REST", .timeLimit(.minutes(3)))
    struct AdminAPITests {
        @Test func keysAreRequiredAndRolesChecked() async throws {
            try await AdminHarness.run { h, client in
                let uri = "/v1/admin/sessions?siteId=\(h.siteId)"
                try await client.get(uri, key: nil).problem(.unauthorized)
                try await client.get(uri, key: "brk_nonsense").problem(.unauthorized)
                try await client.get(uri, key: h.revoked).problem(.unauthorized)
                #expect(try await client.get(uri, key: h.viewer).status == .ok)
                // Operations data needs the admin role.
                try await client.get("/v1/admin/pipeline", key: h.viewer).problem(.forbidden)
                let status = try await client.get("/v1/admin/pipeline", key: h.admin).decode(PipelineStatus.self)
                #expect(status.groupId == h.db.configuration.consumer.groupId)
                #expect(status.offsets.map(\.nextOffset) == [4])
            }
        }

        @Test func sessionsByUserSiteAndTimeWithPages() async throws {
            try await AdminHarness.run { h, client in
                let mine = try await client.get("/v1/admin/sessions?userId=\(h.lateUser)", key: h.viewer).decode(SessionPage.self)
                #expect(mine.items.count == 1)
                #expect(mine.items.first?.status == "closed")
                #expect(mine.items.first?.closeReason == "check_out")
                #expect(mine.items.first?.eventCount == 2)
                #expect(mine.nextCursor == nil)

                let first = try await client.get("/v1/admin/sessions?siteId=\(h.siteId)&limit=1", key: h.viewer).decode(SessionPage.self)
                #expect(first.items.map(\.userId) == [h.onTimeUser])
                let cursor = try #require(first.nextCursor)
                let second = try await client.get("/v1/admin/sessions?siteId=\(h.siteId)&limit=1&cursor=\(cursor)", key: h.viewer).decode(
                    SessionPage.self)
                #expect(second.items.map(\.userId) == [h.lateUser])
                #expect(second.nextCursor == nil)

                let checkIn = try #require(second.items.first?.checkInAt)
                let from = WireTimestamp.string(from: checkIn)
                let window = try await client.get("/v1/admin/sessions?siteId=\(h.siteId)&from=\(from)", key: h.viewer).decode(
                    SessionPage.self)
                #expect(window.items.map(\.userId) == [h.lateUser])
                let open = try await client.get("/v1/admin/sessions?siteId=\(h.siteId)&status=open", key: h.viewer).decode(SessionPage.self)
                #expect(open.items.isEmpty)
            }
        }

        @Test("paging one session at a time through check-ins on odd milliseconds returns each once, then ends")
        func pagesOfOneAtOddMilliseconds() async throws {
            try await AdminHarness.run { h, client in
                let user = "u-ms-\(token())", base = Date().addingTimeInterval(-2 * 86_400)
                var events: [VettedEvent] = []
                for (n, ms) in [0.074, 0.222, 0.5].enumerated() {
                    let checkIn = base.addingTimeInterval(Double(n) * 7_200 + ms), checkOut = checkIn.addingTimeInterval(1_800)
                    events.append(Make.checkIn(user: user, site: h.siteId, at: checkIn, sessionKey: "sk-\(user)-\(n)", received: checkIn))
                    events.append(Make.checkOut(user: user, at: checkOut, sessionKey: "sk-\(user)-\(n)", received: checkOut))
                }
                try await h.db.process(events, from: 4)
                var seen: [String] = [], cursor: String?
                for _ in 0..<6 {
                    let uri = "/v1/admin/sessions?userId=\(user)&limit=1" + (cursor.map { "&cursor=\($0)" } ?? "")
                    let page = try await client.get(uri, key: h.viewer).decode(SessionPage.self)
                    seen += page.items.map(\.sessionId)
                    cursor = page.nextCursor
                    if cursor == nil { break }
                }
                #expect(seen.count == 3 && Set(seen).count == 3, "\(seen)")
                #expect(cursor == nil)
            }
        }

        @Test("a night shift's row counts the presence after midnight, whatever the requested range ends with")
        func aNightShiftsRowSeesThePresenceAfterMidnight() async throws {
            let night = ShiftSettings(
                start: TimeOfDay(hour: 22, minute: 0)!, end: TimeOfDay(hour: 6, minute: 0)!, checkInBeforeStartMinutes: 60,
                checkOutAfterEndMinutes: 60, lateEntryGraceMinutes: 0, earlyExitGraceMinutes: 0)
            try await AdminHarness.run(shift: night) { h, client in
                var calendar = Calendar(identifier: .gregorian)
                calendar.timeZone = AdminHarness.zone
                let day = h.day.previous
                let dayStart = try #require(
                    calendar.date(from: DateComponents(year: day.year, month: day.month, day: day.day, hour: 0, minute: 0)))
                func at(_ h: Int, _ m: Int) -> Date { dayStart.addingTimeInterval(Double(h * 3_600 + m * 60)) }
                let user = "u-night-\(token())"
                // 21:55 to 01:00, a break, then 01:20 to 06:05 the next morning.
                try await h.db.process(
                    [
                        Make.checkIn(user: user, site: h.siteId, at: at(21, 55), sessionKey: "sk-\(user)-1", received: at(21, 55)),
                        Make.checkOut(user: user, at: at(25, 0), sessionKey: "sk-\(user)-1", received: at(25, 0)),
                        Make.checkIn(user: user, site: h.siteId, at: at(25, 20), sessionKey: "sk-\(user)-2", received: at(25, 20)),
                        Make.checkOut(user: user, at: at(30, 5), sessionKey: "sk-\(user)-2", received: at(30, 5)),
                    ], from: 4)
                for to in [day, day.next] {
                    let uri = "/v1/admin/attendance/daily?siteId=\(h.siteId)&userId=\(user)&from=\(day)&to=\(to)"
                    let report = try await client.get(uri, key: h.viewer).decode(DailyAttendanceReport.self)
                    let row = try #require(report.items.first { $0.date == day }, "to=\(to)")
                    #expect(!row.late && !row.earlyExit, "to=\(to): \(row)")
                }
            }
        }

        @Test("daily attendance at the first and last dates a query may name: an empty answer, never a 5xx")
        func dailyAttendanceAtTheEdgesOfTheCalendar() async throws {
            try await AdminHarness.run { h, client in
                for day in ["0000-01-01", "9999-12-31"] {
                    let uri = "/v1/admin/attendance/daily?siteId=\(h.siteId)&from=\(day)&to=\(day)"
                    let report = try await client.get(uri, key: h.viewer).decode(DailyAttendanceReport.self)
                    #expect(report.items.isEmpty, "\(day)")
                }
            }
        }

        /// A session that began more than 31 days before the range (a phone that never went 12 hours
        /// without a heartbeat) still counts on the range's days.
        @Test func aSessionLongerThanAMonthCountsOnEveryDayItCovers() async throws {
            try await AdminHarness.run { h, client in
                try await h.db.client.query(
                    "UPDATE sessions SET check_in_at = check_in_at - interval '40 days' WHERE user_id = \(h.lateUser)",
                    logger: MergerDB.logger)
                let uri = "/v1/admin/attendance/daily?siteId=\(h.siteId)&userId=\(h.lateUser)&from=\(h.day)&to=\(h.day)"
                let report = try await client.get(uri, key: h.viewer).decode(DailyAttendanceReport.self)
                let row = try #require(report.items.first { $0.userId == h.lateUser && $0.date == h.day }, "\(report.items)")
                #expect(!row.late && row.workedMinutes > 0)
            }
        }

        @Test func dailyAttendanceAsJSONAndCSV() async throws {
            try await AdminHarness.run { h, client in
                let uri = "/v1/admin/attendance/daily?siteId=\(h.siteId)&from=\(h.day)&to=\(h.day)"
                let report = try await client.get(uri, key: h.viewer).decode(DailyAttendanceReport.self)
                #expect(report.timezone == "Asia/Ho_Chi_Minh")
                #expect(report.items.count == 2)
                let late = try #require(report.items.first { $0.userId == h.lateUser })
                #expect(late.date == h.day)
                #expect(late.workedMinutes == 8 * 60 + 10)
                #expect(late.late)
                #expect(late.lateMinutes == 20)
                #expect(late.earlyExit)
                #expect(late.earlyExitMinutes == 30)
                let onTime = try #require(report.items.first { $0.userId == h.onTimeUser })
                #expect(!onTime.late)
                #expect(!onTime.earlyExit)
                #expect(onTime.workedMinutes == 9 * 60 + 25)

                let single = try await client.get(uri + "&userId=\(h.onTimeUser)", key: h.viewer).decode(DailyAttendanceReport.self)
                #expect(single.items.map(\.userId) == [h.onTimeUser])

                for response in [
                    try await client.get(uri + "&format=csv", key: h.viewer), try await client.get(uri, key: h.viewer, accept: "text/csv"),
                ] {
                    #expect(response.status == .ok)
                    #expect(response.headers[.contentType]?.hasPrefix("text/csv") == true)
                    #expect(response.headers[.contentDisposition]?.hasPrefix("attachment; filename=") == true)
                    let lines = response.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
                    #expect(lines.first == DailyAttendanceCSV.header.joined(separator: ","))
                    #expect(lines.count == 3)
                    let lateLine = try #require(lines.first { $0.hasPrefix(h.lateUser + ",") })
                    #expect(lateLine.contains(",490,true,20,true,30,true,"))
                }
                // Next day: nothing.
                let next = h.day.next
                let empty = try await client.get("/v1/admin/attendance/daily?siteId=\(h.siteId)&from=\(next)&to=\(next)", key: h.viewer)
                    .decode(DailyAttendanceReport.self)
                #expect(empty.items.isEmpty)

                // A passer-by's four minutes at the door: the session is kept, and it is not attendance.
                let passer = try await h.addPasser(at: try #require(late.firstIn).addingTimeInterval(300))
                let kept = try await client.get("/v1/admin/sessions?userId=\(passer)", key: h.viewer).decode(SessionPage.self)
                #expect(kept.items.count == 1 && kept.items.first?.closeReason == "check_out", "\(kept.items)")
                let after = try await client.get(uri, key: h.viewer).decode(DailyAttendanceReport.self)
                #expect(after.items.map(\.userId).sorted() == [h.lateUser, h.onTimeUser].sorted())
            }
        }

        @Test func withTheMinimumPresenceOffAPassersSessionIsAttendance() async throws {
            try await AdminHarness.run(minimumPresence: 0) { h, client in
                let uri = "/v1/admin/attendance/daily?siteId=\(h.siteId)&from=\(h.day)&to=\(h.day)"
                let before = try await client.get(uri, key: h.viewer).decode(DailyAttendanceReport.self)
                let firstIn = try #require(before.items.first { $0.userId == h.lateUser }?.firstIn)
                let passer = try await h.addPasser(at: firstIn.addingTimeInterval(300))
                let after = try await client.get(uri, key: h.viewer).decode(DailyAttendanceReport.self)
                #expect(after.items.map(\.userId).sorted() == [h.lateUser, h.onTimeUser, passer].sorted())
            }
        }

        /// A report that would read more sessions than one request may hold is refused with what fits,
        /// not built in memory.
        @Test func aReportOverItsSessionBoundIsRefusedNamingWhatFits() async throws {
            try await AdminHarness.run(maxDailyReportSessions: 1) { h, client in
                let uri = "/v1/admin/attendance/daily?siteId=\(h.siteId)&from=\(h.day)&to=\(h.day)"
                let refused = try await client.get(uri, key: h.viewer)
                #expect(refused.status == .badRequest)
                #expect(refused.text.contains("more than 1 sessions; ask for fewer days or one user"), "\(refused.text)")
                #expect(refused.text.contains(#""field":"userId""#), "\(refused.text)")
                // One user's report fits.
                let single = try await client.get(uri + "&userId=\(h.lateUser)", key: h.viewer).decode(DailyAttendanceReport.self)
                #expect(single.items.map(\.userId) == [h.lateUser])
            }
        }

        /// A disputed record: a user's events of one local day, accepted and refused, with their receipt,
        /// decision and session, one page at a time; another user's are not among them.
        @Test func aUsersEventsAcceptedAndRefusedByEventTimeWithPages() async throws {
            try await AdminHarness.run { h, client in
                let sessions = try await client.get("/v1/admin/sessions?userId=\(h.lateUser)", key: h.viewer).decode(SessionPage.self)
                let session = try #require(sessions.items.first?.sessionId)
                // A refused check-in of the same user that morning, received late.
                let day = try await client.get("/v1/admin/events?userId=\(h.lateUser)", key: h.viewer).decode(RecordedEventPage.self)
                let checkIn = try #require(day.items.first)
                let refusedAt = checkIn.eventTime.addingTimeInterval(-1_800)
                try await h.db.process(
                    [
                        Make.checkIn(
                            user: h.lateUser, site: h.siteId, at: refusedAt, sessionKey: "sk-refused", key: "k-refused-\(token())",
                            received: refusedAt.addingTimeInterval(90), decision: Make.reject())
                    ], from: 10)

                let all = try await client.get("/v1/admin/events?userId=\(h.lateUser)", key: h.viewer).decode(RecordedEventPage.self)
                #expect(all.items.map(\.outcome) == ["rejected", "accepted", "accepted"])
                #expect(all.items.map(\.type) == ["checkin", "checkin", "checkout"])
                #expect(all.nextCursor == nil)
                let refused = try #require(all.items.first)
                #expect(refused.reasons == ["no walking detected before the punch"])
                #expect(refused.action == "walk_to_gate")
                #expect(refused.sessionId == nil)
                #expect(refused.receivedAt.timeIntervalSince(refused.eventTime) == 90)
                #expect(all.items.dropFirst().map(\.sessionId) == [session, session])
                #expect(all.items.allSatisfy { $0.deviceId == "dev-\(h.lateUser)" })

                // One at a time, in the same order, then the end.
                let paged = try await Self.eventsOneAtATime(of: h.lateUser, client: client, key: h.viewer)
                #expect(paged.map(\.idempotencyKey) == all.items.map(\.idempotencyKey))

                // A window of event time: only the refused one.
                let from = WireTimestamp.string(from: refusedAt.addingTimeInterval(-1))
                let to = WireTimestamp.string(from: refusedAt.addingTimeInterval(1))
                let window = try await client.get("/v1/admin/events?userId=\(h.lateUser)&from=\(from)&to=\(to)", key: h.viewer)
                    .decode(RecordedEventPage.self)
                #expect(window.items.map(\.outcome) == ["rejected"])
                let nobody = try await client.get("/v1/admin/events?userId=u-nobody-\(token())", key: h.viewer)
                    .decode(RecordedEventPage.self)
                #expect(nobody.items.isEmpty)
                try await client.get("/v1/admin/events?userId=\(h.lateUser)", key: nil).problem(.unauthorized)
            }
        }

        /// A user at two sites: each site's events are read in time order on their own, and a page merges
        /// them, page after page, in event-time order.
        @Test func aUsersEventsAtTwoSitesComeInTimeOrderPageByPage() async throws {
            try await AdminHarness.run { h, client in
                let user = "u-two-sites-\(token())"
                let t0 = Date(timeIntervalSince1970: 1_760_000_000)
                let (a, b) = ("site-a-\(token())", "site-b-\(token())")
                try await h.db.process(
                    [
                        Make.checkIn(user: user, site: a, at: t0, sessionKey: "sk-a1", key: "k-a1-\(token())", received: t0),
                        Make.checkIn(
                            user: user, site: b, at: t0 + 3_600, sessionKey: "sk-b1", key: "k-b1-\(token())", received: t0 + 3_600),
                        Make.checkIn(
                            user: user, site: a, at: t0 + 7_200, sessionKey: "sk-a2", key: "k-a2-\(token())", received: t0 + 7_200),
                        Make.checkIn(
                            user: user, site: b, at: t0 + 10_800, sessionKey: "sk-b2", key: "k-b2-\(token())", received: t0 + 10_800),
                    ], from: 20)
                let paged = try await Self.eventsOneAtATime(of: user, client: client, key: h.viewer)
                #expect(paged.map(\.siteId) == [a, b, a, b])
                #expect(paged.map(\.eventTime) == [t0, t0 + 3_600, t0 + 7_200, t0 + 10_800])
            }
        }

        /// A user's events read a page of one at a time, following the cursors (at most 10).
        static func eventsOneAtATime(of user: String, client: some TestClientProtocol, key: String) async throws -> [RecordedEventView] {
            var events: [RecordedEventView] = []
            var cursor: String?
            repeat {
                let uri = "/v1/admin/events?userId=\(user)&limit=1" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await client.get(uri, key: key).decode(RecordedEventPage.self)
                events += page.items
                cursor = page.nextCursor
            } while cursor != nil && events.count < 10
            return events
        }

        /// An opaque cursor carrying `text`, as the API encodes one (base64url without padding).
        static func cursor(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }

        @Test func badInputIsA400NamingTheParameter() async throws {
            try await AdminHarness.run { h, client in
                let s = "/v1/admin/sessions"
                let d = "/v1/admin/attendance/daily"
                let e = "/v1/admin/events"
                let cases: [(String, String)] = [
                    ("\(e)", "userId"),
                    ("\(e)?userId=", "userId"),
                    ("\(e)?userId=u&from=2025-03-02T00:00:00Z&to=2025-03-01T00:00:00Z", "from"),
                    ("\(e)?userId=u&to=tomorrow", "to"),
                    ("\(e)?userId=u&limit=201", "limit"),
                    ("\(e)?userId=u&cursor=bogus", "cursor"),
                    ("\(e)?userId=u&cursor=\(Self.cursor("s1:1000:x"))", "cursor"),
                    ("\(e)?userId=u&cursor=\(Self.cursor("e1:-1:x"))", "cursor"),
                    ("\(e)?userId=u&cursor=\(Self.cursor("e1:99999999999999999999:x"))", "cursor"),
                    ("\(e)?userId=u&siteId=x", "siteId"),
                    ("\(s)", "userId"),
                    ("\(s)?siteId=\(h.siteId)&from=yesterday", "from"),
                    ("\(s)?siteId=\(h.siteId)&from=2025-03-02T00:00:00Z&to=2025-03-01T00:00:00Z", "from"),
                    ("\(s)?siteId=\(h.siteId)&limit=0", "limit"),
                    ("\(s)?siteId=\(h.siteId)&limit=201", "limit"),
                    ("\(s)?siteId=\(h.siteId)&limit=ten", "limit"),
                    ("\(s)?siteId=\(h.siteId)&cursor=bogus", "cursor"),
                    ("\(s)?siteId=\(h.siteId)&status=lost", "status"),
                    ("\(s)?siteId=\(h.siteId)&color=blue", "color"),
                    ("\(s)?siteId=\(h.siteId)&siteId=other", "siteId"),
                    ("\(s)?siteId=", "siteId"),
                    ("\(d)?from=2025-03-01&to=2025-03-02", "siteId"),
                    ("\(d)?siteId=\(h.siteId)&to=2025-03-02", "from"),
                    ("\(d)?siteId=\(h.siteId)&from=2025-02-30&to=2025-03-02", "from"),
                    ("\(d)?siteId=\(h.siteId)&from=2025-03-01&to=03/02/2025", "to"),
                    ("\(d)?siteId=\(h.siteId)&from=2025-03-02&to=2025-03-01", "from"),
                    ("\(d)?siteId=\(h.siteId)&from=2025-01-01&to=2025-04-03", "to"),
                    ("\(d)?siteId=\(h.siteId)&from=2025-03-01&to=2025-03-02&format=xml", "format"),
                    ("\(d)?siteId=\(h.siteId)&from=2025-03-01&to=2025-03-02&page=2", "page"),
                    // Hostile input: a cursor whose time no timestamp holds (it used to end the process),
                    // one before 1970, one whose session id carries a NUL; NUL in any parameter.
                    ("\(s)?siteId=x&cursor=czE6OTIyMzM3MjAzNjg1NDc3NTgwNzp4", "cursor"),
                    ("\(s)?siteId=x&cursor=\(Self.cursor("s1:-210866803200001:x"))", "cursor"),
                    ("\(s)?siteId=x&cursor=\(Self.cursor("s1:1000:a\u{0}b"))", "cursor"),
                    ("\(s)?userId=a%00b", "userId"),
                    ("\(s)?siteId=a%00b", "siteId"),
                    ("\(s)?siteId=a%1Fb", "siteId"),
                    ("\(d)?siteId=a%00b&from=2025-03-01&to=2025-03-02", "siteId"),
                    ("\(s)%00?siteId=x", "path"),
                ]
                for (uri, field) in cases {
                    let fields = try await client.get(uri, key: h.viewer).problem(.badRequest)
                    #expect(fields.contains(field), "\(uri) -> \(fields)")
                }
                // 92 days inclusive is allowed.
                #expect(try await client.get("\(d)?siteId=\(h.siteId)&from=2025-01-01&to=2025-04-02", key: h.viewer).status == .ok)
                try await client.get("\(d)?siteId=nowhere-\(token())&from=2025-03-01&to=2025-03-02", key: h.viewer).problem(.notFound)
            }
        }
    }
}
