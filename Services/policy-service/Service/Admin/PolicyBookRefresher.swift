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
/// the keys) is skipped with an error in the log, and its scope (a site, or the default) fails closed:
/// it keeps the earlier stored version it runs now, and where it runs none (a fresh instance, or a
/// scope the store names for the first time) it gets the stored policy with automatic attendance
/// off, so its events are answered `manual_checkin`, never judged by a weaker policy. A stored policy
/// with automatic attendance off runs everywhere: no rule is evaluated under it. A stored version
/// this build cannot decode (a newer instance stored it during an upgrade) fails its scope closed the
/// same way, and the rest of the store, the global kill switch included, still applies. A store that
/// cannot be read leaves the current book in place.
package final class PolicyBookRefresher: Service, Sendable {
    private let base: PolicyBook
    private let repository: any PolicyRepository
    private let hostedRules: [PolicyRuleID]
    private let interval: Duration
    private let apply: @Sendable (PolicyBook) -> Void
    private let logger: Logger
    private let state: Mutex<Running>
    private let refreshes = Atomic<Int>(0)
    /// Every refresh takes the next ticket before it reads the store. One that read earlier never
    /// replaces what a later one applied: the timer's refresh and an admin call's may overlap, and the
    /// one whose read started first may finish last, holding the store as it was before the change.
    private let tickets = Atomic<Int>(0)

    /// The book decided with, and the scopes (`nil` for the default) whose policy in it came from the
    /// store rather than from `base`.
    private struct Running {
        var book: PolicyBook
        var storedScopes: Set<String?> = []
        /// The ticket of the refresh that set `book`.
        var ticket = 0
    }

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
        self.state = Mutex(Running(book: base))
    }

    /// The book the service decides with now.
    package var current: PolicyBook { state.withLock { $0.book } }

    /// Successful reads of the store since start.
    package var refreshCount: Int { refreshes.load(ordering: .relaxed) }

    /// Reads the store and applies the result when it differs from the current book.
    @discardableResult
    package func refresh() async throws -> PolicyBook {
        let ticket = tickets.add(1, ordering: .sequentiallyConsistent).newValue
        let stored = try await repository.activePolicies()
        let running = state.withLock { $0 }
        var book = base
        var storedScopes: Set<String?> = []
        for policy in stored.policies {
            storedScopes.insert(policy.siteId)
            // Under automatic attendance off no rule runs, so any instance can run such a policy.
            let issues = policy.automaticAttendance ? policy.validationIssues(hostedRules: hostedRules) : []
            guard issues.isEmpty else {
                logger.error(
                    "stored policy not run: this instance cannot run it; its scope fails closed",
                    metadata: [
                        "siteId": .string(policy.siteId ?? "default"), "version": "\(policy.version)",
                        "issues": .string(issues.map(\.description).joined(separator: "; ")),
                    ])
                book.upsert(Self.closedScope(for: policy, running: running))
                continue
            }
            book.upsert(policy)
        }
        for unreadable in stored.unreadable {
            storedScopes.insert(unreadable.siteId)
            logger.error(
                "stored policy not run: this build cannot read it (stored by a newer version?); its scope fails closed",
                metadata: [
                    "siteId": .string(unreadable.siteId ?? "default"), "version": "\(unreadable.version)",
                    "error": .string(unreadable.reason),
                ])
            book.upsert(
                Self.closedScope(
                    for: SitePolicy(siteId: unreadable.siteId, version: unreadable.version, automaticAttendance: false), running: running))
        }
        if let global = stored.globalKillSwitch { book.globalKillSwitch = global }
        let apply = self.apply
        let (changed, applied) = state.withLock { current -> (Bool, PolicyBook) in
            // A later refresh got here first: it read the store after this one did.
            guard ticket > current.ticket else { return (false, current.book) }
            current.ticket = ticket
            current.storedScopes = storedScopes
            guard current.book != book else { return (false, book) }
            current.book = book
            // Under the lock, so that books reach the pipeline in the order they were set here.
            apply(book)
            return (true, book)
        }
        refreshes.add(1, ordering: .relaxed)
        if changed {
            logger.info(
                "policy book updated",
                metadata: [
                    "sites": "\(book.sites.count)", "defaultVersion": "\(book.defaultPolicy.version)",
                    "globalKillSwitch": "\(book.globalKillSwitch)",
                ])
        }
        return applied
    }

    /// What a scope runs when its stored `policy` cannot be run here: the earlier stored version it
    /// runs now, else `policy` with automatic attendance off.
    private static func closedScope(for policy: SitePolicy, running: Running) -> SitePolicy {
        if running.storedScopes.contains(policy.siteId) {
            if let siteId = policy.siteId, let kept = running.book.sites[siteId] { return kept }
            if policy.siteId == nil { return running.book.defaultPolicy }
        }
        var closed = policy
        closed.automaticAttendance = false
        return closed
    }

    /// After a change this instance stored: applies it now (the other instances on their next refresh).
    /// The change is committed, so a store that cannot be read back just now leaves it to this
    /// instance's next refresh too, and the admin call still answers that it was stored (a 503 would
    /// have the client store it again).
    package func applyStoredChange() async {
        do {
            try await refresh()
        } catch {
            logger.warning(
                "a stored policy change is applied at the next refresh: the store could not be read back",
                metadata: ["error": .string(String(describing: error))])
        }
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
