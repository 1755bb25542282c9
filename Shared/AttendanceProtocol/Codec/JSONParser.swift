import Foundation

/// A parsed JSON document, before it is decoded into a type. Numbers keep their literal text so
/// the decoder can tell `3` from `3.5` and report an integer field holding a fraction by name.
enum JSONNode {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONNode])
    case object(JSONObjectNode)

    var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

/// Object members in document order. Lookups are linear for the small objects of this protocol
/// and through an index for large ones.
final class JSONObjectNode {
    let members: [(key: String, value: JSONNode)]
    private lazy var index: [MemberName: Int] = {
        var index = [MemberName: Int](minimumCapacity: members.count)
        for (i, member) in members.enumerated() { index[MemberName(member.key)] = i }
        return index
    }()

    init(members: [(key: String, value: JSONNode)]) {
        self.members = members
    }

    subscript(key: String) -> JSONNode? {
        if members.count <= 16 {
            for member in members where MemberName.same(member.key, key) { return member.value }
            return nil
        }
        return index[MemberName(key)].map { members[$0].value }
    }
}

/// A member name compared as JSON compares them: by its UTF-8 bytes (code points), not by Swift's
/// canonical equivalence, which would also take "é" and "e\u{301}" for one name. Comparing the
/// byte counts first makes the common mismatch one integer comparison.
struct MemberName: Hashable {
    let text: String

    init(_ text: String) { self.text = text }

    static func same(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.utf8.elementsEqual(b.utf8)
    }

    static func == (a: MemberName, b: MemberName) -> Bool { same(a.text, b.text) }

    func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// Why not `JSONDecoder`: on Linux its errors lose the field path for numbers that do not fit the
/// target type and carry no position for syntax errors; the gateway must name the failing field.
/// Duplicate member names are refused so that the fingerprinted payload and the processed payload
/// cannot be read differently by two parsers.
struct JSONParser {
    struct SyntaxError: Error {
        var reason: String
    }

    static let maximumDepth = 128

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0
    /// A member of the top-level object whose source bytes are wanted, and where they were.
    private let capturedMember: String?
    private var capturedRange: Range<Int>?

    private init(bytes: UnsafeBufferPointer<UInt8>, capturing member: String? = nil) {
        self.bytes = bytes
        self.capturedMember = member
    }

    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(SyntaxError) -> JSONNode {
        try parse(bytes, capturing: nil).node
    }

    /// Parses, and also tells where the value of the top-level object's member `member` lies in
    /// `bytes` (nil when the document is not an object or has no such member).
    static func parse(
        _ bytes: UnsafeBufferPointer<UInt8>, capturing member: String?
    ) throws(SyntaxError) -> (node: JSONNode, memberRange: Range<Int>?) {
        var parser = JSONParser(bytes: bytes, capturing: member)
        parser.skipWhitespace()
        guard parser.index < bytes.count else { throw SyntaxError(reason: "empty input") }
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.index == bytes.count else {
            throw parser.error("unexpected data after the end of the document")
        }
        return (value, parser.capturedRange)
    }

    // MARK: Values

    private mutating func parseValue() throws(SyntaxError) -> JSONNode {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected character \(describe(bytes[index]))")
        }
    }

