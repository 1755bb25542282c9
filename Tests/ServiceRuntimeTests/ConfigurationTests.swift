import AttendanceProtocol
import Foundation
import KafkaClient
import Testing

@testable import ServiceRuntime

@Suite("Configuration from the environment")
struct ConfigurationTests {
    /// `body`'s result, given the path of a file holding `contents` (a mounted secret), removed afterwards;
    /// an `EnvironmentReader` reads its files when it is made, so one made in `body` keeps the content.
    static func withSecretFile<T>(_ contents: String, _ body: (String) throws -> T) throws -> T {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("secret")
        try contents.write(to: file, atomically: true, encoding: .utf8)
        return try body(file.path)
    }

    @Test("topics get the configured replicas, and min.insync.replicas 2 from three replicas up")
    func topicReplication() throws {
        let local = try ServiceConfiguration.load(service: "svc", defaultHTTPPort: 8080, from: EnvironmentReader([:]))
        #expect(local.topicReplicationFactor == 1)
        #expect(TopicBootstrap.specs().allSatisfy { $0.replicationFactor == 1 && $0.config["min.insync.replicas"] == nil })
        let cluster = try ServiceConfiguration.load(
            service: "svc", defaultHTTPPort: 8080, from: EnvironmentReader(["TOPIC_REPLICATION_FACTOR": "3"]))
        #expect(cluster.topicReplicationFactor == 3)
        let specs = TopicBootstrap.specs(replicationFactor: cluster.topicReplicationFactor)
        #expect(specs.allSatisfy { $0.replicationFactor == 3 && $0.config["min.insync.replicas"] == "2" })
        // The topic's own settings stay.
        #expect(specs.allSatisfy { $0.config["cleanup.policy"] != nil })
    }

    @Test func defaultsWhenUnset() throws {
        let config = try ServiceConfiguration.load(service: "svc", defaultHTTPPort: 8080, from: EnvironmentReader([:]))
        #expect(config.httpPort == 8080)
        #expect(config.kafka.bootstrapServers == "127.0.0.1:19092")
        var postgres = PostgresConfiguration(
            host: "127.0.0.1", port: 55432, username: "attendance", password: "attendance", database: "attendance")
        // The pool's connections carry the service's name in `pg_stat_activity`.
        postgres.applicationName = "svc"
        #expect(config.postgres == postgres)
        #expect(config.logFormat == .text)
    }

    @Test func brokersMayBeIPv6AddressesInBrackets() throws {
        let brokers = "[::1]:19092, kafka-2:9092,[fd00::5]:9093"
        let config = try ServiceConfiguration.load(
            service: "svc", defaultHTTPPort: 8080, from: EnvironmentReader(["KAFKA_BROKERS": brokers]))
        #expect(config.kafka.bootstrapServers == brokers)
    }

