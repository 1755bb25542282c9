// swift-tools-version: 6.1
import PackageDescription

// One place for the Swift settings every target shares: Swift 6 language mode (strict concurrency
// checking is on by default there), the upcoming features we rely on, and how debug builds compile.
let sharedSwiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    // A member is usable only where its module is imported (Hummingbird builds with it too).
    .enableUpcomingFeature("MemberImportVisibility"),
    // Debug builds compile a module's files in one frontend job instead of one per core, so no second
    // batch type-checks its declarations again: the package's own targets built in 130 s instead of
    // 175 s on 2 cores (docs/DECISIONS.md, "One compile job per module in debug builds").
    .unsafeFlags(["-driver-batch-count", "1"], .when(configuration: .debug)),
]

// librdkafka is built by deploy/local/install.sh into .local/librdkafka (Debian bookworm's 2.0.2
// cannot talk to the broker). pkg-config finds it through PKG_CONFIG_PATH (set by the Makefile and
// the scripts); the rpath lets binaries and the test runner load it without LD_LIBRARY_PATH.
let librdkafkaLib = Context.packageDirectory + "/.local/librdkafka/lib"
// The toolchain's lld links the executables and the test bundle about three times faster than the
// system's gold (docs/DECISIONS.md, "Linking with lld").
let productLinkerSettings: [LinkerSetting] = [
    .unsafeFlags(["-Xlinker", "-rpath", "-Xlinker", librdkafkaLib]),
    .unsafeFlags(["-use-ld=lld"], .when(platforms: [.linux])),
]

// A service's or tool's executable: `Services/<name>/Main`, a `main.swift` over the targets that
// hold its code.
func serviceExecutable(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(name: name, dependencies: dependencies, path: "Services/\(name)/Main")
}

// A service's pure core, `Services/<service>/Core`: its domain over the protocol module, with no I/O.
func coreTarget(_ name: String, service: String, exclude: [String] = [], _ dependencies: [Target.Dependency]) -> Target {
    .target(name: name, dependencies: ["AttendanceProtocol"] + dependencies, path: "Services/\(service)/Core", exclude: exclude)
}

// A service's runtime target, `Services/<service>/Service`: the kit every service runs on (the
// protocol, the broker client, ServiceRuntime, Hummingbird, PostgreSQL, the lifecycle, logging) plus
// its own dependencies, its bundled `Resources` (the OpenAPI document) and, when it has them, its
// `Migrations`.
func serviceTarget(
    _ name: String, service: String, migrations: Bool, exclude: [String] = [], _ dependencies: [Target.Dependency]
) -> Target {
    .target(
        name: name,
        dependencies: ["AttendanceProtocol", "KafkaClient", "ServiceRuntime", .hummingbird, .logging, .postgresNIO, .serviceLifecycle]
            + dependencies,
        path: "Services/\(service)/Service",
        exclude: exclude,
        resources: (migrations ? [.copy("Migrations")] : []) + [.copy("Resources")]
    )
}

// The dependencies' products the targets use, each named once.
extension Target.Dependency {
    static let argumentParser: Self = .product(name: "ArgumentParser", package: "swift-argument-parser")
    static let asyncAlgorithms: Self = .product(name: "AsyncAlgorithms", package: "swift-async-algorithms")
    static let asyncHTTPClient: Self = .product(name: "AsyncHTTPClient", package: "async-http-client")
    static let crypto: Self = .product(name: "Crypto", package: "swift-crypto")
    static let hummingbird: Self = .product(name: "Hummingbird", package: "hummingbird")
    static let hummingbirdTesting: Self = .product(name: "HummingbirdTesting", package: "hummingbird")
    static let logging: Self = .product(name: "Logging", package: "swift-log")
    static let metrics: Self = .product(name: "Metrics", package: "swift-metrics")
    static let postgresNIO: Self = .product(name: "PostgresNIO", package: "postgres-nio")
    /// The connection pool's error type, which `PostgresClient` hands on as it is when its circuit breaker trips.
    static let postgresConnectionPool: Self = .product(name: "_ConnectionPoolModule", package: "postgres-nio")
    static let prometheus: Self = .product(name: "Prometheus", package: "swift-prometheus")
    static let propertyBased: Self = .product(name: "PropertyBased", package: "swift-property-based")
    static let serviceLifecycle: Self = .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
}

