import Foundation

/// A wall-clock time of day, `HH:MM` (24 h), encoded as that string. Local to a site's time zone:
/// shift start and end as the registry stores them and daily attendance judges them.
public struct TimeOfDay: Hashable, Sendable, Comparable, TextCodable {
    public static let textFormat = "a time like 08:30"

    public let hour: Int
    public let minute: Int

    /// `nil` outside 00:00...23:59.
    public init?(hour: Int, minute: Int) {
        guard (0...23).contains(hour), (0...59).contains(minute) else { return nil }
        self.hour = hour
        self.minute = minute
    }

    /// Parses `HH:MM` (also `H:MM`, and `HH:MM:00` as PostgreSQL prints a `time`).
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || (parts.count == 3 && parts[2] == "00"),
            (1...2).contains(parts[0].count), parts[1].count == 2,
            parts[0].allSatisfy(\.isWholeNumberDigit), parts[1].allSatisfy(\.isWholeNumberDigit),
            let hour = Int(parts[0]), let minute = Int(parts[1])
        else { return nil }
        self.init(hour: hour, minute: minute)
    }

    public var minutesSinceMidnight: Int { hour * 60 + minute }

    public var description: String {
        (hour < 10 ? "0" : "") + "\(hour):" + (minute < 10 ? "0" : "") + "\(minute)"
    }

    public static func < (a: Self, b: Self) -> Bool { a.minutesSinceMidnight < b.minutesSinceMidnight }
}

extension Character {
    /// An ASCII digit 0-9 (not a sign, not another script's digit).
    fileprivate var isWholeNumberDigit: Bool { isASCII && isNumber }
}