    @Test(arguments: [
        (["HTTP_PORT": "eighty"], "HTTP_PORT"),
        (["HTTP_PORT": "70000"], "HTTP_PORT"),
        (["HTTP_PORT": "-1"], "HTTP_PORT"),
        (["PGPORT": "-1"], "PGPORT"),
        (["LOG_FORMAT": "xml"], "LOG_FORMAT"),
        (["LOG_LEVEL": "loud"], "LOG_LEVEL"),
        (["KAFKA_BROKERS": "localhost"], "KAFKA_BROKERS"),
        (["KAFKA_BROKERS": "::1:9092"], "KAFKA_BROKERS"),
        (["KAFKA_BROKERS": "[]:9092"], "KAFKA_BROKERS"),
        (["DATABASE_URL": "mysql://u:p@h/db"], "DATABASE_URL"),
        (["PG_MAX_CONNECTIONS": "0"], "PG_MAX_CONNECTIONS"),
        (["PG_MAX_CONNECTIONS": "1"], "PG_MAX_CONNECTIONS"),
        (["TOPIC_REPLICATION_FACTOR": "0"], "TOPIC_REPLICATION_FACTOR"),
    ])
    func badValueNamesTheKeyInOneLine(env: [String: String], key: String) {
        do {
            _ = try ServiceConfiguration.load(service: "svc", defaultHTTPPort: 8080, from: EnvironmentReader(env))
            Issue.record("expected a configuration error for \(env)")
        } catch {
            #expect(error.key == key)
            #expect(error.description.hasPrefix("configuration error: \(key)="))
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func databaseURLWinsAndItsPasswordIsNeverPrinted() throws {
        let settings = try PostgresConfiguration.load(
            from: EnvironmentReader(["DATABASE_URL": "postgres://me:s3cret@db:6543/att", "PGPORT": "1"]))
        #expect(settings == PostgresConfiguration(host: "db", port: 6543, username: "me", password: "s3cret", database: "att"))
        do {
            _ = try PostgresConfiguration.load(from: EnvironmentReader(["DATABASE_URL": "postgres://me:s3cret@db:6543/"]))
            Issue.record("expected an error for a URL without a database")
        } catch {
            #expect(!error.description.contains("s3cret"))
        }
        // A URL that cannot be parsed at all (a port that is not a number) keeps its password out of the
        // error too.
        do {
            _ = try PostgresConfiguration.load(from: EnvironmentReader(["DATABASE_URL": "postgres://me:s3cret@db:port/att"]))
            Issue.record("expected an error for an unparseable URL")
        } catch {
            #expect(!error.description.contains("s3cret"), "\(error)")
            #expect(error.description.contains("postgres://***@db:port/att"), "\(error)")
        }
    }

    /// A URL without a password takes PGPASSWORD (a mounted secret, say), as libpq does; a port out of
    /// range, a request for TLS (which the services do not speak) or another parameter is refused, never
    /// connected without it; a value ending in a line end (a secret pasted from a file) is trimmed.
    @Test func databaseURLTakesThePasswordAndRefusesWhatItCannotHonour() throws {
        let withFile = try Self.withSecretFile("from-a-file\n") { path in
            try PostgresConfiguration.load(from: EnvironmentReader(["DATABASE_URL": "postgres://me@db/att\n", "PGPASSWORD_FILE": path]))
        }
        #expect(withFile == PostgresConfiguration(host: "db", port: 5432, username: "me", password: "from-a-file", database: "att"))
        let plain = try PostgresConfiguration.load(from: EnvironmentReader(["DATABASE_URL": "postgres://me:pw@db/att?sslmode=prefer"]))
        #expect(plain.password == "pw")
        for url in [
            "postgres://me:pw@db:0/att", "postgres://me:pw@db:70000/att", "postgres://me:pw@db/att?sslmode=require",
            "postgres://me:pw@db/att?sslmode=verify-full", "postgres://me:pw@db/att?connect_timeout=5",
        ] {
            do {
                _ = try PostgresConfiguration.load(from: EnvironmentReader(["DATABASE_URL": url]))
                Issue.record("expected an error for \(url)")
            } catch {
                #expect(error.key == "DATABASE_URL")
                #expect(!error.description.contains(":pw@"), "\(error)")
            }
        }
    }

    /// An empty secret file would read as unset (a default password, the GATT challenge silently off).
    @Test func anEmptySecretFileIsRefused() throws {
        let env = try Self.withSecretFile(" \n") { EnvironmentReader(["PGPASSWORD_FILE": $0]) }
        let error = #expect(throws: ConfigurationError.self) { try env.checkFileReferences() }
        #expect(error?.key == "PGPASSWORD_FILE")
        #expect(error?.description.contains("is empty") == true, "\(String(describing: error))")
    }

    @Test func booleansAndDurations() throws {
        let env = EnvironmentReader(["A": "yes", "B": "off", "C": "maybe", "T": "250"])
        #expect(try env.bool("A", default: false))
        #expect(try !env.bool("B", default: true))
        #expect(throws: ConfigurationError.self) { try env.bool("C", default: true) }
        #expect(try env.milliseconds("T", default: .milliseconds(1)) == .milliseconds(250))
        #expect(try env.milliseconds("unset", default: .seconds(3)) == .seconds(3))
        #expect(throws: ConfigurationError.self) { try env.milliseconds("T", default: .seconds(3), in: 1_000...2_000) }
    }

    @Test func aConsumerGroupIsReadUnderTheServicesPrefixAndABadBatchSizeIsNamed() throws {
        let base = ConsumerGroupConfiguration(groupId: "svc", maxBatchSize: 500)
        #expect(try base.overridden(prefix: "SVC", from: EnvironmentReader([:])) == base)
        let set = try base.overridden(prefix: "SVC", from: EnvironmentReader(["SVC_GROUP_ID": "svc-b", "SVC_MAX_BATCH": "20"]))
        #expect(set == ConsumerGroupConfiguration(groupId: "svc-b", maxBatchSize: 20))
        for bad in ["0", "10001", "many"] {
            do {
                _ = try base.overridden(prefix: "SVC", from: EnvironmentReader(["SVC_MAX_BATCH": bad]))
                Issue.record("SVC_MAX_BATCH=\(bad) was accepted")
            } catch {
                #expect(error.description.contains("SVC_MAX_BATCH"), "\(error)")
            }
        }
        let consumer = KafkaConsumerConfiguration(client: KafkaConfiguration(bootstrapServers: "b:9092"), group: set, topics: ["t"])
        #expect(consumer.groupId == "svc-b" && consumer.maxBatchSize == 20 && consumer.topics == ["t"])
        let background = KafkaConsumerConfiguration(
            client: KafkaConfiguration(bootstrapServers: "b:9092"), group: set, topics: ["t"], background: true)
        #expect(background.fetchWaitMaxMs == KafkaConsumerConfiguration.backgroundFetchWaitMaxMs && background.maxBatchSize == 20)
    }

    @Test func secretsComeFromFilesWhenTheVariableIsUnset() throws {
        let env = try Self.withSecretFile("c2VjcmV0LWZyb20tYS1maWxl\n") { path in
            EnvironmentReader([
                "GATT_NONCE_KEY_FILE": path, "LOG_LEVEL_FILE": "", "A": "set", "A_FILE": "/nonexistent",
                // Other tools' *_FILE variables are not ours to read or to fail on.
                "TF_CLI_CONFIG_FILE": "/nonexistent/terraformrc",
            ])
        }
        #expect(env.optionalString("GATT_NONCE_KEY") == "c2VjcmV0LWZyb20tYS1maWxl")
        // A value in the environment wins over the file (and its unreadable path is not an error).
        #expect(env.optionalString("A") == "set")
        try env.checkFileReferences()
    }

    /// The gateway signs GATT nonces and the policy service checks them with one reader: the key and
    /// the lifetime (the policy dates a nonce's issue from its expiry and this lifetime).
    @Test func theGattNonceCodecIsReadOneWay() throws {
        #expect(try GattNonceCodec.fromEnvironment(EnvironmentReader([:])) == nil)
        let key = Data(repeating: 7, count: 16).base64EncodedString()
        #expect(try GattNonceCodec.fromEnvironment(EnvironmentReader(["GATT_NONCE_KEY": key]))?.lifetime == 60)
        let long = try #require(
            try GattNonceCodec.fromEnvironment(EnvironmentReader(["GATT_NONCE_KEY": key, "GATT_NONCE_TTL_SECONDS": "600"])))
        #expect(long.lifetime == 600)
        for bad in [
            ["GATT_NONCE_KEY": "c2hvcnQ="], ["GATT_NONCE_KEY": key, "GATT_NONCE_TTL_SECONDS": "4"], ["GATT_NONCE_TTL_SECONDS": "abc"],
        ] {
            #expect(throws: ConfigurationError.self) { try GattNonceCodec.fromEnvironment(EnvironmentReader(bad)) }
        }
    }

    /// A rotated nonce key keeps checking: a check-in a phone held offline for days carries a nonce of
    /// the key before, which a single new key judged forged (refused for good where the challenge is
    /// enforced).
    @Test func aRotatedGattNonceKeyKeepsCheckingUntilDropped() throws {
        let old = Data(repeating: 7, count: 32).base64EncodedString()
        let new = Data(repeating: 9, count: 32).base64EncodedString()
        let before = try #require(try GattNonceCodec.fromEnvironment(EnvironmentReader(["GATT_NONCE_KEY": old])))
        let rotated = try #require(try GattNonceCodec.fromEnvironment(EnvironmentReader(["GATT_NONCE_KEY": "\(new), \(old)"])))
        let alone = try #require(try GattNonceCodec.fromEnvironment(EnvironmentReader(["GATT_NONCE_KEY": new])))
        let beacon = try #require(RegistryBeaconKey(uuid: UUID(), major: 1, minor: 2))
        let now = Date()
        let held = before.issue(beacon: beacon, deviceId: "dev_1", now: now).nonce
        #expect(rotated.check(held, beacon: beacon, deviceId: "dev_1", at: now) == .valid(expiresAt: Self.expiry(of: held)))
        #expect(alone.check(held, beacon: beacon, deviceId: "dev_1", at: now) == .forged)
        // The first key signs: what the rotated codec issues, the new key alone checks, the old one does not.
        let fresh = rotated.issue(beacon: beacon, deviceId: "dev_1", now: now).nonce
        #expect(alone.check(fresh, beacon: beacon, deviceId: "dev_1", at: now) != .forged)
        #expect(before.check(fresh, beacon: beacon, deviceId: "dev_1", at: now) == .forged)
        #expect(rotated.check(held, beacon: beacon, deviceId: "dev_2", at: now) == .forged)
        #expect(throws: ConfigurationError.self) {
            try GattNonceCodec.fromEnvironment(EnvironmentReader(["GATT_NONCE_KEY": "\(new),c2hvcnQ="]))
        }
    }

