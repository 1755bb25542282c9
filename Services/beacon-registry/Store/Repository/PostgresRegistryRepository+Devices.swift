import AccessControl
import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import PostgresNIO

extension PostgresRegistryRepository {
    /// Enrollment codes live between one minute and thirty days.
    static let enrollmentValidityRange: ClosedRange<Duration> = .seconds(60) ... .seconds(30 * 86_400)

    package func createEnrollmentCode(userId: String, validity: Duration) async throws(RegistryError) -> IssuedEnrollmentCode {
        var v = InputValidator()
        _ = v.id(userId, "userId")
        if !Self.enrollmentValidityRange.contains(validity) { v.fail("validity", "must be between 1 minute and 30 days") }
        try v.finish()
        let now = now()
        let expiresAt = now.addingTimeInterval(TimeInterval(validity.components.seconds))
        let id = EntityIdGenerator.make("enr")
        return try await write(
            "create enrollment code",
            // 50 random bits rarely collide; when they do, the retry draws a new code.
            retryingOn: ["enrollment_codes_hash_key"],
            constraintErrors: ["enrollment_codes_user_fkey": .notFound(.user, id: userId)]
        ) { db in
            let code = EnrollmentCodeFormat.generate()
            let hash = EnrollmentCodeFormat.digest(normalized: EnrollmentCodeFormat.normalize(code)!, signer: tokenSigner)
            let row = try await db.singleRow(
                """
                INSERT INTO enrollment_codes AS e (id, user_id, code_sha256, created_at, expires_at)
                VALUES (\(id), \(userId), \(hash), \(now), \(expiresAt))
                RETURNING \(unescaped: Columns.enrollmentCode)
                """, logger: logger
            )
            let enrollment = try Columns.enrollmentCode(row)
            try await ChangeOutbox.upsert(.enrollmentCode, id: id, entity: enrollment, on: db, logger: logger)
            return IssuedEnrollmentCode(code: code, enrollment: enrollment)
        }
    }

    package func exchangeEnrollmentCode(_ code: String, device: DeviceDescription) async throws(RegistryError) -> DeviceCredentials {
        // A string that cannot be a code is answered like an unknown one: no hint for guessers.
        guard let normalized = EnrollmentCodeFormat.normalize(code) else { throw .enrollmentCodeUnknown }
        let description = try Self.validated(device)
        let digests = EnrollmentCodeFormat.lookupDigests(normalized: normalized, signer: tokenSigner)
        let installation = description.installationId.map(Secrets.sha256Hex)
        let now = now()
        let deviceId = EntityIdGenerator.make("dev")
        let (signer, lifetime) = (tokenSigner, deviceTokenLifetime)
        return try await write("exchange enrollment code") { db in
            // The row lock makes concurrent exchanges of one code queue: the first spends it, the
            // others then see it used.
            guard
                let codeRow = try await db.firstRow(
                    "SELECT \(unescaped: Columns.enrollmentCode) FROM enrollment_codes e WHERE e.code_sha256 = ANY(\(digests)) FOR UPDATE",
                    logger: logger
                )
            else { throw RegistryError.enrollmentCodeUnknown }
            let enrollment = try Columns.enrollmentCode(codeRow)
            if let usedAt = enrollment.usedAt {
                // The installation that spent it asking again within a day: its answer was lost.
                guard let installation, let enrolled = enrollment.deviceId, now < usedAt.addingTimeInterval(Self.enrollmentRetryWindow),
                    try await db.firstRow(
                        "SELECT 1 FROM enrollment_codes e WHERE e.id = \(enrollment.id) AND e.installation_sha256 = \(installation)",
                        logger: logger) != nil
                else { throw RegistryError.enrollmentCodeUsed }
                return try await reissueToken(deviceId: enrolled, userId: enrollment.userId, now: now, on: db)
            }
            guard now < enrollment.expiresAt else { throw RegistryError.enrollmentCodeExpired(at: enrollment.expiresAt) }
            // A user without sites (a leaver: the RUNBOOK's steps end with `set-sites --no-sites`) enrolls no
            // phone: a code issued before they left would otherwise give them a new device and token. The
            // code stays unspent, and works again once they have a site.
            guard
                try await db.firstRow(
                    "SELECT 1 FROM user_sites WHERE user_id = \(enrollment.userId) LIMIT 1", logger: logger) != nil
            else { throw RegistryError.enrollmentUserWithoutSites }

            let (token, claims) = signer.sign(deviceId: deviceId, userId: enrollment.userId, issuedAt: now, lifetime: lifetime)
            let deviceRow = try await db.singleRow(
                """
                INSERT INTO devices AS d (
                    id, user_id, status, app_version, model, enrolled_at, token_key_id, token_expires_at
                ) VALUES (
                    \(deviceId), \(enrollment.userId), 'enrolled', \(description.appVersion), \(description.model), \(now),
                    \(claims.keyId), \(claims.expiresAt)
                )
                RETURNING \(unescaped: Columns.device)
                """, logger: logger
            )
            let device = try Columns.device(deviceRow)
            let usedRow = try await db.singleRow(
                """
                UPDATE enrollment_codes AS e SET used_at = \(now), device_id = \(deviceId), installation_sha256 = \(installation)
                WHERE e.id = \(enrollment.id)
                RETURNING \(unescaped: Columns.enrollmentCode)
                """, logger: logger
            )
            try await ChangeOutbox.upsert(.device, id: deviceId, entity: device, on: db, logger: logger)
            try await ChangeOutbox.upsert(
                .enrollmentCode, id: enrollment.id, entity: try Columns.enrollmentCode(usedRow), on: db, logger: logger)
            return DeviceCredentials(device: device, token: token, claims: claims)
        }
    }

