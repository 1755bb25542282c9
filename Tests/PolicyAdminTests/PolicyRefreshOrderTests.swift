import Foundation
import Logging
import PolicyServiceCore
import Synchronization
import Testing

@testable import PolicyService

/// Refreshes that overlap (the timer's and an admin call's): the book whose read of the store began
/// later is the one the pipeline keeps, whichever finishes last.
@Suite("Policy book refreshes that overlap")
struct PolicyRefreshOrderTests {
    /// A store whose first read is held until `release` and answers what the store held then (version
    /// 5); every later read answers version 6.
    final class SlowFirstRead: PolicyRepository {
        let reads = Mutex(0)
        let (released, release) = AsyncStream.makeStream(of: Void.self)
        let (started, firstReadStarted) = AsyncStream.makeStream(of: Void.self)

        func activePolicies() async throws -> StoredPolicies {
            let read = reads.withLock { n -> Int in
                n += 1
                return n
            }
            let version = read == 1 ? 5 : 6
            if read == 1 {
                firstReadStarted.yield()
                for await _ in released { break }
            }
            return StoredPolicies(policies: [SitePolicy(siteId: "S_HQ", version: version, automaticAttendance: version == 5)])
        }

        func versions(siteId: String?, limit: Int) async throws -> [StoredPolicyVersion] { [] }
        func version(siteId: String?, version: Int) async throws -> StoredPolicyVersion? { nil }
        func save(_ draft: SitePolicyDraft, siteId: String?, atLeast: Int, by: String) async throws -> StoredPolicyVersion {
            throw CancellationError()
        }
        func setGlobalKillSwitch(_ on: Bool, by: String) async throws {}
    }

    @Test("an earlier read that finishes last does not put its older book back")
    func anEarlierReadFinishingLastKeepsTheLaterBook() async throws {
        let store = SlowFirstRead()
        let applied = Mutex<[Int]>([])
        let refresher = PolicyBookRefresher(
            base: PolicyBook(), repository: store, hostedRules: PolicyEngine.standard.ruleIDs, logger: Logger(label: "refresh-order")
        ) { book in
            applied.withLock { $0.append(book.sites["S_HQ"]?.version ?? 0) }
        }
        async let slow = refresher.refresh()
        for await _ in store.started { break }
        // The admin call's refresh reads after the change was stored, and finishes first.
        #expect(try await refresher.refresh().sites["S_HQ"]?.version == 6)
        store.release.yield()
        #expect(try await slow.sites["S_HQ"]?.version == 6)
        #expect(refresher.current.sites["S_HQ"]?.version == 6)
        #expect(applied.withLock { $0 } == [6])
    }
}
