/// The shape of every id the registry stores (organizations, sites, gates, beacons, users, devices):
/// 1-128 characters of `A-Z a-z 0-9 . _ -`, starting with a letter or a digit. Services that take an
/// id in a path check it here, so an ill-formed one (`../../etc/passwd`) is a 400 everywhere.
public enum EntityId {
    public static let rule = "must be 1-128 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"

    public static func isValid(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard (1...128).contains(bytes.count), isAlnum(bytes[0]) else { return false }
        return bytes.allSatisfy { isAlnum($0) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D }
    }

    private static func isAlnum(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39)
    }
}
