import Testing

/// The target's suites; each test works in a schema of its own (`MergerDB`), so the suites run side by side.
@Suite("Session merger service")
struct SessionMergerServiceTests {}
