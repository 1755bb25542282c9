import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import BeaconRegistryStore
import Foundation
import PostgresNIO
import RegistryTestFixtures
import Testing

extension RegistryDatabaseTests {
    @Suite("Device enrollment and revocation", .serialized)
    struct Enrollment {
        @Test func codeIsExchangedOnceForCredentialsTheGatewayCanVerify() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let issued = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(3_600))
                #expect(issued.code.count == 11)
                #expect(issued.enrollment.usedAt == nil)

                // Typed the way people type it: lower case, no dash.
                let typed = issued.code.lowercased().replacingOccurrences(of: "-", with: "")
                let credentials = try await repository.exchangeEnrollmentCode(
                    typed, device: DeviceDescription(appVersion: "2.4.1", model: "iPhone15,2"))
                #expect(credentials.device.userId == fixture.user.id)
                #expect(credentials.device.status == .enrolled)
                #expect(credentials.device.appVersion == "2.4.1")
                let claims = try RegistryTestDatabase.signer.verify(credentials.token, now: Date())
                #expect(claims.deviceId == credentials.device.id)
                #expect(claims.userId == fixture.user.id)
                #expect(claims.keyId == credentials.device.tokenKeyId)
                #expect(try await repository.device(id: credentials.device.id) == credentials.device)

