import Foundation

extension AttendanceEvent: Validatable {
    public func validate(now: Date, limits: ValidationLimits) -> [FieldError] {
        var v = FieldValidator(now: now, limits: limits)
        v.identifier(id, "id")
        v.sha256Hex(idempotencyKey, "idempotencyKey")
        v.identifier(userId, "userId")
        v.identifier(deviceId, "deviceId")
        v.eventTime(timestamp, "timestamp")
        v.identifier(siteId, "siteId")
        v.uuid(beacon.uuid, "beacon.uuid")
        v.range(beacon.major, limits.beaconFieldRange, "beacon.major")
        v.range(beacon.minor, limits.beaconFieldRange, "beacon.minor")
        if let rssiSeries {
            if rssiSeries.count > limits.maxRSSISamples {
                v.fail("rssiSeries", "must have at most \(limits.maxRSSISamples) readings, has \(rssiSeries.count)")
            }
            for (i, rssi) in rssiSeries.enumerated() where !limits.rssiRange.contains(rssi) {
                v.fail("rssiSeries[\(i)]", "must be within \(limits.rssiRange.lowerBound)...\(limits.rssiRange.upperBound) dBm, is \(rssi)")
            }
            // 0 is "not heard this second": allowed, but a series of nothing heard proves nothing.
            if !rssiSeries.contains(where: { $0 != 0 && limits.rssiRange.contains($0) }) {
                v.fail("rssiSeries", "must contain at least one reading other than 0 (not heard)")
            }
        }
        if let txPower { v.range(txPower, limits.txPowerRange, "txPower") }
        if let motion {
            v.token(motion.state.rawValue, "motion.state", maxLength: limits.maxShortStringLength)
            if let steps = motion.steps2min { v.range(steps, 0...limits.maxStepsPerTwoMinutes, "motion.steps2min") }
        }
        if let radius = geofence?.radius, !(radius > 0 && radius <= limits.maxGeofenceRadiusMeters) {
            v.fail("geofence.radius", "must be within 0 (exclusive)...\(Int(limits.maxGeofenceRadiusMeters)) m, is \(radius)")
        }
        if let rt = handshake?.rt { v.nonNegative(rt, "handshake.rt") }
        if let latency = network?.latencyMs { v.nonNegative(latency, "network.latencyMs") }
        if let app {
            v.shortText(app.version, "app.version")
            if let build = app.build { v.nonNegative(build, "app.build") }
        }
        if let device {
            v.shortText(device.model, "device.model")
            if let os = device.os { v.shortText(os, "device.os") }
        }
        if let sessionKey { v.identifier(sessionKey, "sessionKey") }
        if let tEnd {
            if tEnd < timestamp { v.fail("tEnd", "must not be before timestamp") }
            v.eventTime(tEnd, "tEnd")
        }
        if let firstAttemptAt {
            if firstAttemptAt < timestamp { v.fail("firstAttemptAt", "must not be before timestamp") }
            v.eventTime(firstAttemptAt, "firstAttemptAt")
        }
        if let location {
            v.range(location.lat, -90...90, "location.lat")
            v.range(location.lon, -180...180, "location.lon")
            if let accuracy = location.accuracyM, !(accuracy >= 0) {
                v.fail("location.accuracyM", "must not be negative, is \(accuracy)")
            }
        }
        if let gatt {
            v.token(gatt.nonce, "gatt.nonce", maxLength: limits.maxTokenLength)
            v.token(gatt.hmac, "gatt.hmac", maxLength: limits.maxTokenLength)
        }
        return v.errors
    }
}

extension CheckInRequest: Validatable {
    public func validate(now: Date, limits: ValidationLimits) -> [FieldError] {
        var v = FieldValidator(now: now, limits: limits)
        v.identifier(userId, "userId")
        v.identifier(siteId, "siteId")
        v.eventTime(ts, "ts")
        v.identifier(sessionKey, "sessionKey")
        v.shortText(deviceMeta.model, "deviceMeta.model")
        v.shortText(deviceMeta.os, "deviceMeta.os")
        v.shortText(deviceMeta.appVersion, "deviceMeta.appVersion")
        return v.errors
    }
}

extension CheckOutRequest: Validatable {
    public func validate(now: Date, limits: ValidationLimits) -> [FieldError] {
        var v = FieldValidator(now: now, limits: limits)
        v.identifier(sessionKey, "sessionKey")
        v.eventTime(ts, "ts")
        v.token(reason.rawValue, "reason", maxLength: limits.maxShortStringLength)
        return v.errors
    }
}

extension HeartbeatRequest: Validatable {
    public func validate(now: Date, limits: ValidationLimits) -> [FieldError] {
        var v = FieldValidator(now: now, limits: limits)
        v.identifier(sessionKey, "sessionKey")
        v.eventTime(ts, "ts")
        return v.errors
    }
}

extension BatchEventsRequest: Validatable {
    public func validate(now: Date, limits: ValidationLimits) -> [FieldError] {
        var v = FieldValidator(now: now, limits: limits)
        if events.isEmpty {
            v.fail("events", "must not be empty")
        } else if events.count > limits.maxBatchEvents {
            v.fail("events", "must have at most \(limits.maxBatchEvents) events, has \(events.count)")
        }
        for (i, event) in events.enumerated() {
            v.merge(event.validate(now: now, limits: limits), under: "events[\(i)]")
        }
        return v.errors
    }
}

extension TelemetryUploadRequest: Validatable {
    public func validate(now: Date, limits: ValidationLimits) -> [FieldError] {
        var v = FieldValidator(now: now, limits: limits)
        v.shortText(appVersion, "appVersion")
        v.shortText(deviceModel, "deviceModel")
        if let osVersion { v.shortText(osVersion, "osVersion") }
        if let siteId { v.identifier(siteId, "siteId") }
        if events.isEmpty {
            v.fail("events", "must not be empty")
        } else if events.count > limits.maxTelemetryEvents {
            v.fail("events", "must have at most \(limits.maxTelemetryEvents) events, has \(events.count)")
        }
        for (i, event) in events.enumerated() {
            let prefix = "events[\(i)]"
            v.identifier(event.eventId, "\(prefix).eventId")
            v.token(event.name.rawValue, "\(prefix).name", maxLength: limits.maxShortStringLength)
            v.eventTime(event.at, "\(prefix).at")
            if let value = event.value, !(abs(value) <= limits.maxTelemetryValueMagnitude) {
                let bound = Int(limits.maxTelemetryValueMagnitude)
                v.fail("\(prefix).value", "must be a number between -\(bound) and \(bound)")
            } else if let value = event.value, let rule = event.name.valueRule, !rule.range.contains(value) {
                // What the aggregator averages: one phone's unit mistake or negative time would skew a site's figures.
                v.fail("\(prefix).value", "\(rule.words) for \(event.name.rawValue)")
            }
            if let attributes = event.attributes {
                if attributes.count > limits.maxTelemetryAttributes {
                    v.fail("\(prefix).attributes", "must have at most \(limits.maxTelemetryAttributes) entries, has \(attributes.count)")
                }
                for (key, value) in attributes.sorted(by: { $0.key < $1.key }) {
                    v.token(key, "\(prefix).attributes", maxLength: limits.maxShortStringLength)
                    if value.utf8.count > limits.maxTokenLength {
                        v.fail("\(prefix).attributes.\(key)", "must be at most \(limits.maxTokenLength) bytes")
                    }
                }
            }
        }
        return v.errors
    }
}
