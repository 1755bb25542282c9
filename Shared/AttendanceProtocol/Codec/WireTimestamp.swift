import Foundation

/// The one timestamp format of the protocol: RFC 3339 / ISO 8601 in UTC with a `Z` suffix,
/// at millisecond precision.
///
/// - Encoding writes whole seconds when the millisecond part is zero (`2025-09-18T06:35:12Z`, the
///   specified form) and exactly three fractional digits otherwise (`2025-09-18T06:35:12.345Z`).
/// - Decoding accepts `Z` or a numeric offset (`+07:00`), and any number of fractional digits;
///   the value is rounded to the millisecond so that decode → encode → decode is stable.
///
/// Every type in this module encodes its dates through this format explicitly (not through an
/// encoder's date strategy), so the wire format does not depend on how an encoder is configured.
/// It is hand-written rather than `ISO8601DateFormatter` because it runs on every message of the
/// hot path and must be deterministic on every platform.
public enum WireTimestamp {
    /// Formats `date` as an RFC 3339 UTC timestamp, rounded to the millisecond.
    public static func string(from date: Date) -> String {
        let totalMillis = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let (seconds, millis) = floorDivMod(totalMillis, 1000)
        let (days, secondOfDay) = floorDivMod(seconds, 86_400)
        let (year, month, day) = CivilCalendar.date(days: days)
        var out = ""
        out.reserveCapacity(24)
        appendPadded(&out, year, width: 4)
        out.append("-")
        appendPadded(&out, month, width: 2)
        out.append("-")
        appendPadded(&out, day, width: 2)
        out.append("T")
        appendPadded(&out, secondOfDay / 3600, width: 2)
        out.append(":")
        appendPadded(&out, (secondOfDay % 3600) / 60, width: 2)
        out.append(":")
        appendPadded(&out, secondOfDay % 60, width: 2)
        if millis != 0 {
            out.append(".")
            appendPadded(&out, millis, width: 3)
        }
        out.append("Z")
        return out
    }

    /// Parses an RFC 3339 timestamp (`Z` or `±HH:MM` offset, optional fraction), or returns `nil`.
    public static func date(from string: String) -> Date? {
        var string = string
        return string.withUTF8 { parse($0) }
    }

    /// Rounds `date` to the protocol's precision (milliseconds): what a round trip through the wire
    /// format gives back.
    public static func truncatedToWirePrecision(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
    }

    /// `date` down to its millisecond: a bound that travels on the wire and must never pass an instant
    /// after it (a poll's `asOf`, where rounding up could skip a request received in the same millisecond).
    public static func flooredToWirePrecision(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
    }

    private static func parse(_ b: UnsafeBufferPointer<UInt8>) -> Date? {
        // YYYY-MM-DDTHH:MM:SS is 19 bytes, the shortest zone designator is 1 byte.
        guard b.count >= 20 else { return nil }
        func digits(_ start: Int, _ count: Int) -> Int64? {
            var value: Int64 = 0
            for i in start..<(start + count) {
                let c = b[i]
                guard c >= 0x30, c <= 0x39 else { return nil }
                value = value * 10 + Int64(c - 0x30)
            }
            return value
        }
        guard let year = digits(0, 4), b[4] == UInt8(ascii: "-"),
            let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
            let day = digits(8, 2), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
            let hour = digits(11, 2), b[13] == UInt8(ascii: ":"),
            let minute = digits(14, 2), b[16] == UInt8(ascii: ":"),
            let second = digits(17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 59
        else { return nil }

        var index = 19
        var millis: Int64 = 0
        if b[index] == UInt8(ascii: ".") {
            index += 1
            let fractionStart = index
            var fraction: Double = 0
            var scale: Double = 1
            while index < b.count, b[index] >= 0x30, b[index] <= 0x39 {
                if index - fractionStart < 9 {
                    scale /= 10
                    fraction += Double(b[index] - 0x30) * scale
                }
                index += 1
            }
            guard index > fractionStart else { return nil }
            millis = Int64((fraction * 1000).rounded())
        }
        guard index < b.count else { return nil }
        var offsetSeconds: Int64 = 0
        switch b[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign: Int64 = b[index] == UInt8(ascii: "-") ? -1 : 1
            guard b.count - index == 6, let oh = digits(index + 1, 2), b[index + 3] == UInt8(ascii: ":"),
                let om = digits(index + 4, 2), oh <= 23, om <= 59
            else { return nil }
            offsetSeconds = sign * (oh * 3600 + om * 60)
            index += 6
        default:
            return nil
        }
        guard index == b.count else { return nil }
        let days = CivilCalendar.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        let total = seconds * 1000 + millis
        return Date(timeIntervalSince1970: Double(total) / 1000)
    }

    private static func appendPadded(_ out: inout String, _ value: Int64, width: Int) {
        let text = String(value)
        if text.count < width { out.append(String(repeating: "0", count: width - text.count)) }
        out.append(text)
    }

    private static func floorDivMod(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b, r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    private static func isLeap(_ y: Int64) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    private static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}
