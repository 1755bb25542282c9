import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import ServiceRuntime
import SessionMergerCore

/// Periodically lets time act on sessions nobody sends events for: open sessions with no presence
/// past the idle cutoff close (`presence_timeout`), check-outs past the noise threshold become soft
/// exits, soft exits past the grace close. Only timelines whose `next_check_at` has come are loaded
/// (`SessionTimeline.nextTimeDrivenChange`), a chunk per transaction, skipping any a batch holds;
/// the changes go through the outbox like the batch's.
package final class IdleSweeper: Service, Sendable {
    private let client: PostgresClient
    private let configuration: SessionMergerConfiguration
    private let logger: Logger
    private let clock: @Sendable () -> Date

    package init(
        client: PostgresClient, configuration: SessionMergerConfiguration, logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.client = client
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
    }

    package func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { [configuration] in try await Task.sleep(for: configuration.idleSweepInterval) }
            guard !Task.isShuttingDownGracefully, !Task.isCancelled else { break }
            do {
                let changes = try await sweep(now: clock())
                if changes > 0 { logger.info("idle sweep changed sessions", metadata: ["changes": "\(changes)"]) }
            } catch {
                logger.error(
                    "idle sweep failed; trying again next period", metadata: ["error": .string(PostgresFailure.description(of: error))])
            }
        }
    }

    /// Sweeps every due timeline. - Returns: the number of session changes written.
    @discardableResult
    package func sweep(now: Date) async throws -> Int {
        var total = 0
        while true {
            let (timelines, changes) = try await sweepChunk(now: now)
            total += changes
            if timelines < configuration.idleSweepBatchSize { return total }
        }
    }

    private func sweepChunk(now: Date) async throws -> (timelines: Int, changes: Int) {
        let configuration = self.configuration
        let logger = self.logger
        return try await PostgresFailure.unwrapping {
            try await client.withTransaction(logger: logger) { connection in
                var timelines = try await MergerStore.lockDueTimelines(
                    now: now, limit: configuration.idleSweepBatchSize, policy: configuration.policy, on: connection, logger: logger)
                var changes: [SessionDelta] = []
                for key in timelines.keys.sorted() {
                    changes += timelines[key]!.timeline.closeIdle(now: now)
                    if timelines[key]!.timeline.eventCount > configuration.compactionThreshold {
                        changes += timelines[key]!.timeline.compact(now: now).changes
                    }
                }
                try await MergerStore.saveTimelines(timelines, on: connection, logger: logger)
                try await MergerStore.applySessionChanges(changes, changedAt: now, on: connection, logger: logger)
                return (timelines.count, changes.count)
            }
        }
    }
}