let package = Package(
    name: "beacon-attendance",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "AttendanceProtocol", targets: ["AttendanceProtocol"]),
        .library(name: "PresenceKit", targets: ["PresenceKit"]),
        .library(name: "KafkaClient", targets: ["KafkaClient"]),
        .library(name: "ServiceRuntime", targets: ["ServiceRuntime"]),
        .library(name: "RegistryFeed", targets: ["RegistryFeed"]),
        .library(name: "AccessControl", targets: ["AccessControl"]),
        .library(name: "RegistryClient", targets: ["RegistryClient"]),
        .executable(name: "attendancectl", targets: ["attendancectl"]),
        .executable(name: "beacon-registry", targets: ["beacon-registry"]),
        .executable(name: "policy-service", targets: ["policy-service"]),
        .executable(name: "session-merger", targets: ["session-merger"]),
        .executable(name: "ingest-gateway", targets: ["ingest-gateway"]),
        .executable(name: "telemetry-aggregator", targets: ["telemetry-aggregator"]),
        .executable(name: "fleet-simulator", targets: ["fleet-simulator"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-async-algorithms.git", from: "1.1.4"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // MARK: Shared libraries

        // Every topic name, partition key, message, REST DTO and codec, versioned.
        .target(
            name: "AttendanceProtocol",
            // Crypto: the beacon GATT keys travel sealed (ChaCha20-Poly1305) on the registry feed.
            dependencies: [.crypto],
            path: "Shared/AttendanceProtocol"
        ),
        // The device-side detection library a phone app (and the fleet simulator) ships.
        .target(
            name: "PresenceKit",
            dependencies: [.crypto],
            path: "Shared/PresenceKit",
            exclude: ["README.md"]
        ),
        .systemLibrary(
            name: "CRdKafka",
            path: "Shared/CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]
        ),
        // A thin Swift layer over librdkafka: producer, consumer, admin.
        .target(
            name: "KafkaClient",
            dependencies: ["CRdKafka", .asyncAlgorithms, .logging, .metrics, .serviceLifecycle],
            path: "Shared/KafkaClient"
        ),
        // Config, logging, metrics, health, Postgres + migrations, lifecycle.
        .target(
            name: "ServiceRuntime",
            dependencies: [
                "AttendanceProtocol",
                "KafkaClient",
                .logging,
                .metrics,
                .prometheus,
                .serviceLifecycle,
                .hummingbird,
                .postgresNIO,
                .postgresConnectionPool,
                .crypto,
            ],
            path: "Shared/ServiceRuntime"
        ),

        // The registry's change feed as an in-memory lookup cache, for every service that needs it.
        .target(
            name: "RegistryFeed",
            dependencies: ["ServiceRuntime", "AttendanceProtocol", "KafkaClient", .logging, .serviceLifecycle],
            path: "Shared/RegistryFeed"
        ),

        // Who may call: admin API keys with roles and device tokens, checked the same way by every service.
        .target(
            name: "AccessControl",
            dependencies: ["AttendanceProtocol", "ServiceRuntime", .crypto, .hummingbird, .logging, .postgresNIO],
            path: "Shared/AccessControl"
        ),

        // A client of the beacon registry's REST API, for the admin CLI, the fleet simulator and any other caller.
        .target(
            name: "RegistryClient",
            dependencies: ["AttendanceProtocol", .asyncHTTPClient],
            path: "Shared/RegistryClient"
        ),

        // MARK: Services (thin executables over library targets)

        // Beacon registry: places, beacons, shard allocation, devices, credentials, validation (core, pure).
        // PresenceKit: a site's detection settings are checked with the reader the phone runs.
        coreTarget("BeaconRegistryCore", service: "beacon-registry", ["AccessControl", "PresenceKit", "ServiceRuntime", .crypto]),
        // Beacon registry: its PostgreSQL repository, migrations and change-feed publisher (store).
        .target(
            name: "BeaconRegistryStore",
            dependencies: [
                "BeaconRegistryCore",
                "AccessControl",
                "AttendanceProtocol",
                "KafkaClient",
                "ServiceRuntime",
                .serviceLifecycle,
                .logging,
                .postgresNIO,
                .crypto,
            ],
            path: "Services/beacon-registry/Store",
            resources: [.copy("Migrations")]
        ),

        .target(
            name: "AttendanceCtlCommands",
            dependencies: [
                "AttendanceProtocol",
                "RegistryClient",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "KafkaClient",
                "ServiceRuntime",
                "AccessControl",
                .argumentParser,
                .logging,
                .postgresNIO,
            ],
            path: "Services/attendancectl/Commands"
        ),
        serviceExecutable("attendancectl", ["AttendanceCtlCommands"]),

        // Beacon registry admin REST service.
        serviceTarget(
            "BeaconRegistryService", service: "beacon-registry", migrations: false,
            ["RegistryFeed", "AccessControl", "BeaconRegistryCore", "BeaconRegistryStore", .prometheus]
        ),
        serviceExecutable("beacon-registry", ["BeaconRegistryService"]),
        // Ingest gateway: idempotency, per-device token bucket, key derivation, pure.
        coreTarget("IngestGatewayCore", service: "ingest-gateway", [.crypto]),
        // Ingest gateway: the device API in front of attendance.events.raw / attendance.verdicts.
        serviceTarget(
            "IngestGatewayService", service: "ingest-gateway", migrations: false,
            ["AccessControl", "IngestGatewayCore", "RegistryFeed", .metrics, .prometheus]
        ),
        serviceExecutable("ingest-gateway", ["IngestGatewayService", "ServiceRuntime"]),
        // Session merging: sessions per (user, site) by event time, soft exit, daily attendance, pure.
        coreTarget("SessionMergerCore", service: "session-merger", exclude: ["README.md"], []),
        // Session merger service: vetted events -> sessions in PostgreSQL (one transaction per batch),
        // verdicts and session changes, admin REST for sessions and daily attendance.
        serviceTarget(
            "SessionMergerService", service: "session-merger", migrations: true, exclude: ["README.md"],
            ["AccessControl", "RegistryFeed", "SessionMergerCore", .crypto, .metrics, .prometheus]
        ),
        serviceExecutable("session-merger", ["SessionMergerService", "ServiceRuntime"]),
        // Policy / anti-fraud rule engine, pure.
        coreTarget("PolicyServiceCore", service: "policy-service", [.crypto]),

        // Policy service: raw events → rules (registry feed, per-site book) → vetted events.
        serviceTarget(
            "PolicyService", service: "policy-service", migrations: true,
            ["AccessControl", "PolicyServiceCore", "RegistryFeed", .crypto, .metrics]
        ),
        serviceExecutable("policy-service", ["PolicyService", "ServiceRuntime"]),

        // Telemetry aggregator: histograms, minute rollups, SLO / error budget / burn rates, pure.
        coreTarget("TelemetryAggregatorCore", service: "telemetry-aggregator", []),
        // Telemetry aggregator service: the four topics → per-minute rollups in PostgreSQL (offsets in the
        // same transaction), /v1/slo, /v1/metrics/summary, the status page, SLO gauges on /metrics.
        serviceTarget(
            "TelemetryAggregatorService", service: "telemetry-aggregator", migrations: true,
            ["TelemetryAggregatorCore", .prometheus]
        ),
        serviceExecutable("telemetry-aggregator", ["TelemetryAggregatorService", "ServiceRuntime"]),
        // Fleet simulator: world model, people, ground truth, scoring, reports, trace
        // replay; pure and deterministic (seeded RNG, virtual clock), PresenceKit inside.
        coreTarget("FleetSimulatorCore", service: "fleet-simulator", ["PresenceKit"]),
        // Fleet simulator runtime: enrollment through the registry, device actors talking to the
        // real gateway over HTTP, the server-side check in PostgreSQL, progress, report files, CLI.
        .target(
            name: "FleetSimulatorService",
            dependencies: [
                "FleetSimulatorCore",
                "PresenceKit",
                "AttendanceProtocol",
                "RegistryClient",
                "ServiceRuntime",
                .argumentParser,
                .asyncHTTPClient,
                .logging,
                .postgresNIO,
            ],
            path: "Services/fleet-simulator/Service"
        ),
        serviceExecutable("fleet-simulator", ["FleetSimulatorService"]),

        // MARK: Benchmarks (release builds; `make bench`)

        .executableTarget(
            name: "TelemetryBenchmark",
            dependencies: ["TelemetryAggregatorCore", "AttendanceProtocol"],
            path: "Tests/Benchmarks/TelemetryBenchmark"
        ),

        .executableTarget(
            name: "KafkaBenchmark",
            dependencies: ["KafkaClient", .argumentParser],
            path: "Tests/Benchmarks/KafkaBenchmark"
        ),
        .executableTarget(
            name: "RegistryLookupBenchmark",
            dependencies: [
                "AccessControl",
                "RegistryFeed",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "AttendanceProtocol",
                "ServiceRuntime",
                .logging,
                .postgresNIO,
            ],
            path: "Tests/Benchmarks/RegistryLookupBenchmark"
        ),
        // Keyed load under the no-loss contract against the running services, verified in PostgreSQL
        // (deploy/local/crash-test.sh, the end-to-end benchmark).
        .executableTarget(
            name: "PipelineLoad",
            dependencies: [
                "RegistryTestFixtures",
                "KafkaClient",
                .hummingbird,
                "AccessControl",
                "AttendanceProtocol",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "PresenceKit",
                "ServiceRuntime",
                .argumentParser,
                .asyncHTTPClient,
                .crypto,
                .logging,
                .postgresNIO,
            ],
            path: "Tests/Benchmarks/PipelineLoad"
        ),
        .executableTarget(
            name: "PolicyBenchmark",
            dependencies: ["PolicyServiceCore", "AttendanceProtocol"],
            path: "Tests/Benchmarks/PolicyBenchmark"
        ),
        .executableTarget(
            name: "CodecBenchmark",
            dependencies: ["AttendanceProtocol"],
            path: "Tests/Benchmarks/CodecBenchmark"
        ),
        .executableTarget(
            name: "PresenceBenchmark",
            dependencies: ["PresenceKit"],
            path: "Tests/Benchmarks/PresenceBenchmark"
        ),

        // MARK: Tests

        .testTarget(
            name: "AttendanceProtocolTests",
            dependencies: ["AttendanceProtocol", "PresenceKit"],
            path: "Tests/AttendanceProtocolTests",
            resources: [.copy("Golden")]
        ),
        .testTarget(
            name: "PresenceKitTests",
            dependencies: ["PresenceKit", .propertyBased],
            path: "Tests/PresenceKitTests"
        ),
        .testTarget(
            name: "KafkaClientTests",
            dependencies: ["KafkaClient", "CRdKafka", .logging],
            path: "Tests/KafkaClientTests"
        ),
        .testTarget(
            name: "ServiceRuntimeTests",
            dependencies: [
                "ServiceRuntime",
                "AttendanceProtocol",
                "AccessControl",
                .hummingbird,
                .hummingbirdTesting,
                .logging,
                .metrics,
                .prometheus,
                .postgresNIO,
                .postgresConnectionPool,
            ],
            path: "Tests/ServiceRuntimeTests"
        ),
        .testTarget(
            name: "BeaconRegistryTests",
            dependencies: [
                "RegistryTestFixtures",
                "AccessControl",
                "LocalStackTesting",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "AttendanceProtocol",
                "KafkaClient",
                "ServiceRuntime",
                .logging,
                .postgresNIO,
            ],
            path: "Tests/BeaconRegistryTests"
        ),
        .testTarget(
            name: "BeaconRegistryServiceTests",
            dependencies: [
                "RegistryTestFixtures",
                "RegistryFeed",
                "KafkaClient",
                "AccessControl",
                "LocalStackTesting",
                "BeaconRegistryService",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "AttendanceProtocol",
                "PresenceKit",
                "ServiceRuntime",
                .hummingbird,
                .hummingbirdTesting,
                .logging,
                .postgresNIO,
                .serviceLifecycle,
            ],
            path: "Tests/BeaconRegistryServiceTests"
        ),
        .testTarget(
            name: "RegistryFeedTests",
            dependencies: [
                "RegistryTestFixtures",
                "AccessControl",
                "LocalStackTesting",
                "RegistryFeed",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "AttendanceProtocol",
                "KafkaClient",
                "ServiceRuntime",
                .logging,
                .postgresNIO,
                .serviceLifecycle,
            ],
            path: "Tests/RegistryFeedTests"
        ),
        .testTarget(
            name: "SessionMergerTests",
            dependencies: ["SessionMergerCore", "AttendanceProtocol", "PresenceKit"],
            path: "Tests/SessionMergerTests"
        ),
        .testTarget(
            name: "SessionMergerServiceTests",
            dependencies: [
                "AccessControl",
                "AttendanceProtocol",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "KafkaClient",
                "LocalStackTesting",
                "RegistryFeed",
                "ServiceRuntime",
                "SessionMergerCore",
                "SessionMergerService",
                .hummingbird,
                .hummingbirdTesting,
                .logging,
                .postgresNIO,
                .serviceLifecycle,
            ],
            path: "Tests/SessionMergerServiceTests"
        ),
        .testTarget(
            name: "PolicyServiceTests",
            dependencies: ["PolicyServiceCore", "AttendanceProtocol", "PresenceKit"],
            path: "Tests/PolicyServiceTests"
        ),
        .testTarget(
            name: "PolicyPipelineTests",
            dependencies: [
                "RegistryTestFixtures",
                "LocalStackTesting",
                "AccessControl",
                "AttendanceProtocol",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "KafkaClient",
                "PolicyService",
                "PolicyServiceCore",
                "RegistryFeed",
                "ServiceRuntime",
                .logging,
                .postgresNIO,
                .serviceLifecycle,
            ],
            path: "Tests/PolicyPipelineTests"
        ),
        // Policy administration (admin REST, versioned policies in PostgreSQL, live reload) against
        // the local PostgreSQL, each run in a schema of its own.
        .testTarget(
            name: "PolicyAdminTests",
            dependencies: [
                "AccessControl",
                "AttendanceProtocol",
                "LocalStackTesting",
                "PolicyService",
                "PolicyServiceCore",
                "ServiceRuntime",
                .hummingbird,
                .hummingbirdTesting,
                .logging,
                .postgresNIO,
            ],
            path: "Tests/PolicyAdminTests"
        ),
        // attendancectl: argument parsing, tables, error lines, and the registry commands end to end
        // against the real registry HTTP server on the local PostgreSQL.
        .testTarget(
            name: "AttendanceCtlTests",
            dependencies: [
                "AccessControl",
                "AttendanceCtlCommands",
                "AttendanceProtocol",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "BeaconRegistryService",
                "LocalStackTesting",
                "RegistryClient",
                "ServiceRuntime",
                .argumentParser,
                .asyncHTTPClient,
                .hummingbird,
                .hummingbirdTesting,
                .logging,
                .postgresNIO,
                .prometheus,
            ],
            path: "Tests/AttendanceCtlTests"
        ),
        .testTarget(
            name: "IngestGatewayTests",
            dependencies: [
                "AccessControl",
                "AttendanceProtocol",
                "IngestGatewayCore",
                "IngestGatewayService",
                "KafkaClient",
                "LocalStackTesting",
                "PolicyServiceCore",
                "RegistryFeed",
                "ServiceRuntime",
                "SessionMergerService",
                .hummingbird,
                .hummingbirdTesting,
                .logging,
                .postgresNIO,
                .prometheus,
                .serviceLifecycle,
            ],
            path: "Tests/IngestGatewayTests"
        ),
        // The pipeline end to end: the four services as processes (deploy/local/services.sh), run by
        // deploy/local/test.sh after the other targets.
        .testTarget(
            name: "PipelineEndToEndTests",
            dependencies: [
                "RegistryTestFixtures",
                "AccessControl",
                "AttendanceProtocol",
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "LocalStackTesting",
                "ServiceRuntime",
                .asyncHTTPClient,
                .logging,
                .postgresNIO,
            ],
            path: "Tests/PipelineEndToEndTests"
        ),
        // Telemetry aggregator: histogram and SLO fixtures, rollups on PostgreSQL (own schema per test),
        // the REST API and the status page in headless Chromium.
        .testTarget(
            name: "TelemetryAggregatorTests",
            dependencies: [
                "AttendanceProtocol",
                "KafkaClient",
                "LocalStackTesting",
                "ServiceRuntime",
                "TelemetryAggregatorCore",
                "TelemetryAggregatorService",
                .hummingbird,
                .hummingbirdTesting,
                .logging,
                .postgresNIO,
                .prometheus,
            ],
            path: "Tests/TelemetryAggregatorTests"
        ),
        // Fleet simulator in process: world physics, schedules, ground truth, scoring, the QA
        // matrix on virtual time, trace parsing, CLI argument errors.
        .testTarget(
            name: "FleetSimulatorTests",
            dependencies: ["FleetSimulatorCore", "FleetSimulatorService", "PresenceKit", "AttendanceProtocol", "RegistryClient"],
            path: "Tests/FleetSimulatorTests"
        ),
        // make run's main job (deploy/local/run.sh) against the services as processes, under the shared
        // services lock: nothing lost or duplicated, every printed target met, the status page in agreement.
        .testTarget(
            name: "FleetEndToEndTests",
            dependencies: ["FleetSimulatorCore", "LocalStackTesting", .asyncHTTPClient],
            path: "Tests/FleetEndToEndTests"
        ),
        // Starts the real local stack once per test process (deploy/local/stack.sh) for every
        // test target that needs PostgreSQL or the broker.
        // Registry fixtures the tests that need a site share.
        .target(
            name: "RegistryTestFixtures",
            dependencies: ["AttendanceProtocol", "BeaconRegistryCore"],
            path: "Tests/Support/RegistryTestFixtures"
        ),
        .target(
            name: "LocalStackTesting",
            dependencies: ["AttendanceProtocol", "ServiceRuntime", .logging, .postgresNIO],
            path: "Tests/Support/LocalStackTesting"
        ),
        // Against the real local broker and PostgreSQL started by deploy/local.
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "LocalStackTesting",
                "KafkaClient",
                "ServiceRuntime",
                "AttendanceProtocol",
                "AttendanceCtlCommands",
                // Every service's migrations (MigrationChecksumTests).
                "BeaconRegistryCore",
                "BeaconRegistryStore",
                "PolicyService",
                "SessionMergerService",
                "TelemetryAggregatorService",
                .argumentParser,
                .hummingbird,
                .hummingbirdTesting,
                .logging,
                .postgresNIO,
                .prometheus,
                .serviceLifecycle,
            ],
            path: "Tests/IntegrationTests"
        ),
    ]
)

// The shared settings, applied to every target in one place: the Swift settings everywhere, and the
// librdkafka rpath wherever a binary is linked (and on the Kafka client itself).
// The simulation and detection code is numeric and runs for minutes in the simulator's tests and
// the demo; unoptimized it was the longest part of `make test`. Those two pure targets are optimized
// in debug builds too (docs/DECISIONS.md, "Optimized simulation in debug builds").
let optimizedInDebug: Set<String> = ["PresenceKit", "FleetSimulatorCore"]
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + sharedSwiftSettings
    if optimizedInDebug.contains(target.name) {
        target.swiftSettings! += [.unsafeFlags(["-O"], .when(configuration: .debug))]
    }
    if target.type == .executable || target.type == .test || target.name == "KafkaClient" {
        target.linkerSettings = (target.linkerSettings ?? []) + productLinkerSettings
    }
}
