import Foundation

/// A family of worlds a sweep draws from. Every world draws every radio and people parameter from the
/// sweep's full ranges (`SweepRanges`); its class narrows the one it is named after.
package enum WorldClass: String, Sendable, Hashable, Codable, CaseIterable {
    /// Corridors and halls where signals carry: path-loss exponent 1.6-2.2.
    case openSpace = "open-space"
    /// An ordinary office: exponent 2.2-2.8.
    case office
    /// Concrete, metal, people: exponent 2.8-3.5.
    case denseBuilding = "dense-building"
    /// Three or four gates 4-6 m apart, every one heard from the next (`SweepRanges.tightGates`,
    /// `tightGateSpacingMeters`).
    case tightGates = "tight-gates"
    /// Half of the people only pass by, 1-4 m from the doors: walking, running, cycling, stopping.
    case busyPavement = "busy-pavement"
}

/// The ranges a sweep draws its worlds from. `fleet-simulator sweep --ranges FILE` narrows or widens any
/// of them (`SweepRanges.decode`).
package struct SweepRanges: Sendable, Hashable, Encodable {
    package var pathLossExponent: ClosedRange<Double> = 1.6...3.5
    /// Each beacon transmits up to this much above or below its calibrated 1 m power, dB.
    package var beaconTxErrorDb: Double = 4
    /// Each phone's extra loss, dB: -6 (reads 6 dB hot) ... 8 (reads 8 dB cold).
    package var phoneLossDb: ClosedRange<Double> = -6...8
    package var shadowingSigmaDb: ClosedRange<Double> = 4...8
    package var shadowingDecorrelationMeters: ClosedRange<Double> = 1...5
    /// Share of the shadowing all beacons of a site share as one phone hears them
    /// (`RadioParameters.beaconShadowCorrelation`): none by default, the harsher case.
    package var beaconShadowCorrelation: ClosedRange<Double> = 0...0
    /// Rician K-factor when the site has a direct path; a third of the sites are Rayleigh.
    package var ricianKFactorDb: ClosedRange<Double> = 0...10
    package var rayleighShare = 1.0 / 3
    package var bodyAttenuationDb: ClosedRange<Double> = 6...12
    /// The front wall between a phone inside and the gate beacon: a glass front to concrete, dB.
    package var wallAttenuationDb: ClosedRange<Double> = 3...20
    package var advertisingIntervalMs: ClosedRange<Int> = 100...1_000
    package var packetLoss: ClosedRange<Double> = 0.05...0.15
    package var gateSpacingMeters: ClosedRange<Double> = 4...12
    package var gates: ClosedRange<Int> = 1...3
    /// The tight-gates class's own gate count and spacing, in place of `gates` and `gateSpacingMeters`.
    package var tightGates: ClosedRange<Int> = 3...4
    package var tightGateSpacingMeters: ClosedRange<Double> = 4...6
    package var deskDepth: ClosedRange<Double> = 2...70
    package var shadowedDeskShare = 0.15
    package var pavementDistance: ClosedRange<Double> = 1...10
    package var passerSpeed: ClosedRange<Double> = 0.8...2
    package var walkSpeed: ClosedRange<Double> = 0.7...2

    package init() {}
}

/// A ranges document that cannot be used: every problem, each naming its key.
package struct SweepRangesError: Error, Sendable, CustomStringConvertible {
    package var problems: [String]
    package var description: String { problems.joined(separator: "; ") }
}

extension SweepRanges {
    /// Where a key of a ranges document goes, and the values it may take.
    enum Field {
        case range(WritableKeyPath<SweepRanges, ClosedRange<Double>>, allowed: ClosedRange<Double>)
        case wholeRange(WritableKeyPath<SweepRanges, ClosedRange<Int>>, allowed: ClosedRange<Int>)
        case number(WritableKeyPath<SweepRanges, Double>, allowed: ClosedRange<Double>)
    }

