import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import PostgresNIO

extension PostgresRegistryRepository {
    package func createOrganization(_ input: NewOrganization) async throws(RegistryError) -> Organization {
        let input = try input.validated()
        let id = input.id ?? EntityIdGenerator.make("org")
        let (name, now) = (input.name, now())
        return try await write(
            "create organization",
            constraintErrors: [
                "organizations_pkey": .alreadyExists(.organization, id: id)
            ]
        ) { db in
            let row = try await db.singleRow(
                """
                INSERT INTO organizations AS o (id, name, created_at) VALUES (\(id), \(name), \(now))
                RETURNING \(unescaped: Columns.organization)
                """, logger: logger
            )
            let organization = try Columns.organization(row)
            try await ChangeOutbox.upsert(.organization, id: id, entity: organization, on: db, logger: logger)
            return organization
        }
    }

    package func createSite(_ input: NewSite) async throws(RegistryError) -> Site {
        let input = try input.validated()
        let id = input.id ?? EntityIdGenerator.make("site")
        let now = now()
        return try await write(
            "create site",
            constraintErrors: [
                "sites_pkey": .alreadyExists(.site, id: id),
                "sites_organization_fkey": .notFound(.organization, id: input.organizationId),
                "sites_name_key": .duplicateName(.site, name: input.name),
                "sites_timezone_valid": .invalid("timezone", "is not a time zone the database knows"),
            ]
        ) { db in
            let (geofence, shift) = (input.geofence, input.shift)
            let row = try await db.singleRow(
                """
                INSERT INTO sites AS s (
                    id, organization_id, name, timezone, geofence_latitude, geofence_longitude, geofence_radius_m,
                    shift_start, shift_end, check_in_before_start_min, check_out_after_end_min,
                    late_entry_grace_min, early_exit_grace_min, created_at
                ) VALUES (
                    \(id), \(input.organizationId), \(input.name), \(input.timezone), \(geofence.latitude),
                    \(geofence.longitude), \(geofence.radiusMeters), \(shift.start.description)::time,
                    \(shift.end.description)::time, \(shift.checkInBeforeStartMinutes), \(shift.checkOutAfterEndMinutes),
                    \(shift.lateEntryGraceMinutes), \(shift.earlyExitGraceMinutes), \(now)
                )
                RETURNING \(unescaped: Columns.site)
                """, logger: logger
            )
            let site = try Columns.site(row)
            try await ChangeOutbox.upsert(.site, id: id, entity: site, on: db, logger: logger)
            return site
        }
    }

    package func createGate(_ input: NewGate) async throws(RegistryError) -> Gate {
        let input = try input.validated()
        let id = input.id ?? EntityIdGenerator.make("gate")
        let now = now()
        return try await write(
            "create gate",
            constraintErrors: [
                "gates_pkey": .alreadyExists(.gate, id: id),
                "gates_site_fkey": .notFound(.site, id: input.siteId),
                "gates_name_key": .duplicateName(.gate, name: input.name),
            ]
        ) { db in
            let row = try await db.singleRow(
                """
                INSERT INTO gates AS g (id, site_id, name, created_at) VALUES (\(id), \(input.siteId), \(input.name), \(now))
                RETURNING \(unescaped: Columns.gate)
                """, logger: logger
            )
            let gate = try Columns.gate(row)
            try await ChangeOutbox.upsert(.gate, id: id, entity: gate, on: db, logger: logger)
            return gate
        }
    }

    package func createUser(_ input: NewUser) async throws(RegistryError) -> User {
        let input = try input.validated()
        let id = input.id ?? EntityIdGenerator.make("usr")
        let now = now()
        return try await write(
            "create user",
            constraintErrors: [
                "users_pkey": .alreadyExists(.user, id: id)
            ]
        ) { db in
            try await Self.requireSites(input.siteIds, on: db, logger: logger)
            try await db.query(
                "INSERT INTO users (id, name, created_at, sites_changed_at) VALUES (\(id), \(input.name), \(now), \(now))", logger: logger)
            return try await Self.assign(userId: id, to: input.siteIds, on: db, logger: logger)
        }
    }

