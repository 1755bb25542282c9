import AttendanceProtocol
import Foundation
import Logging
import PolicyServiceCore
import ServiceLifecycle
import Synchronization

/// Keeps the running policy book equal to the file's book overlaid with the store's active
/// versions, without a restart: it reads the store every `interval` (default 2 s, so a change made
/// through any instance's admin REST takes effect on every instance within seconds), and at once
/// after a change through this instance.
///
/// A stored policy this instance cannot run (a rule it does not host, e.g. `gatt_challenge` without
/// the keys) is skipped with an error in the log; the site keeps what it had. A store that cannot be
/// read leaves the current book in place.
package final class PolicyBookRefresher: Service, Sendable {
    private let base: PolicyBook
    private let repository: any PolicyRepository
    private let hostedRules: [PolicyRuleID]
    private let interval: Duration
    private let apply: @Sendable (PolicyBook) -> Void
    private let logger: Logger
    private let state: Mutex<PolicyBook>
    private let refreshes = Atomic<Int>(0)

    package init(
        base: PolicyBook, repository: any PolicyRepository, hostedRules: [PolicyRuleID], interval: Duration = .seconds(2),
        logger: Logger, apply: @escaping @Sendable (PolicyBook) -> Void
    ) {
        self.base = base
        self.repository = repository
        self.hostedRules = hostedRules
        self.interval = interval
        self.apply = apply
        self.logger = logger
        self.state = Mutex(base)
    }

    /// The book the service decides with now.
    package var current: PolicyBook { state.withLock { $0 } }

    /// Successful reads of the store since start.
    package var refreshCount: Int { refreshes.load(ordering: .relaxed) }

    /// Reads the store and applies the result when it differs from the current book.
    @discardableResult
    package func refresh() async throws -> PolicyBook {
        let stored = try await repository.activePolicies()
        let running = current
        var book = base
        for policy in stored.policies {
            let issues = policy.validationIssues(hostedRules: hostedRules)
            guard issues.isEmpty else {
                logger.error(
                    "stored policy skipped: this instance cannot run it",
                    metadata: [
                        "siteId": .string(policy.siteId ?? "default"), "version": "\(policy.version)",
                        "issues": .string(issues.map(\.description).joined(separator: "; ")),
                    ])
                // The scope keeps the policy it runs now (an earlier stored version, say with its kill
                // switch on), never falls back to the file's.
                if let siteId = policy.siteId {
                    if let kept = running.sites[siteId] { book.upsert(kept) }
                } else {
                    book.upsert(running.defaultPolicy)
                }
                continue
            }
            book.upsert(policy)
        }
        if let global = stored.globalKillSwitch { book.globalKillSwitch = global }
        let changed = state.withLock { current -> Bool in
            guard current != book else { return false }
            current = book
            return true
        }
        refreshes.add(1, ordering: .relaxed)
        if changed {
            apply(book)
            logger.info(
                "policy book updated",
                metadata: [
                    "sites": "\(book.sites.count)", "defaultVersion": "\(book.defaultPolicy.version)",
                    "globalKillSwitch": "\(book.globalKillSwitch)",
                ])
        }
        return book
    }

    package func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await refresh()
            } catch {
                logger.warning(
                    "policy store not readable; keeping the current book", metadata: ["error": .string(String(describing: error))])
            }
            let interval = self.interval
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
        }
    }
}
