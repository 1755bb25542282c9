/// A date without a time or zone, written `YYYY-MM-DD`: the day a beacon's battery was replaced, a
/// day of attendance in a site's time zone.
///
/// Every value is a real day of the proleptic Gregorian calendar (no 2025-02-29); what range of
/// years a field accepts is that field's rule (the registry's battery dates: 2000-2999).
public struct CalendarDate: Hashable, Sendable, Comparable, TextCodable {
    public static let textFormat = "a date like 2025-09-18"

    public private(set) var year: Int
    public private(set) var month: Int
    public private(set) var day: Int

    /// `nil` unless `month` and `day` name a day of that year.
    public init?(year: Int, month: Int, day: Int) {
        guard (1...12).contains(month), day >= 1, day <= Self.days(inMonth: month, of: year) else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// Parses `YYYY-MM-DD` (four, two and two ASCII digits).
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2])
        else { return nil }
        self.init(year: y, month: m, day: d)
    }

    /// The day `days` after 1970-01-01 (before it when negative).
    public init(daysSince1970 days: Int) {
        let (y, m, d) = CivilCalendar.date(days: Int64(days))
        (year, month, day) = (Int(y), Int(m), Int(d))
    }

    /// Days since 1970-01-01: subtracting two gives the days between them.
    public var daysSince1970: Int {
        Int(CivilCalendar.days(year: Int64(year), month: Int64(month), day: Int64(day)))
    }

    /// The next day.
    public var next: CalendarDate { CalendarDate(daysSince1970: daysSince1970 + 1) }

    /// The day before.
    public var previous: CalendarDate { CalendarDate(daysSince1970: daysSince1970 - 1) }

    public var description: String {
        func pad(_ n: Int, _ width: Int) -> String {
            let digits = String(n)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }

    public static func < (a: CalendarDate, b: CalendarDate) -> Bool {
        (a.year, a.month, a.day) < (b.year, b.month, b.day)
    }

    private static func days(inMonth month: Int, of year: Int) -> Int {
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
        return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    }
}
