import AccessControl
import AttendanceProtocol
import BeaconRegistryCore

/// The registry checks keys against its own repository (no cache: a revocation applies at once
/// here); other services use `PostgresAdminKeyVerifier`.
struct RepositoryAdminKeyVerifier: AdminKeyVerifier {
    let repository: any AdminRegistryRepository

    func verify(presentedKey: String) async throws -> APIKey? {
        try await repository.verifyAPIKey(presentedKey)
    }
}