    /// Every key of a ranges document (the property names, as the sweep's JSON report writes them).
    static var fields: [String: Field] {
        [
            "pathLossExponent": .range(\.pathLossExponent, allowed: 1...6), "beaconTxErrorDb": .number(\.beaconTxErrorDb, allowed: 0...20),
            "phoneLossDb": .range(\.phoneLossDb, allowed: -20...30), "shadowingSigmaDb": .range(\.shadowingSigmaDb, allowed: 0...20),
            "shadowingDecorrelationMeters": .range(\.shadowingDecorrelationMeters, allowed: 0.1...100),
            "beaconShadowCorrelation": .range(\.beaconShadowCorrelation, allowed: 0...1),
            "ricianKFactorDb": .range(\.ricianKFactorDb, allowed: -10...30), "rayleighShare": .number(\.rayleighShare, allowed: 0...1),
            "bodyAttenuationDb": .range(\.bodyAttenuationDb, allowed: 0...40),
            "wallAttenuationDb": .range(\.wallAttenuationDb, allowed: 0...60),
            "advertisingIntervalMs": .wholeRange(\.advertisingIntervalMs, allowed: 20...10_000),
            "packetLoss": .range(\.packetLoss, allowed: 0...0.95), "gates": .wholeRange(\.gates, allowed: 1...8),
            "gateSpacingMeters": .range(\.gateSpacingMeters, allowed: 1...100),
            "tightGates": .wholeRange(\.tightGates, allowed: 2...8),
            "tightGateSpacingMeters": .range(\.tightGateSpacingMeters, allowed: 1...100),
            "deskDepth": .range(\.deskDepth, allowed: 0.5...200),
            "shadowedDeskShare": .number(\.shadowedDeskShare, allowed: 0...1),
            "pavementDistance": .range(\.pavementDistance, allowed: 0.5...50), "passerSpeed": .range(\.passerSpeed, allowed: 0.2...10),
            "walkSpeed": .range(\.walkSpeed, allowed: 0.2...5),
        ]
    }

    /// One value of a ranges document: a number (a range of one value) or `[low, high]`.
    enum Value: Decodable {
        case range(Double, Double)
        case malformed(String)

        init(from decoder: any Decoder) {
            guard let c = try? decoder.singleValueContainer() else {
                self = .malformed("expected a number or [low, high]")
                return
            }
            if let x = try? c.decode(Double.self) {
                self = .range(x, x)
            } else if let pair = try? c.decode([Double].self), pair.count == 2 {
                self = .range(pair[0], pair[1])
            } else {
                self = .malformed("expected a number or [low, high]")
            }
        }
    }

    /// The default ranges with a JSON document's keys applied, e.g. `{"phoneLossDb": 0,
    /// "beaconShadowCorrelation": [0, 1]}`. Absent keys keep their default; an unknown key, a value
    /// that is not a number or a pair, a pair whose low is above its high, a value outside what the
    /// world can be, or a fraction where a whole number is needed, is an error naming the key.
    package static func decode(_ data: Data) throws(SweepRangesError) -> SweepRanges {
        guard let document = try? JSONDecoder().decode([String: Value].self, from: data) else {
            throw SweepRangesError(problems: ["expected a JSON object whose values are numbers or [low, high] pairs"])
        }
        var ranges = SweepRanges()
        var problems: [String] = []
        let fields = Self.fields
        for key in document.keys.sorted() {
            guard let field = fields[key] else {
                problems.append("\(key): not a sweep range (known: \(fields.keys.sorted().joined(separator: ", ")))")
                continue
            }
            guard case .range(let low, let high) = document[key]! else {
                if case .malformed(let why) = document[key]! { problems.append("\(key): \(why)") }
                continue
            }
            guard low <= high else {
                problems.append("\(key): low \(low) is above high \(high)")
                continue
            }
            switch field {
            case .range(let path, let allowed):
                guard allowed.contains(low) && allowed.contains(high) else {
                    problems.append("\(key): must lie within \(allowed.lowerBound)...\(allowed.upperBound), got \(low)...\(high)")
                    continue
                }
                ranges[keyPath: path] = low...high
            case .wholeRange(let path, let allowed):
                guard let lo = Int(exactly: low), let hi = Int(exactly: high), allowed.contains(lo), allowed.contains(hi) else {
                    problems.append(
                        "\(key): must be whole numbers within \(allowed.lowerBound)...\(allowed.upperBound), got \(low)...\(high)")
                    continue
                }
                ranges[keyPath: path] = lo...hi
            case .number(let path, let allowed):
                guard low == high, allowed.contains(low) else {
                    problems.append(
                        "\(key): must be one number within \(allowed.lowerBound)...\(allowed.upperBound), got \(low == high ? "\(low)" : "\(low)...\(high)")"
                    )
                    continue
                }
                ranges[keyPath: path] = low
            }
        }
        guard problems.isEmpty else { throw SweepRangesError(problems: problems) }
        return ranges
    }
}
