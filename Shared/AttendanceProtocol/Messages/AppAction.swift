/// What the app should do after a refusal: shown to the user and logged (with a 409).
///
/// Open: a newer server may send an action an older app does not know; the app keeps the raw value
/// and falls back to showing the reasons. `none` is spelled `.noAction` in Swift so that it never
/// reads as `Optional.none`.
public enum AppAction: OpenWireEnum {
    /// Nothing to do.
    case noAction
    case enableBluetooth
    case walkToGate
    case updateApp
    case contactAdmin
    /// Try again after `retryAfterSeconds`.
    case retryAfter
    /// Automatic attendance is off here (kill switch): record attendance by hand.
    case manualCheckin
    case unrecognized(String)

    public static let knownValues: [AppAction] = [
        .noAction, .enableBluetooth, .walkToGate, .updateApp, .contactAdmin, .retryAfter, .manualCheckin,
    ]

    public init(rawValue: String) { self = Self.value(for: rawValue) }

    public var rawValue: String {
        switch self {
        case .noAction: return "none"
        case .enableBluetooth: return "enable_bluetooth"
        case .walkToGate: return "walk_to_gate"
        case .updateApp: return "update_app"
        case .contactAdmin: return "contact_admin"
        case .retryAfter: return "retry_after"
        case .manualCheckin: return "manual_checkin"
        case .unrecognized(let raw): return raw
        }
    }
}
