import Testing

/// Every test of the REST service runs on the real PostgreSQL, nested in this suite. Each nested suite
/// runs its tests one at a time (each opens a pool on a shared machine and database); the nested
/// suites run beside each other, each test in a schema of its own.
@Suite("Beacon registry REST on the local PostgreSQL", .timeLimit(.minutes(3)))
struct RegistryServiceTests {}
