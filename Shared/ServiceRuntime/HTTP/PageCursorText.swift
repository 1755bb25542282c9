import Foundation

/// The text of an opaque page cursor: base64url (no padding) of `<version>:<payload>`, so a client
/// passes it back unchanged and a cursor of another version, or one that was edited, is refused.
public enum PageCursorText {
    public static func encode(version: String, _ payload: String) -> String {
        Data("\(version):\(payload)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The payload of a cursor of `version`; nil for anything else: not base64url, another version,
    /// an empty payload, control characters, or longer than `maxLength` characters.
    public static func decode(_ cursor: String, version: String, maxLength: Int) -> String? {
        guard !cursor.isEmpty, cursor.count <= maxLength else { return nil }
        var base64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        let prefix = version + ":"
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8), text.hasPrefix(prefix),
            text.count > prefix.count, !RequestTextGuard.containsControlCharacter(text)
        else { return nil }
        return String(text.dropFirst(prefix.count))
    }
}
