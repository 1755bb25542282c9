import Testing

/// Every test of the REST service runs on the real PostgreSQL, nested in this suite so they run
/// one at a time (each opens a pool; the machine and the database are shared).
@Suite("Beacon registry REST on the local PostgreSQL", .serialized, .timeLimit(.minutes(3)))
struct RegistryServiceTests {}