    static func expiry(of nonce: String) -> Date {
        Date(timeIntervalSince1970: TimeInterval(Int64(nonce.split(separator: ".")[0]) ?? 0))
    }

    /// A batching wait as long as the gateway's delivery timeout is refused at start naming both, not by
    /// librdkafka in its own words.
    @Test func theDeliveryTimeoutMustExceedTheBatchingWait() throws {
        #expect(try ServiceKit.deliveryTimeoutMs(.seconds(3), lingerMs: 5) == 3_000)
        #expect(try ServiceKit.deliveryTimeoutMs(.seconds(1), lingerMs: nil) == 1_000)
        let error = try #require(throws: ConfigurationError.self) { try ServiceKit.deliveryTimeoutMs(.seconds(1), lingerMs: 1_000) }
        #expect(error.key == "KAFKA_LINGER_MS" && error.expected.contains("PRODUCE_TIMEOUT_MS"))
    }

    @Test func anUnreadableSecretFileStopsTheServiceWithOneLine() {
        let env = EnvironmentReader(["DEVICE_TOKEN_KEYS_FILE": "/nonexistent/device-token-keys"])
        #expect(env.optionalString("DEVICE_TOKEN_KEYS") == nil)
        #expect(throws: ConfigurationError.self) { try env.checkFileReferences() }
        do {
            _ = try ServiceConfiguration.load(service: "svc", defaultHTTPPort: 8080, from: env)
            Issue.record("an unreadable DEVICE_TOKEN_KEYS_FILE was accepted")
        } catch {
            #expect(error.description.contains("DEVICE_TOKEN_KEYS_FILE"))
            #expect(error.description.contains("/nonexistent/device-token-keys"))
        }
    }
}
