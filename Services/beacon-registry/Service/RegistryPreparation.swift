import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import KafkaClient
import Logging
import PostgresNIO
import ServiceRuntime

extension BeaconRegistryServer {
    /// Before the registry serves: GATT keys for beacons that have none, the first admin key, and a
    /// feed topic the broker lost, or one ahead of a restored database, refilled from the outbox before
    /// anything reads it (`RegistryFeedRepair`).
    static func prepare(
        repository: PostgresRegistryRepository, settings: RegistryConfiguration, kafka: KafkaConfiguration, feed: String,
        client: PostgresClient,
        logger: Logger
    ) async throws {
        if settings.beaconKeySealer != nil {
            let created = try await repository.backfillBeaconKeys()
            if created > 0 { logger.notice("GATT keys created for beacons that had none", metadata: ["count": "\(created)"]) }
        } else {
            logger.warning("BEACON_KEY_SEAL_KEY is not set: beacons get no GATT key and the policy cannot run gatt_challenge")
        }
        if let file = settings.bootstrapKeyFile {
            try file.checkWritable()
            if let issued = try await BootstrapAdminKey.ensure(repository: repository) {
                try file.write(issued.secret)
                logger.notice(
                    "bootstrap admin API key created", metadata: ["apiKey": .string(issued.key.id), "writtenTo": .string(file.path)])
            }
        }
        let admin = try KafkaAdmin(configuration: kafka, logger: logger)
        try await RegistryFeedRepair.repairIfLost(admin: admin, client: client, topic: feed, logger: logger)
        try await RegistryFeedRepair.repairIfRewound(
            admin: admin, reader: KafkaPartitionReader(configuration: kafka, logger: logger), client: client, topic: feed, logger: logger)
    }
}
