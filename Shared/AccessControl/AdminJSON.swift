import AttendanceProtocol
import Foundation

/// The JSON coders of the admin APIs (registry, merger): RFC 3339 UTC timestamps as `WireTimestamp`
/// writes them, sorted keys, unescaped slashes.
public enum AdminJSON {
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(WireTimestamp.string(from: date))
        }
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = WireTimestamp.date(from: text) else {
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: decoder.codingPath,
                        debugDescription: "\"\(text)\" is not an RFC 3339 timestamp such as 2025-09-18T08:30:00Z"
                    ))
            }
            return date
        }
        return decoder
    }
}

extension AdminJSON {
    /// A request body as `T`, refusing what `T` does not read: a key `T` has no field for (at any
    /// depth) is a 400 naming it, so a misspelled field is never silently ignored, `null` or not.
    /// Which keys `T` reads is what it writes back (`T` is encoded again, in its long form, and the
    /// two key trees compared) and its stored properties (an optional `null` is not written back).
    /// `tolerating` names keys accepted and ignored: top-level ones, or nested ones as `parent.child`
    /// (a field an earlier version had, which old clients still send).
    ///
    /// A number a field cannot hold (a fraction or an integer beyond 64 bits where an integer is
    /// read) is a 400 naming the field, although the decoder itself names none.
    ///
    /// `refusingUnknown: false` is for the routes phones call: a member `T` does not have is ignored
    /// there, as everywhere in the device API, so a newer app's body is taken by an older service.
    public static func decodeBody<T: Codable>(
        _ type: T.Type, from data: Data, tolerating: Set<String> = [], refusingUnknown: Bool = true
    ) throws -> T {
        let value: T
        do {
            value = try decoder().decode(T.self, from: data)
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            guard let parsed = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else {
                throw ProblemDetails.validation([FieldError(field: "", reason: "the body is not valid JSON")])
            }
            var fields: [String] = []
            collectNonIntegers(parsed, path: "", into: &fields)
            guard !fields.isEmpty else { throw DecodingError.dataCorrupted(context) }
            throw ProblemDetails.validation(fields.prefix(10).map { FieldError(field: $0, reason: "must be a whole number within range") })
        }
        // The decoder never reads a member `T` has no field for; this parse reads every one, and refuses
        // what JSONDecoder let through there (a number beyond a double's range, `1e400`).
        var given: Any
        do {
            given = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw ProblemDetails.validation([
                FieldError(field: "", reason: "the body is not valid JSON here (a number beyond a double's range, say)")
            ])
        }
        guard refusingUnknown else { return value }
        if var object = given as? [String: Any] {
            for key in tolerating { remove(key.split(separator: ".").map(String.init)[...], from: &object) }
            given = object
        }
        let longForm = encoder()
        longForm.userInfo[.longForm] = true
        let read = try JSONSerialization.jsonObject(with: longForm.encode(value), options: [.fragmentsAllowed])
        var unknown: [String] = []
        collectUnknownKeys(given: given, read: read, value: value, path: "", into: &unknown)
        guard unknown.isEmpty else {
            throw ProblemDetails.validation(unknown.prefix(10).map { FieldError(field: $0, reason: "is not a field of this request") })
        }
        return value
    }

    /// Removes the member at `path` (keys of nested objects), if it is there.
    static func remove(_ path: ArraySlice<String>, from object: inout [String: Any]) {
        guard let first = path.first else { return }
        guard path.count > 1 else {
            object[first] = nil
            return
        }
        guard var child = object[first] as? [String: Any] else { return }
        remove(path.dropFirst(), from: &child)
        object[first] = child
    }

    /// Paths of numbers that are not whole or do not fit 64 bits.
    static func collectNonIntegers(_ value: Any, path: String, into fields: inout [String]) {
        if let object = value as? [String: Any] {
            for key in object.keys.sorted() {
                collectNonIntegers(object[key]!, path: path.isEmpty ? key : "\(path).\(key)", into: &fields)
            }
        } else if let array = value as? [Any] {
            for (index, element) in array.enumerated() { collectNonIntegers(element, path: "\(path)[\(index)]", into: &fields) }
        } else if let number = value as? NSNumber {
            let double = number.doubleValue
            if double.rounded() != double || Swift.abs(double) >= 9.2e18 { fields.append(path) }
        }
    }

    /// The members `value` has: what it wrote back, and its stored properties (an optional left `nil`
    /// is not written but is still a member, so a `null` sent for it is not unknown).
    static func members(read: [String: Any], value: Any?) -> Set<String> {
        var names = Set(read.keys)
        if let value {
            for child in Mirror(reflecting: value).children {
                if let label = child.label { names.insert(label.hasPrefix("_") ? String(label.dropFirst()) : label) }
            }
        }
        return names
    }

    /// The stored property `name` of `value`, unwrapped from its optional.
    static func member(_ name: String, of value: Any?) -> Any? {
        guard let value, let child = Mirror(reflecting: value).children.first(where: { $0.label == name || $0.label == "_\(name)" }) else {
            return nil
        }
        let mirror = Mirror(reflecting: child.value)
        if mirror.displayStyle == .optional { return mirror.children.first?.value }
        return child.value
    }

    static func collectUnknownKeys(given: Any, read: Any, value: Any?, path: String, into unknown: inout [String]) {
        // `T` writes its long form (`CodingUserInfoKey.longForm`); a value sent in a short spelling
        // (a string where an object could be) has no members to compare.
        if let given = given as? [String: Any], let read = read as? [String: Any] {
            let known = members(read: read, value: value)
            for key in given.keys.sorted() {
                let field = path.isEmpty ? key : "\(path).\(key)"
                guard known.contains(key) else {
                    unknown.append(field)
                    continue
                }
                guard let readValue = read[key] else { continue }
                collectUnknownKeys(given: given[key]!, read: readValue, value: member(key, of: value), path: field, into: &unknown)
            }
        } else if let given = given as? [Any], let read = read as? [Any], given.count == read.count {
            let elements =
                (value.map { Mirror(reflecting: $0) }?.displayStyle == .collection) ? Mirror(reflecting: value!).children.map(\.value) : []
            for (index, (element, readElement)) in zip(given, read).enumerated() {
                collectUnknownKeys(
                    given: element, read: readElement, value: index < elements.count ? elements[index] : nil, path: "\(path)[\(index)]",
                    into: &unknown
                )
            }
        }
    }
}
