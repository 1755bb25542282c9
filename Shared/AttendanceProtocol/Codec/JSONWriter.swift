/// Serialises an encoded tree to UTF-8 bytes in one of the codec's output styles.
struct JSONWriter {
    enum Layout {
        /// No whitespace; members in encoding order. The Kafka wire form.
        case compact
        /// Two-space indentation, `"key": value`, arrays of scalars on one line, trailing newline.
        /// The form of golden files and logs.
        case pretty
        /// No whitespace, members sorted by UTF-8 bytes at every level: the same logical value
        /// always gives the same bytes, whatever order it was built in. Input of fingerprints.
        case canonical
    }

    private let layout: Layout
    private var out: [UInt8] = []

    static func write(_ value: EncodedValue, layout: Layout) -> [UInt8] {
        var writer = JSONWriter(layout: layout)
        writer.out.reserveCapacity(512)
        writer.write(value, indent: 0)
        if layout == .pretty { writer.out.append(0x0A) }
        return writer.out
    }

    private init(layout: Layout) {
        self.layout = layout
    }

    private mutating func write(_ value: EncodedValue, indent: Int) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let text): out.append(contentsOf: text.utf8)
        case .string(let text): writeString(text)
        case .array(let array): writeArray(array.items, indent: indent)
        case .object(let object): writeObject(object, indent: indent)
        case .encoder(let encoder): write(encoder.result, indent: indent)
        }
    }

    private mutating func writeArray(_ items: [EncodedValue], indent: Int) {
        guard !items.isEmpty else {
            out.append(contentsOf: "[]".utf8)
            return
        }
        out.append(UInt8(ascii: "["))
        let multiline = layout == .pretty && items.contains(where: \.isContainer)
        for (i, item) in items.enumerated() {
            if i > 0 {
                out.append(UInt8(ascii: ","))
                if layout == .pretty, !multiline { out.append(UInt8(ascii: " ")) }
            }
            if multiline { newline(indent + 1) }
            write(item, indent: indent + 1)
        }
        if multiline { newline(indent) }
        out.append(UInt8(ascii: "]"))
    }

    private mutating func writeObject(_ object: EncodedObject, indent: Int) {
        guard !object.keys.isEmpty else {
            out.append(contentsOf: "{}".utf8)
            return
        }
        let order =
            layout == .canonical
            ? object.keys.indices.sorted { object.keys[$0].utf8.lexicographicallyPrecedes(object.keys[$1].utf8) }
            : Array(object.keys.indices)
        out.append(UInt8(ascii: "{"))
        for (i, member) in order.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            if layout == .pretty { newline(indent + 1) }
            writeString(object.keys[member])
            out.append(UInt8(ascii: ":"))
            if layout == .pretty { out.append(UInt8(ascii: " ")) }
            write(object.values[member], indent: indent + 1)
        }
        if layout == .pretty { newline(indent) }
        out.append(UInt8(ascii: "}"))
    }

    private mutating func newline(_ indent: Int) {
        out.append(0x0A)
        for _ in 0..<(indent * 2) { out.append(0x20) }
    }

    /// RFC 8259 escaping: quote, backslash and control characters; `/` and non-ASCII stay as is.
    /// Runs without escapes are copied in one go.
    private mutating func writeString(_ text: String) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var runStart = 0
            for i in 0..<bytes.count {
                let byte = bytes[i]
                guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i]))
                appendEscape(byte)
                runStart = i + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private mutating func appendEscape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
        case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
        case 0x0A: out.append(contentsOf: "\\n".utf8)
        case 0x0D: out.append(contentsOf: "\\r".utf8)
        case 0x09: out.append(contentsOf: "\\t".utf8)
        case 0x08: out.append(contentsOf: "\\b".utf8)
        case 0x0C: out.append(contentsOf: "\\f".utf8)
        default:
            let hex = Array("0123456789abcdef".utf8)
            out.append(contentsOf: "\\u00".utf8)
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
    }
}