    package func setUserSites(userId: String, siteIds: [String]) async throws(RegistryError) -> User {
        let siteIds = try UserSites(siteIds: siteIds).validated().siteIds
        return try await write("assign user sites") { db in
            // The user's row locked: two assignments at once apply one after the other, each published.
            guard try await db.firstRow("SELECT id FROM users WHERE id = \(userId) FOR UPDATE", logger: logger) != nil else {
                throw RegistryError.notFound(.user, id: userId)
            }
            try await Self.requireSites(siteIds, on: db, logger: logger)
            try await db.query("DELETE FROM user_sites WHERE user_id = \(userId)", logger: logger)
            try await db.query("UPDATE users SET sites_changed_at = \(now()) WHERE id = \(userId)", logger: logger)
            return try await Self.assign(userId: userId, to: siteIds, on: db, logger: logger)
        }
    }

    package func setSiteGeofence(siteId: String, _ geofence: Geofence) async throws(RegistryError) -> Site {
        let geofence = try geofence.validated()
        return try await write("move a site's geofence") { db in
            // The row locked first, then read whole in a statement of its own: a RETURNING's subqueries (the
            // shift history) see the statement's snapshot, taken before a concurrent shift change it waited
            // for committed, and the published site would carry the new shift without the earlier one.
            guard try await db.firstRow("SELECT id FROM sites WHERE id = \(siteId) FOR UPDATE", logger: logger) != nil else {
                throw RegistryError.notFound(.site, id: siteId)
            }
            try await db.query(
                """
                UPDATE sites SET geofence_latitude = \(geofence.latitude), geofence_longitude = \(geofence.longitude),
                    geofence_radius_m = \(geofence.radiusMeters)
                WHERE id = \(siteId)
                """, logger: logger)
            let site = try Columns.site(
                try await db.singleRow("SELECT \(unescaped: Columns.site) FROM sites s WHERE s.id = \(siteId)", logger: logger))
            try await ChangeOutbox.upsert(.site, id: siteId, entity: site, on: db, logger: logger)
            return site
        }
    }

    package func setSiteShift(siteId: String, _ change: SiteShiftChange) async throws(RegistryError) -> Site {
        let change = try change.validated()
        let now = now()
        return try await write("change a site's shift") { db in
            guard let row = try await db.firstRow("SELECT timezone FROM sites WHERE id = \(siteId) FOR UPDATE", logger: logger) else {
                throw RegistryError.notFound(.site, id: siteId)
            }
            let timezone = try row.decode(String.self)
            let today = Self.localDate(of: now, in: timezone)
            let from = change.from ?? today
            // `shift` is the shift in force: a change takes effect today at the latest (an older merger,
            // which reads only `shift`, would otherwise judge today by a shift not yet in force).
            guard from <= today else {
                throw RegistryError.invalid("from", "must not be after the site's today (\(today)): set a change on the day it starts")
            }
            // The shift that held on the day before `from`: the earliest stored period ending on or after
            // it, else the site's current one. It now ends at `from`; every later one is replaced.
            let ending = try await db.firstRow(
                "SELECT to_char(min(until), 'YYYY-MM-DD') FROM site_shift_history WHERE site_id = \(siteId) AND until >= \(from.description)::date",
                logger: logger
            ).flatMap { try $0.decode(String?.self) }
            if let ending {
                try await db.query(
                    "DELETE FROM site_shift_history WHERE site_id = \(siteId) AND until > \(ending)::date", logger: logger)
                try await db.query(
                    "UPDATE site_shift_history SET until = \(from.description)::date, changed_at = \(now) WHERE site_id = \(siteId) AND until = \(ending)::date",
                    logger: logger)
            } else {
                try await db.query(
                    """
                    INSERT INTO site_shift_history (site_id, until, shift_start, shift_end, check_in_before_start_min,
                        check_out_after_end_min, late_entry_grace_min, early_exit_grace_min, changed_at)
                    SELECT id, \(from.description)::date, shift_start, shift_end, check_in_before_start_min, check_out_after_end_min,
                        late_entry_grace_min, early_exit_grace_min, \(now)
                    FROM sites WHERE id = \(siteId)
                    """, logger: logger)
            }
            let shift = change.shift
            let updated = try await db.singleRow(
                """
                UPDATE sites AS s SET shift_start = \(shift.start.description)::time, shift_end = \(shift.end.description)::time,
                    check_in_before_start_min = \(shift.checkInBeforeStartMinutes), check_out_after_end_min = \(shift.checkOutAfterEndMinutes),
                    late_entry_grace_min = \(shift.lateEntryGraceMinutes), early_exit_grace_min = \(shift.earlyExitGraceMinutes)
                WHERE s.id = \(siteId)
                RETURNING \(unescaped: Columns.site)
                """, logger: logger)
            let site = try Columns.site(updated)
            try await ChangeOutbox.upsert(.site, id: siteId, entity: site, on: db, logger: logger)
            return site
        }
    }

