import Foundation

extension CodingUserInfoKey {
    /// Set (to `true`) on an encoder that must write every value in its long form: a type with a
    /// short spelling (a rule config written as `"enforce"` instead of `{"mode": "enforce"}`) writes
    /// the long one, so that what a client sent can be compared member by member with what the type
    /// reads (`AdminJSON.decodeBody`).
    public static let longForm = CodingUserInfoKey(rawValue: "attendance.longForm")!
}

extension Encoder {
    /// Whether this encoder asks for the long form (`CodingUserInfoKey.longForm`).
    public var wantsLongForm: Bool { userInfo[.longForm] as? Bool == true }
}
