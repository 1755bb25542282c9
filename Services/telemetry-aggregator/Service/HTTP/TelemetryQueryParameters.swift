import AttendanceProtocol
import Foundation
import Hummingbird
import TelemetryAggregatorCore

/// The query string of one request, checked strictly: an unknown parameter, a repeated one, an empty
/// value or a value no dimension can hold is a 400 naming it, never ignored.
struct TelemetryQueryParameters {
    static let filterNames: Set<String> = ["site", "appVersion", "deviceModel"]

    private var values: [String: String] = [:]

    init(_ request: Request, allowed: Set<String>) throws(ProblemDetails) {
        var errors: [FieldError] = []
        for (name, value) in request.uri.queryParameters {
            let key = String(name)
            guard allowed.contains(key) else {
                errors.append(FieldError(field: key, reason: "is not a parameter of this endpoint (allowed: \(allowed.sorted().joined(separator: ", ")))"))
                continue
            }
            guard values[key] == nil else {
                errors.append(FieldError(field: key, reason: "is given more than once"))
                continue
            }
            let text = String(value)
            guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
                errors.append(FieldError(field: key, reason: "must not be empty"))
                continue
            }
            values[key] = text
        }
        if !errors.isEmpty { throw .validation(errors) }
    }

    /// site / appVersion / deviceModel: at most `Dimensions.maxLength` printable characters, as stored.
    func filter() throws(ProblemDetails) -> MetricsFilter {
        var errors: [FieldError] = []
        func value(_ name: String) -> String? {
            guard let text = values[name] else { return nil }
            if text.count > Dimensions.maxLength {
                errors.append(FieldError(field: name, reason: "must be at most \(Dimensions.maxLength) characters"))
                return nil
            }
            if text.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) }) {
                errors.append(FieldError(field: name, reason: "must not contain control characters"))
                return nil
            }
            if text != text.trimmingCharacters(in: .whitespacesAndNewlines) {
                errors.append(FieldError(field: name, reason: "must not start or end with white space"))
                return nil
            }
            return text
        }
        let filter = MetricsFilter(site: value("site"), appVersion: value("appVersion"), deviceModel: value("deviceModel"))
        if !errors.isEmpty { throw .validation(errors) }
        return filter
    }

    func choice<T>(_ name: String, _ options: [String: T]) throws(ProblemDetails) -> T? {
        guard let text = values[name] else { return nil }
        guard let value = options[text] else {
            throw .validation([FieldError(field: name, reason: "must be one of \(options.keys.sorted().joined(separator: ", ")), got \"\(text)\"")])
        }
        return value
    }
}