    /// The calendar date of `instant` in the IANA zone `timezone` (UTC when the zone is unknown here).
    static func localDate(of instant: Date, in timezone: String) -> CalendarDate {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: timezone) ?? TimeZone(secondsFromGMT: 0)!
        let parts = calendar.dateComponents([.year, .month, .day], from: instant)
        return CalendarDate(year: parts.year ?? 1970, month: parts.month ?? 1, day: parts.day ?? 1)
            ?? CalendarDate(daysSince1970: Int(instant.timeIntervalSince1970 / 86_400))
    }

    package func renameUser(userId: String, name: String) async throws(RegistryError) -> User {
        let name = try UserName(name: name).validated().name
        return try await write("rename user") { db in
            guard try await db.firstRow("UPDATE users SET name = \(name) WHERE id = \(userId) RETURNING id", logger: logger) != nil else {
                throw RegistryError.notFound(.user, id: userId)
            }
            let row = try await db.singleRow("SELECT \(unescaped: Columns.user) FROM users u WHERE u.id = \(userId)", logger: logger)
            let user = try Columns.user(row)
            try await ChangeOutbox.upsert(.user, id: userId, entity: user, on: db, logger: logger)
            return user
        }
    }

    /// Fails naming the first site that does not exist (the foreign key error would not say which), or
    /// when the sites belong to more than one organization: a user is a person of one organization,
    /// and a phone configured with two organizations' sites would be taken at both.
    static func requireSites(_ siteIds: [String], on db: PostgresConnection, logger: Logger) async throws {
        let found = try await db.rows("SELECT id::text, organization_id::text FROM sites WHERE id = ANY(\(siteIds))", logger: logger)
            .map { try $0.decode((String, String).self) }
        let organizations = Dictionary(found, uniquingKeysWith: { first, _ in first })
        if let missing = siteIds.first(where: { organizations[$0] == nil }) { throw RegistryError.notFound(.site, id: missing) }
        if Set(organizations.values).count > 1 {
            let named = siteIds.map { "\($0) of \(organizations[$0] ?? "?")" }.joined(separator: ", ")
            throw RegistryError.invalidInput([
                FieldError(field: "siteIds", reason: "names sites of more than one organization (\(named)); a user's sites are of one")
            ])
        }
    }

    /// Adds the user's sites, and publishes the user as it now is.
    static func assign(userId: String, to siteIds: [String], on db: PostgresConnection, logger: Logger) async throws -> User {
        try await db.query("INSERT INTO user_sites (user_id, site_id) SELECT \(userId), unnest(\(siteIds)::text[])", logger: logger)
        let row = try await db.singleRow("SELECT \(unescaped: Columns.user) FROM users u WHERE u.id = \(userId)", logger: logger)
        let user = try Columns.user(row)
        try await ChangeOutbox.upsert(.user, id: userId, entity: user, on: db, logger: logger)
        return user
    }
}
