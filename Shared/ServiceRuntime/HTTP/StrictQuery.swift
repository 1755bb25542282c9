import AttendanceProtocol
import Foundation
import Hummingbird

/// The query string of one request, checked strictly: an unknown parameter, a repeated one or an
/// empty value is a 400 naming it, never ignored. The typed getters answer a bad value the same way.
public struct StrictQuery: Sendable {
    private var values: [String: String] = [:]

    public init(_ request: Request, allowed: Set<String>) throws(ProblemDetails) {
        var errors: [FieldError] = []
        for (name, value) in request.uri.queryParameters {
            let key = String(name)
            guard allowed.contains(key) else {
                errors.append(
                    FieldError(
                        field: key, reason: "is not a parameter of this endpoint (allowed: \(allowed.sorted().joined(separator: ", ")))"))
                continue
            }
            guard values[key] == nil else {
                errors.append(FieldError(field: key, reason: "is given more than once"))
                continue
            }
            let text = String(value) // Hummingbird has percent-decoded values already
            guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
                errors.append(FieldError(field: key, reason: "must not be empty"))
                continue
            }
            values[key] = text
        }
        if !errors.isEmpty { throw .validation(errors) }
    }

    /// The raw value, for checks of a service's own.
    public subscript(_ name: String) -> String? { values[name] }

    public func string(_ name: String, maxLength: Int = 256) throws(ProblemDetails) -> String? {
        guard let value = values[name] else { return nil }
        guard value.count <= maxLength else {
            throw .validation([FieldError(field: name, reason: "must be at most \(maxLength) characters")])
        }
        return value
    }

    public func timestamp(_ name: String) throws(ProblemDetails) -> Date? {
        guard let value = values[name] else { return nil }
        guard let date = WireTimestamp.date(from: value) else {
            throw .validation([FieldError(field: name, reason: "must be an RFC 3339 timestamp such as 2025-09-18T08:30:00Z")])
        }
        return date
    }

    public func int(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) throws(ProblemDetails) -> Int {
        guard let text = values[name] else { return defaultValue }
        guard let value = Int(text), range.contains(value) else {
            throw .validation([FieldError(field: name, reason: "must be an integer within \(range.lowerBound)...\(range.upperBound)")])
        }
        return value
    }

    public func choice<T>(_ name: String, _ options: [String: T]) throws(ProblemDetails) -> T? {
        guard let text = values[name] else { return nil }
        guard let value = options[text] else {
            throw .validation([
                FieldError(field: name, reason: "must be one of \(options.keys.sorted().joined(separator: ", ")), got \"\(text)\"")
            ])
        }
        return value
    }
}