    private mutating func parseObject() throws(SyntaxError) -> JSONNode {
        try enterContainer()
        index += 1 // {
        var members: [(key: String, value: JSONNode)] = []
        // The protocol's objects have up to about 16 members: one allocation instead of five regrowths.
        members.reserveCapacity(16)
        var seen: Set<MemberName>? = nil
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(JSONObjectNode(members: members))
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw error("expected a quoted member name") }
            let keyStart = index
            let key = try parseString()
            // Duplicate detection: linear while small, a set once the object grows.
            if members.count >= 16 {
                if seen == nil { seen = Set(members.map { MemberName($0.key) }) }
                if !seen!.insert(MemberName(key)).inserted { throw error("duplicate member name \"\(key)\"", at: keyStart) }
            } else if members.contains(where: { MemberName.same($0.key, key) }) {
                throw error("duplicate member name \"\(key)\"", at: keyStart)
            }
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw error("expected ':' after member name") }
            index += 1
            skipWhitespace()
            let valueStart = index
            members.append((key, try parseValue()))
            if depth == 1, key == capturedMember { capturedRange = valueStart..<index }
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return .object(JSONObjectNode(members: members))
            case nil: throw error("unexpected end of input inside an object")
            default: throw error("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray() throws(SyntaxError) -> JSONNode {
        try enterContainer()
        index += 1 // [
        var items: [JSONNode] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return .array(items)
            case nil: throw error("unexpected end of input inside an array")
            default: throw error("expected ',' or ']'")
            }
        }
    }

    private mutating func enterContainer() throws(SyntaxError) {
        depth += 1
        guard depth <= Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth) levels") }
    }

    private mutating func parseString() throws(SyntaxError) -> String {
        let start = index
        index += 1 // opening quote
        let contentStart = index
        // Fast path: no escapes; ASCII needs no UTF-8 validation.
        var isASCII = true
        while index < bytes.count {
            let c = bytes[index]
            if c == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[contentStart..<index])
                index += 1
                if isASCII { return String(decoding: slice, as: UTF8.self) }
                guard let text = String(validating: slice, as: UTF8.self) else {
                    throw error("invalid UTF-8 in string", at: start)
                }
                return text
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw error("unescaped control character in string") }
            if c >= 0x80 { isASCII = false }
            index += 1
        }
        guard index < bytes.count else { throw error("unterminated string", at: start) }

        // Slow path: unescape into a byte buffer.
        var buffer = Array(UnsafeBufferPointer(rebasing: bytes[contentStart..<index]))
        while index < bytes.count {
            let c = bytes[index]
            switch c {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: buffer, as: UTF8.self) else {
                    throw error("invalid UTF-8 in string", at: start)
                }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { break }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): buffer.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): buffer.append(UInt8(ascii: "\\"))
                case UInt8(ascii: "/"): buffer.append(UInt8(ascii: "/"))
                case UInt8(ascii: "b"): buffer.append(0x08)
                case UInt8(ascii: "f"): buffer.append(0x0C)
                case UInt8(ascii: "n"): buffer.append(0x0A)
                case UInt8(ascii: "r"): buffer.append(0x0D)
                case UInt8(ascii: "t"): buffer.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try parseUnicodeEscape()
                    buffer.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    throw error("invalid escape sequence \\\(describe(escape))", at: index - 2)
                }
            default:
                if c < 0x20 { throw error("unescaped control character in string") }
                buffer.append(c)
                index += 1
            }
        }
        throw error("unterminated string", at: start)
    }

    /// After `\u`: four hex digits, combining a surrogate pair when one follows.
    private mutating func parseUnicodeEscape() throws(SyntaxError) -> Unicode.Scalar {
        let escapeStart = index - 2
        let high = try parseHex4()
        if (0xD800...0xDBFF).contains(high) {
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw error("unpaired surrogate in \\u escape", at: escapeStart)
            }
            index += 2
            let low = try parseHex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid surrogate pair", at: escapeStart) }
            let value = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
            return Unicode.Scalar(value)!
        }
        guard let scalar = Unicode.Scalar(high) else { throw error("unpaired surrogate in \\u escape", at: escapeStart) }
        return scalar
    }

    private mutating func parseHex4() throws(SyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("unexpected end of input in \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw error("invalid hex digit \(describe(c)) in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// Validates the RFC 8259 number grammar and returns the literal text.
    private mutating func parseNumber() throws(SyntaxError) -> String {
        let start = index
        if peek() == UInt8(ascii: "-") { index += 1 }
        guard let first = peek(), isDigit(first) else { throw error("invalid number") }
        index += 1
        if first == UInt8(ascii: "0"), let next = peek(), isDigit(next) {
            throw error("leading zeros are not allowed in numbers", at: start)
        }
        skipDigits()
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard let d = peek(), isDigit(d) else { throw error("expected a digit after the decimal point") }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let d = peek(), isDigit(d) else { throw error("expected a digit in the exponent") }
            skipDigits()
        }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    }

    // MARK: Helpers

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while let c = peek(), isDigit(c) { index += 1 }
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(SyntaxError) {
        let start = index
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error("unexpected end of input", at: start) }
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for i in 0..<count where bytes[index + i] != expected[i] {
            throw error("invalid literal, expected '\(literal)'", at: start)
        }
        index += count
    }

    private func describe(_ c: UInt8) -> String {
        (0x21...0x7E).contains(c) ? "'\(Character(Unicode.Scalar(c)))'" : String(format: "0x%02X", c)
    }

    /// An error with a 1-based line and column (in bytes), what an editor shows.
    private func error(_ reason: String, at position: Int? = nil) -> SyntaxError {
        let offset = min(position ?? index, bytes.count)
        var line = 1
        var column = 1
        for i in 0..<offset {
            if bytes[i] == 0x0A { line += 1; column = 1 } else { column += 1 }
        }
        return SyntaxError(reason: "\(reason) at line \(line), column \(column)")
    }
}