    /// How long after spending a code the installation that spent it may present it again.
    static let enrollmentRetryWindow: TimeInterval = 86_400

    package func refreshDeviceToken(deviceId: String, userId: String) async throws(RegistryError) -> DeviceCredentials {
        let now = now()
        return try await write("refresh device token") { db in try await reissueToken(deviceId: deviceId, userId: userId, now: now, on: db)
        }
    }

    /// A new token for an active device of `userId` (`activeDevice`), recorded with the device and
    /// published on the feed.
    func reissueToken(deviceId: String, userId: String, now: Date, on db: PostgresConnection) async throws -> DeviceCredentials {
        _ = try Self.activeDevice(
            try await db.firstRow(
                "SELECT \(unescaped: Columns.device) FROM devices d WHERE d.id = \(deviceId) FOR UPDATE", logger: logger),
            deviceId: deviceId, userId: userId)
        let (token, claims) = tokenSigner.sign(deviceId: deviceId, userId: userId, issuedAt: now, lifetime: deviceTokenLifetime)
        let updated = try await db.singleRow(
            """
            UPDATE devices AS d SET token_key_id = \(claims.keyId), token_expires_at = \(claims.expiresAt)
            WHERE d.id = \(deviceId) RETURNING \(unescaped: Columns.device)
            """, logger: logger
        )
        let device = try Columns.device(updated)
        try await ChangeOutbox.upsert(.device, id: deviceId, entity: device, on: db, logger: logger)
        return DeviceCredentials(device: device, token: token, claims: claims)
    }

    /// The device of `row`, which must be enrolled (not revoked) and bound to `userId`: what a device's
    /// own requests (its configuration, its token refresh) need of it.
    static func activeDevice(_ row: PostgresRow?, deviceId: String, userId: String) throws -> Device {
        guard let row else { throw RegistryError.deviceNotActive(deviceId: deviceId, why: "is not enrolled in this registry") }
        let device = try Columns.device(row)
        guard device.status == .enrolled else { throw RegistryError.deviceNotActive(deviceId: deviceId, why: "is revoked") }
        guard device.userId == userId else {
            throw RegistryError.deviceNotActive(deviceId: deviceId, why: "is now bound to another user")
        }
        return device
    }

    package func revokeDevice(id: String) async throws(RegistryError) -> Device {
        var v = InputValidator()
        _ = v.id(id, "id")
        try v.finish()
        let now = now()
        return try await write("revoke device") { db in
            guard
                let row = try await db.firstRow(
                    "SELECT \(unescaped: Columns.device) FROM devices d WHERE d.id = \(id) FOR UPDATE", logger: logger
                )
            else { throw RegistryError.notFound(.device, id: id) }
            let current = try Columns.device(row)
            if current.status == .revoked { return current }
            let revoked = try Columns.device(
                try await db.singleRow(
                    """
                    UPDATE devices AS d SET status = 'revoked', revoked_at = GREATEST(\(now), d.enrolled_at)
                    WHERE d.id = \(id)
                    RETURNING \(unescaped: Columns.device)
                    """, logger: logger
                ))
            // Gateways drop the device's tokens when this reaches them on registry.changes.
            try await ChangeOutbox.upsert(.device, id: id, entity: revoked, on: db, logger: logger)
            return revoked
        }
    }

    package func device(id: String) async throws(RegistryError) -> Device {
        try await read("read device") { db in
            guard
                let row = try await db.firstRow(
                    "SELECT \(unescaped: Columns.device) FROM devices d WHERE d.id = \(id)", logger: logger
                )
            else { throw RegistryError.notFound(.device, id: id) }
            return try Columns.device(row)
        }
    }

    package func listDevices(userId: String, after: String?, limit: Int) async throws(RegistryError) -> [Device] {
        let limit = Self.pageLimit(limit)
        return try await read("list a user's devices") { db in
            try await Self.requireExists(db, table: "users", id: userId, kind: .user, logger: logger)
            return try await db.rows(
                """
                SELECT \(unescaped: Columns.device) FROM devices d
                WHERE d.user_id = \(userId) AND (\(after)::text IS NULL OR d.id::text > \(after)::text)
                ORDER BY d.id::text LIMIT \(limit)
                """, logger: logger
            ).map(Columns.device)
        }
    }

    /// Trimmed; empty strings become absent.
    static func validated(_ device: DeviceDescription) throws(RegistryError) -> DeviceDescription {
        var v = InputValidator()
        func clean(_ value: String?, _ field: String) -> String? {
            guard let trimmed = value?.trimmingCharacters(in: .whitespacesAndNewlines), !trimmed.isEmpty else { return nil }
            if trimmed.unicodeScalars.count > 64 { v.fail(field, "must be at most 64 characters") }
            return trimmed
        }
        var installationId: String?
        if let id = device.installationId {
            // Random text the app made (a UUID, say): enough of it to be its installation's alone.
            if !(16...128).contains(id.unicodeScalars.count) || id.unicodeScalars.contains(where: { !(0x21...0x7E).contains($0.value) }) {
                v.fail("installationId", "must be 16-128 printable ASCII characters without spaces")
            }
            installationId = id
        }
        let result = DeviceDescription(
            appVersion: clean(device.appVersion, "appVersion"), model: clean(device.model, "model"), installationId: installationId)
        try v.finish()
        return result
    }
}
