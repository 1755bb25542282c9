import Testing

@testable import PresenceKit

@Suite("The server's clock from Date headers")
struct ServerClockTests {
    @Test("an IMF-fixdate header parses to its second and prints back the same")
    func httpDate() throws {
        let date = try #require(Timestamp(httpDate: "Sun, 06 Nov 1994 08:49:37 GMT"))
        #expect(date.millisecondsSinceEpoch == 784_111_777_000)
        #expect(date.httpDate == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(Timestamp(httpDate: "Thu, 01 Jan 1970 00:00:00 GMT")?.millisecondsSinceEpoch == 0)
        #expect(Timestamp(httpDate: "Sat, 29 Feb 2028 23:59:59 GMT")?.httpDate == "Tue, 29 Feb 2028 23:59:59 GMT")
        // Every day of four years prints and parses back to itself (leap years, month ends, weekdays).
        for day in Int64(19_000)..<Int64(20_461) {
            let t = Timestamp(millisecondsSinceEpoch: day * 86_400_000 + 45_296_000)
            #expect(Timestamp(httpDate: t.httpDate) == t)
        }
        #expect(Timestamp(millisecondsSinceEpoch: 784_111_777_999).httpDate == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test(
        "anything but an IMF-fixdate is no date",
        arguments: [
            "", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1969 08:49:37 GMT",
            "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 1994 08:49:37  GMT", "Sun, 06 Nov +994 08:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, +6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 -1:49:37 GMT", "Sun, 06 Nov 1994 08:49:+7 GMT",
            "Sun, 06 Nov 1994 08:49:٣٧ GMT",
        ])
    func notADate(_ header: String) {
        #expect(Timestamp(httpDate: header) == nil)
    }

    @Test("answers bound the offset, and successive answers tighten it")
    func tightens() throws {
        var clock = ServerClock()
        #expect(clock.offsetMs == nil)
        #expect(clock.phoneAheadMs(wallClockOffsetMs: 3_600_000) == nil)
        // The server reads 10 minutes ahead of the steady clock (an hour-fast phone: its steady clock
        // started at the phone's wall clock). True offset: 600,250 ms.
        let trueOffset: Int64 = 600_250
        func answer(sentAt: Int64, roundTrip: Int64, writtenAfter: Int64) -> (Timestamp, Timestamp, Timestamp) {
            let written = sentAt + writtenAfter
            let server = (written + trueOffset) / 1000 * 1000
            return (
                Timestamp(millisecondsSinceEpoch: server), Timestamp(millisecondsSinceEpoch: sentAt),
                Timestamp(millisecondsSinceEpoch: sentAt + roundTrip)
            )
        }
        let (d1, s1, a1) = answer(sentAt: 1_000_000, roundTrip: 400, writtenAfter: 200)
        let recorded = clock.record(serverDate: d1, sentAt: s1, answeredAt: a1)
        #expect(recorded)
        let first = try #require(clock.bounds)
        // One answer: its round trip plus the header's two seconds (whole seconds, maybe cached for one).
        #expect(first.contains(trueOffset) && first.upperBound - first.lowerBound <= 2_400)
        for k in Int64(1)...20 {
            let (d, s, a) = answer(sentAt: 1_000_000 + k * 60_037, roundTrip: 300, writtenAfter: 150)
            clock.record(serverDate: d, sentAt: s, answeredAt: a)
        }
        let tight = try #require(clock.bounds)
        #expect(tight.contains(trueOffset) && tight.upperBound - tight.lowerBound <= 1_400)
        #expect(abs(try #require(clock.offsetMs) - trueOffset) <= 800)
        #expect(clock.phoneAheadMs(wallClockOffsetMs: 0) == clock.offsetMs.map { -$0 })
    }

    @Test("a slow or backward answer is not recorded; one stray answer is not believed, two that agree start over")
    func unusableAndStepped() throws {
        var clock = ServerClock()
        let date = Timestamp(millisecondsSinceEpoch: 5_000_000)
        let slow = clock.record(serverDate: date, sentAt: .zero + 100_000, answeredAt: .zero + 130_001)
        let backward = clock.record(serverDate: date, sentAt: .zero + 100_000, answeredAt: .zero + 99_999)
        #expect(!slow && !backward)
        #expect(clock.bounds == nil)
        let recorded = clock.record(serverDate: date, sentAt: .zero + 100_000, answeredAt: .zero + 100_500)
        #expect(recorded)
        let before = try #require(clock.offsetMs)
        // An hour later the server answers an hour and a minute on: its clock was stepped a minute, or
        // the answer is a stray (a proxy's). One such answer changes nothing; a second that agrees with
        // it starts over from the two.
        let later = date + 3_660_000
        clock.record(serverDate: later, sentAt: .zero + 3_700_000, answeredAt: .zero + 3_700_500)
        #expect(clock.offsetMs == before && clock.outlier != nil)
        clock.record(serverDate: later + 60_000, sentAt: .zero + 3_760_000, answeredAt: .zero + 3_760_300)
        #expect(abs(try #require(clock.offsetMs) - (before + 60_000)) <= 1_500)
        #expect(clock.outlier == nil)
        // Two strays that disagree: the second replaces the first, and a third agreeing with it starts over.
        clock.record(serverDate: later + 900_000, sentAt: .zero + 3_780_000, answeredAt: .zero + 3_780_100)
        clock.record(serverDate: later + 700_000, sentAt: .zero + 3_790_000, answeredAt: .zero + 3_790_100)
        let second = try #require(clock.outlier)
        #expect(clock.offsetMs.map { abs($0 - (before + 60_000)) <= 1_500 } == true)
        clock.record(serverDate: later + 710_000, sentAt: .zero + 3_800_000, answeredAt: .zero + 3_800_100)
        #expect(clock.outlier == nil && clock.bounds.map { $0.overlaps(second) } == true)
        let restarted = try #require(clock.offsetMs)
        // A stray between agreeing answers is forgotten by the next answer inside the bounds.
        clock.record(serverDate: later + 2_000_000, sentAt: .zero + 3_810_000, answeredAt: .zero + 3_810_100)
        clock.record(serverDate: later + 720_000, sentAt: .zero + 3_810_000, answeredAt: .zero + 3_810_100)
        let offset = try #require(clock.offsetMs)
        #expect(clock.outlier == nil && abs(offset - restarted) <= 1_500)
    }
}
