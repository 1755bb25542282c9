import Foundation
import LocalStackTesting
import Testing

/// docker-compose.yml cannot be run here (no container engine), so it is validated instead: the
/// Compose Specification schema and consistency with the code (deploy/compose/check.py).
@Suite("docker-compose.yml")
struct ComposeFileTests {
    func runCheck(composeFile: String? = nil) async throws -> (status: Int32, output: String) {
        var environment = ProcessInfo.processInfo.environment
        if let composeFile { environment["COMPOSE_FILE"] = composeFile }
        // The check runs the products (`--help`, `attendancectl secrets init`): the ones built with these tests.
        environment["BIN_DIR"] = LocalStack.builtProduct("attendancectl").deletingLastPathComponent().path
        return try await LocalStack.run(
            "/bin/bash", [LocalStack.root.appendingPathComponent("deploy/compose/check.sh").path], environment: environment)
    }

    /// The check on a compose file with this text (in a scratch file).
    func runCheck(composeText: String) async throws -> (status: Int32, output: String) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("compose-\(UUID().uuidString).yml")
        defer { try? FileManager.default.removeItem(at: file) }
        try composeText.write(to: file, atomically: true, encoding: .utf8)
        return try await runCheck(composeFile: file.path)
    }

    @Test func composeFileIsValidAndMatchesTheCode() async throws {
        let (status, output) = try await runCheck()
        #expect(status == 0, "\(output)")
        #expect(output.contains("0 failed"))
    }

    @Test func checkCatchesAnUnknownCommandAnUnreadVariableAndABadKey() async throws {
        let (status, output) = try await runCheck(
            composeText: """
                services:
                  topics:
                    build: {context: ., dockerfile: deploy/docker/Dockerfile, target: runtime}
                    image: beacon-attendance:dev
                    command: ["no-such-binary"]
                    environment:
                      NOT_READ_ANYWHERE: "1"
                    restartt: always
                  db:
                    image: postgres
                """)
        #expect(status != 0)
        #expect(output.contains("compose schema"))
        #expect(output.contains("command 'no-such-binary' is a product"))
        #expect(output.contains("env NOT_READ_ANYWHERE is one no-such-binary reads (docs/CONFIGURATION.md)"), "\(output)")
        #expect(output.contains("db: image pinned"))
    }

    /// What the check learns by running the products and the local stack's scripts: a subcommand and
    /// an option the built product does not have, a secret file no secret is written to, a service
    /// without a variable the native stack gives it or with one it does not (`services.sh describe`).
    @Test func checkRunsTheProductsAndTheLocalStackScripts() async throws {
        let (status, output) = try await runCheck(
            composeText: """
                services:
                  fleet-simulator:
                    image: beacon-attendance:dev
                    command: ["fleet-simulator", "run", "--gateway", "http://ingest-gateway:8080", "--no-such-option"]
                  topics:
                    image: beacon-attendance:dev
                    command: ["attendancectl", "topics", "ensure-all"]
                    restart: "no"
                  beacon-registry:
                    build: {context: ., dockerfile: deploy/docker/Dockerfile, target: runtime}
                    image: beacon-attendance:dev
                    command: ["beacon-registry"]
                    environment:
                      HTTP_HOST: 0.0.0.0
                      HTTP_PORT: "8083"
                      LOG_FORMAT: json
                      DEVICE_TOKEN_KEYS_FILE: /var/lib/attendance/secrets/device-token-key
                      DEVICE_TOKEN_ACTIVE_KEY: k2
                    volumes: ["platform-secrets:/var/lib/attendance/secrets:ro"]
                """)
        #expect(status != 0)
        #expect(output.contains("topics: 'attendancectl topics ensure-all' is a command of attendancectl"), "\(output)")
        #expect(output.contains("fleet-simulator: option --no-such-option exists in 'fleet-simulator run'"), "\(output)")
        #expect(!output.contains("option --gateway exists"), "\(output)")
        #expect(output.contains("beacon-registry: DEVICE_TOKEN_KEYS_FILE names the file of DEVICE_TOKEN_KEYS"), "\(output)")
        #expect(output.contains("beacon-registry: gets the secret BEACON_KEY_SEAL_KEY it reads"), "\(output)")
        #expect(output.contains("beacon-registry: gets REGISTRY_BOOTSTRAP as on the local stack (services.sh describe)"), "\(output)")
        let onlyCompose = "beacon-registry: DEVICE_TOKEN_ACTIVE_KEY is given on the local stack too (services.sh describe)"
        #expect(output.contains(onlyCompose), "\(output)")
        #expect(!output.contains("LOG_FORMAT is given on the local stack too"), "\(output)")
    }

    /// The observability files and the local-stack parity: a service on another port than the local
    /// stack's, without its health check, a dashboard querying a metric nobody exports, an alert
    /// pointing at a runbook section that does not exist, a secret file outside any mounted volume, a
    /// query PromQL cannot parse.
    @Test func checkCatchesPortDriftUnknownMetricsAndDanglingRunbookLinks() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("compose-obs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let prometheus = folder.appendingPathComponent("prometheus")
        let dashboards = folder.appendingPathComponent("dashboards")
        let provisioning = folder.appendingPathComponent("provisioning/datasources")
        for directory in [prometheus, dashboards, provisioning] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        try """
        scrape_configs:
          - job_name: session-merger
            static_configs:
              - targets: ["session-merger:9999"]
        rule_files: [/etc/prometheus/alerts.yml]
        """.write(to: prometheus.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        try """
        groups:
          - name: g
            rules:
              - alert: Lag
                expr: sum(kafka_consumer_lag) > 10
                annotations: {runbook: "deploy/RUNBOOK.md#no-such-section"}
        """.write(to: prometheus.appendingPathComponent("alerts.yml"), atomically: true, encoding: .utf8)
        try """
        datasources: [{name: P, uid: prometheus, type: prometheus, url: "http://prometheus:9090"}]
        """.write(to: provisioning.appendingPathComponent("p.yml"), atomically: true, encoding: .utf8)
        try """
        {"uid": "d", "title": "D", "panels": [{"title": "Stored", "datasource": {"uid": "prometheus"},
          "targets": [{"expr": "sum(rate(merger_events_stored_typo_total[1m]))"}, {"expr": "sum(rate(merger_events_total[1m])"}]}]}
        """.write(to: dashboards.appendingPathComponent("d.json"), atomically: true, encoding: .utf8)
        let compose = folder.appendingPathComponent("docker-compose.yml")
        try """
        services:
          session-merger:
            build: {context: ., dockerfile: deploy/docker/Dockerfile, target: runtime}
            image: beacon-attendance:dev
            command: ["session-merger"]
            environment:
              HTTP_HOST: 0.0.0.0
              HTTP_PORT: "9999"
              DEVICE_TOKEN_KEYS_FILE: /elsewhere/device-token-keys
            ports: ["9999:9999"]
          prometheus:
            image: prom/prometheus:v2.55.1
            volumes: ["\(prometheus.path):/etc/prometheus:ro"]
          grafana:
            image: grafana/grafana:11.3.1
            volumes: ["\(folder.path)/provisioning:/etc/grafana/provisioning:ro", "\(dashboards.path):/var/lib/grafana/dashboards:ro"]
        """.write(to: compose, atomically: true, encoding: .utf8)
        let (status, output) = try await runCheck(composeFile: compose.path)
        #expect(status != 0)
        #expect(output.contains("session-merger: HTTP_PORT 9999 is the local stack's port 8082"), "\(output)")
        #expect(output.contains("session-merger: health check on /health/ready at 9999"), "\(output)")
        #expect(output.contains("session-merger: waits for the secrets and topics jobs"), "\(output)")
        #expect(output.contains("DEVICE_TOKEN_KEYS_FILE is inside a mounted volume"), "\(output)")
        #expect(output.contains("prometheus scrapes session-merger on 8082"), "\(output)")
        #expect(output.contains("metric merger_events_stored_typo_total is exported by the code"), "\(output)")
        #expect(output.contains("runbook section #no-such-section exists"), "\(output)")
        #expect(!output.contains("metric kafka_consumer_lag is exported"), "\(output)")
        // Prometheus's own parser (promtool) refuses the query with the missing parenthesis.
        #expect(output.contains("promtool parses the 2 dashboard queries") && output.contains("unclosed left parenthesis"), "\(output)")
    }
}