                await #expect(throws: RegistryError.enrollmentCodeUsed) {
                    try await repository.exchangeEnrollmentCode(issued.code, device: DeviceDescription())
                }

                // The binding is recorded, only a hash of the code is stored, and both changes are published.
                let stored = try await client.query(
                    "SELECT code_sha256, device_id, used_at IS NOT NULL FROM enrollment_codes WHERE id = \(issued.enrollment.id)",
                    logger: RegistryTestDatabase.logger
                )
                for try await (hash, deviceId, used) in stored.decode((String, String?, Bool).self) {
                    #expect(hash.count == 64 && !hash.uppercased().contains(issued.code.replacingOccurrences(of: "-", with: "")))
                    #expect(deviceId == credentials.device.id)
                    #expect(used)
                }
                #expect(try await outboxRows(client, type: "device", id: credentials.device.id).count == 1)
                #expect(try await outboxRows(client, type: "enrollment_code", id: issued.enrollment.id).count == 2)
            }
        }

        @Test func expiredCodeIsRefused() async throws {
            // Whole seconds, so the stored expiry (microseconds) is exactly `created + 60`.
            let created = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
            try await RegistryTestDatabase.withRepository(now: { created }) { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let early = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(60))
                let late = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(60))
                func repositoryAt(_ offset: TimeInterval) -> PostgresRegistryRepository {
                    PostgresRegistryRepository(
                        client: client, logger: RegistryTestDatabase.logger, tokenSigner: RegistryTestDatabase.signer,
                        now: { created.addingTimeInterval(offset) }
                    )
                }
                _ = try await repositoryAt(59).exchangeEnrollmentCode(early.code, device: DeviceDescription())
                await #expect(throws: RegistryError.enrollmentCodeExpired(at: late.enrollment.expiresAt)) {
                    try await repositoryAt(60).exchangeEnrollmentCode(late.code, device: DeviceDescription())
                }
                #expect(RegistryError.enrollmentCodeExpired(at: created).problemDetails.status == 401)
            }
        }

        /// The phone's first answer was lost (a timeout on the lobby's Wi-Fi): the same installation sending
        /// the same code again gets the device it enrolled, with a new token. Before, the code was spent and
        /// the phone stayed without a token until an admin issued another code. Anyone else is refused.
        @Test func theInstallationThatSpentACodeGetsItsDeviceAgainWithinADay() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let issued = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(600))
                let spentAt = Date()
                func repositoryAt(_ offset: TimeInterval) -> PostgresRegistryRepository {
                    PostgresRegistryRepository(
                        client: client, logger: RegistryTestDatabase.logger, tokenSigner: RegistryTestDatabase.signer,
                        now: { spentAt.addingTimeInterval(offset) })
                }
                let installation = "inst-" + UUID().uuidString
                let first = try await repositoryAt(0).exchangeEnrollmentCode(
                    issued.code, device: DeviceDescription(model: "Pixel 8", installationId: installation))
                // After the code's own expiry (10 minutes), within the day.
                let again = try await repositoryAt(3_600).exchangeEnrollmentCode(
                    issued.code, device: DeviceDescription(model: "Pixel 8", installationId: installation))
                #expect(again.device.id == first.device.id && again.device.userId == fixture.user.id)
                #expect(again.claims.expiresAt > first.claims.expiresAt)
                #expect(
                    try RegistryTestDatabase.signer.verify(again.token, now: spentAt.addingTimeInterval(3_600)).deviceId == first.device.id)
                // Another installation, none, or the same one a day later: the code is spent.
                for (offset, id) in [(60.0, "inst-" + UUID().uuidString), (60, nil), (86_401, installation)] {
                    await #expect(throws: RegistryError.enrollmentCodeUsed, "\(offset) \(String(describing: id))") {
                        try await repositoryAt(offset).exchangeEnrollmentCode(issued.code, device: DeviceDescription(installationId: id))
                    }
                }
                // A revoked device is not handed out again.
                _ = try await repository.revokeDevice(id: first.device.id)
                await #expect(throws: RegistryError.self) {
                    try await repositoryAt(120).exchangeEnrollmentCode(issued.code, device: DeviceDescription(installationId: installation))
                }
                // What cannot be an installation's id is refused by name.
                let other = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(600))
                for bad in ["short", String(repeating: "x", count: 129), "has space in it, sixteen+"] {
                    do {
                        _ = try await repository.exchangeEnrollmentCode(other.code, device: DeviceDescription(installationId: bad))
                        Issue.record("\(bad) was accepted")
                    } catch {
                        #expect("\(error)".contains("installationId"), "\(error)")
                    }
                }
            }
        }

        @Test func concurrentExchangesOfOneCodeEnrollOneDevice() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let fixture = try await RegistryFixture.make(repository)
                let issued = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(600))
                let outcomes = await withTaskGroup(of: Result<DeviceCredentials, RegistryError>.self) { group in
                    for _ in 0..<10 {
                        group.addTask {
                            do throws(RegistryError) {
                                return .success(try await repository.exchangeEnrollmentCode(issued.code, device: DeviceDescription()))
                            } catch {
                                return .failure(error)
                            }
                        }
                    }
                    return await group.reduce(into: []) { $0.append($1) }
                }
                #expect(outcomes.filter { if case .success = $0 { true } else { false } }.count == 1)
                #expect(outcomes.filter { $0 == .failure(.enrollmentCodeUsed) }.count == 9)
            }
        }

        @Test func unknownMalformedOrMisdirectedCodesAreRefused() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                await #expect(throws: RegistryError.enrollmentCodeUnknown) {
                    try await repository.exchangeEnrollmentCode("ZZZZZ-ZZZZZ", device: DeviceDescription())
                }
                await #expect(throws: RegistryError.enrollmentCodeUnknown) {
                    try await repository.exchangeEnrollmentCode("'; DROP TABLE x; --", device: DeviceDescription())
                }
                await #expect(throws: RegistryError.notFound(.user, id: "usr_missing")) {
                    try await repository.createEnrollmentCode(userId: "usr_missing", validity: .seconds(600))
                }
                await #expect(throws: RegistryError.self) {
                    try await repository.createEnrollmentCode(userId: "usr_missing", validity: .seconds(10))
                }
            }
        }

        /// 50 random bits stored as a plain SHA-256 could be searched for in a copy of the database in
        /// hours: the code is stored as a digest keyed by the device-token keys. Codes stored as plain
        /// hashes before still enroll, and a rotation of the signing key keeps the codes made before it.
        @Test func codesAreStoredKeyedAndFoundAcrossARotation() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let issued = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(600))
                let normalized = try #require(EnrollmentCodeFormat.normalize(issued.code))
                let rows = try await client.query(
                    "SELECT code_sha256 FROM enrollment_codes WHERE id = \(issued.enrollment.id)", logger: RegistryTestDatabase.logger)
                for try await stored in rows.decode(String.self) {
                    #expect(stored != Secrets.sha256Hex(normalized))
                    #expect(stored == EnrollmentCodeFormat.digest(normalized: normalized, signer: RegistryTestDatabase.signer))
                }
                // A code stored before, as the plain hash.
                let legacy = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(600))
                let legacyNormalized = try #require(EnrollmentCodeFormat.normalize(legacy.code))
                try await client.query(
                    "UPDATE enrollment_codes SET code_sha256 = \(Secrets.sha256Hex(legacyNormalized)) WHERE id = \(legacy.enrollment.id)",
                    logger: RegistryTestDatabase.logger)
                // The signing key rotated: a new active key, the earlier one kept for verifying.
                let rotated = PostgresRegistryRepository(
                    client: client, logger: RegistryTestDatabase.logger,
                    tokenSigner: try DeviceTokenSigner(
                        activeKey: try DeviceSigningKey(id: "test-2026", secret: Array(repeating: 9, count: 32)),
                        previousKeys: [try DeviceSigningKey(id: "test-2025", secret: Array(repeating: 7, count: 32))]))
                #expect(try await rotated.exchangeEnrollmentCode(issued.code, device: DeviceDescription()).device.userId == fixture.user.id)
                #expect(try await rotated.exchangeEnrollmentCode(legacy.code, device: DeviceDescription()).device.userId == fixture.user.id)
            }
        }

        /// A leaver: the RUNBOOK's steps revoke their devices and take their sites. A code issued before
        /// (a replacement phone, valid up to 30 days) gave them a new device and token all the same.
        @Test func aUserWithoutSitesEnrollsNoPhoneAndTheCodeWaits() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let fixture = try await RegistryFixture.make(repository)
                let issued = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(600))
                _ = try await repository.setUserSites(userId: fixture.user.id, siteIds: [])
                await #expect(throws: RegistryError.enrollmentUserWithoutSites) {
                    try await repository.exchangeEnrollmentCode(issued.code, device: DeviceDescription())
                }
                #expect(RegistryError.enrollmentUserWithoutSites.problemDetails.status == 409)
                // Back with a site (rehired), the unspent code enrolls.
                _ = try await repository.setUserSites(userId: fixture.user.id, siteIds: [fixture.site.id])
                let device = try await repository.exchangeEnrollmentCode(issued.code, device: DeviceDescription()).device
                #expect(device.userId == fixture.user.id)
            }
        }

        @Test func revokedDeviceIsPublishedAndRevokingAgainChangesNothing() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                let fixture = try await RegistryFixture.make(repository)
                let issued = try await repository.createEnrollmentCode(userId: fixture.user.id, validity: .seconds(600))
                let device = try await repository.exchangeEnrollmentCode(issued.code, device: DeviceDescription(model: "Pixel 8")).device

                let revoked = try await repository.revokeDevice(id: device.id)
                #expect(revoked.status == .revoked)
                #expect(revoked.revokedAt != nil)
                #expect(try await repository.revokeDevice(id: device.id) == revoked)

                let changes = try await outboxRows(client, type: "device", id: device.id)
                #expect(changes.count == 2)
                let published = try ProtocolCodec.wire.decode(Device.self, from: try #require(changes.last?.payload))
                #expect(published.status == .revoked)
                await #expect(throws: RegistryError.notFound(.device, id: "dev_missing")) {
                    try await repository.revokeDevice(id: "dev_missing")
                }
            }
        }
    }

    @Suite("Admin API keys", .serialized)
    struct APIKeys {
        @Test func keysAreStoredHashedAndVerifiedWithTheirRole() async throws {
            try await RegistryTestDatabase.withRepository { repository, client in
                for role in APIRole.allCases {
                    let issued = try await repository.createAPIKey(name: "ops \(role)", role: role)
                    #expect(issued.secret.hasPrefix("brk_\(issued.key.id)."))
                    #expect(try await repository.verifyAPIKey(issued.secret) == issued.key)
                    #expect(try await repository.verifyAPIKey(issued.secret)?.role == role)

                    let stored = try await client.query(
                        "SELECT secret_sha256 FROM api_keys WHERE id = \(issued.key.id)", logger: RegistryTestDatabase.logger
                    )
                    var hashes: [String] = []
                    for try await hash in stored.decode(String.self) { hashes.append(hash) }
                    try #require(hashes.count == 1)
                    let hash = hashes[0]
                    let parts = issued.secret.split(separator: ".")
                    try #require(parts.count == 2)
                    let secretPart = String(parts[1])
                    #expect(hash.count == 64)
                    #expect(!hash.contains(secretPart) && !issued.secret.contains(hash))
                    #expect(try await outboxRows(client, type: "api_key", id: issued.key.id).first?.payload?.contains("sha256") == false)
                }
            }
        }

        @Test func wrongMalformedOrRevokedKeysAreRefused() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let issued = try await repository.createAPIKey(name: "installer phone", role: .installer)
                var wrong = Array(issued.secret)
                try #require(wrong.count >= 2)
                wrong[wrong.count - 2] = wrong[wrong.count - 2] == "A" ? "B" : "A"
                #expect(try await repository.verifyAPIKey(String(wrong)) == nil)
                #expect(try await repository.verifyAPIKey("") == nil)
                #expect(try await repository.verifyAPIKey("Bearer \(issued.secret)") == nil)
                let parts = issued.secret.split(separator: ".")
                try #require(parts.count == 2)
                #expect(try await repository.verifyAPIKey("brk_0000000000000000." + String(parts[1])) == nil)

                let revoked = try await repository.revokeAPIKey(id: issued.key.id)
                #expect(revoked.revokedAt != nil)
                #expect(try await repository.verifyAPIKey(issued.secret) == nil)
                await #expect(throws: RegistryError.notFound(.apiKey, id: "0123456789abcdef")) {
                    try await repository.revokeAPIKey(id: "0123456789abcdef")
                }
            }
        }

        /// Registries starting together against a fresh database create one first admin key between them
        /// (two would leave one whose secret was written over and lost, still valid).
        @Test func registriesStartingTogetherCreateOneFirstAdminKey() async throws {
            try await RegistryTestDatabase.withRepository { repository, _ in
                let issued = try await withThrowingTaskGroup(of: IssuedAPIKey?.self) { group in
                    for _ in 0..<6 { group.addTask { try await repository.createFirstAdminKey(name: "bootstrap admin") } }
                    var keys: [IssuedAPIKey] = []
                    for try await key in group { if let key { keys.append(key) } }
                    return keys
                }
                try #require(issued.count == 1)
                let verified = try await repository.verifyAPIKey(issued[0].secret)
                #expect(issued[0].key.role == .admin && verified?.id == issued[0].key.id)
                #expect(try await repository.createFirstAdminKey(name: "bootstrap admin") == nil)
                // Once no unrevoked admin key is left, the next start creates one again.
                _ = try await repository.revokeAPIKey(id: issued[0].key.id)
                #expect(try await repository.createFirstAdminKey(name: "bootstrap admin")?.key.role == .admin)
            }
        }
    }
}

@Suite("API roles")
struct APIRoleTests {
    @Test func eachRoleIncludesTheOnesBelowIt() {
        #expect(APIRole.admin.permits(.admin) && APIRole.admin.permits(.installer) && APIRole.admin.permits(.viewer))
        #expect(!APIRole.installer.permits(.admin) && APIRole.installer.permits(.installer) && APIRole.installer.permits(.viewer))
        #expect(!APIRole.viewer.permits(.admin) && !APIRole.viewer.permits(.installer) && APIRole.viewer.permits(.viewer))
    }
}
