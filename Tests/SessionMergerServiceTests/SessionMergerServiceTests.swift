import Testing

/// Every suite of this target shares the merger's tables (the outbox publisher drains every row, the
/// idle sweep looks at every due timeline), so they run one at a time.
@Suite("Session merger service", .serialized)
struct SessionMergerServiceTests {}
