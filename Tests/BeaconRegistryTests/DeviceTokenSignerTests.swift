import AttendanceProtocol
import BeaconRegistryCore
import Foundation
import ServiceRuntime
import Testing

@testable import AccessControl

@Suite("Device tokens verified without the database")
struct DeviceTokenSignerTests {
    let issued = Date(timeIntervalSince1970: 1_760_000_000)
    let keyA = try! DeviceSigningKey(id: "k2025a", secret: Array(repeating: 0xA1, count: 32))
    let keyB = try! DeviceSigningKey(id: "k2025b", secret: Array(repeating: 0xB2, count: 32))

    @Test func signedTokenVerifiesToItsClaims() throws {
        let signer = try DeviceTokenSigner(activeKey: keyA)
        let (token, claims) = signer.sign(
            deviceId: "dev_1", userId: "EMP-042", issuedAt: issued.addingTimeInterval(0.7), lifetime: .seconds(3600))
        #expect(token.hasPrefix("v1."))
        #expect(token.split(separator: ".").count == 3)
        #expect(
            claims
                == DeviceClaims(
                    deviceId: "dev_1", userId: "EMP-042", issuedAt: issued, expiresAt: issued.addingTimeInterval(3600), keyId: "k2025a"))
        #expect(try signer.verify(token, now: issued.addingTimeInterval(10)) == claims)
        // Deterministic: the same claims give the same token.
        #expect(signer.sign(claims) == token)
    }

    @Test func alteredPayloadOrSignatureIsRefused() throws {
        let signer = try DeviceTokenSigner(activeKey: keyA)
        let (token, _) = signer.sign(deviceId: "dev_1", userId: "EMP-042", issuedAt: issued, lifetime: .seconds(3600))
        let parts = token.split(separator: ".").map(String.init)
        try #require(parts.count == 3)

        // Another user's id in an otherwise genuine token.
        let forgedClaims = DeviceClaims(
            deviceId: "dev_1", userId: "EMP-999", issuedAt: issued, expiresAt: issued.addingTimeInterval(3600), keyId: "k2025a")
        let forgedParts = signer.sign(forgedClaims).split(separator: ".")
        try #require(forgedParts.count == 3)
        let forgedPayload = forgedParts[1]
        #expect(throws: DeviceTokenError.badSignature) {
            try signer.verify("\(parts[0]).\(forgedPayload).\(parts[2])", now: issued)
        }
        // One flipped signature character.
        var signature = Array(parts[2])
        try #require(signature.count > 5)
        signature[5] = signature[5] == "A" ? "B" : "A"
        #expect(throws: DeviceTokenError.badSignature) {
            try signer.verify("\(parts[0]).\(parts[1]).\(String(signature))", now: issued)
        }
        // Signed by a key with the same id but other bytes.
        let impostor = try DeviceTokenSigner(activeKey: DeviceSigningKey(id: "k2025a", secret: Array(repeating: 0xEE, count: 32)))
        #expect(throws: DeviceTokenError.badSignature) {
            try signer.verify(impostor.sign(forgedClaims), now: issued)
        }
    }

    @Test func expiredTokenIsRefused() throws {
        let signer = try DeviceTokenSigner(activeKey: keyA)
        let (token, claims) = signer.sign(deviceId: "dev_1", userId: "u", issuedAt: issued, lifetime: .seconds(60))
        #expect(try signer.verify(token, now: issued.addingTimeInterval(59.9)) == claims)
        #expect(throws: DeviceTokenError.expired(at: issued.addingTimeInterval(60))) {
            try signer.verify(token, now: issued.addingTimeInterval(60))
        }
    }

    @Test func keysRotateByKeyId() throws {
        let old = try DeviceTokenSigner(activeKey: keyA)
        let (oldToken, oldClaims) = old.sign(deviceId: "dev_1", userId: "u", issuedAt: issued, lifetime: .seconds(3600))

        // After rotation: B signs, A still verifies.
        let rotated = try DeviceTokenSigner(activeKey: keyB, previousKeys: [keyA])
        #expect(try rotated.verify(oldToken, now: issued) == oldClaims)
        let (newToken, newClaims) = rotated.sign(deviceId: "dev_2", userId: "u", issuedAt: issued, lifetime: .seconds(3600))
        #expect(newClaims.keyId == "k2025b")

        // Once A is retired its tokens are refused by key id; B's were never known to the old signer.
        let retired = try DeviceTokenSigner(activeKey: keyB)
        #expect(throws: DeviceTokenError.unknownKeyId("k2025a")) { try retired.verify(oldToken, now: issued) }
        #expect(throws: DeviceTokenError.unknownKeyId("k2025b")) { try old.verify(newToken, now: issued) }
        #expect(rotated.keyIds == ["k2025a", "k2025b"])
    }

    @Test(arguments: [
        "", "v1", "v1..", "v1.abc", "v2.eyJ9.c2ln", "v1.!!!.c2ln", "v1.e30.c2ln", "v1.bm90IGpzb24.c2ln",
        "v1.eyJkaWQiOiJkIn0.c2ln", "v1.e30.c2ln.extra", String(repeating: "a", count: 5_000),
    ])
    func malformedTokensAreRefused(token: String) throws {
        let signer = try DeviceTokenSigner(activeKey: keyA)
        do {
            _ = try signer.verify(token, now: issued)
            Issue.record("accepted \(token)")
        } catch {
            guard case .malformed = error else { Issue.record("\(token): \(error)"); return }
        }
    }

    @Test func weakOrDuplicateKeysAreRefused() {
        #expect(throws: DeviceTokenError.self) { try DeviceSigningKey(id: "k", secret: Array(repeating: 1, count: 31)) }
        #expect(throws: DeviceTokenError.self) { try DeviceSigningKey(id: "bad id", secret: Array(repeating: 1, count: 32)) }
        #expect(throws: DeviceTokenError.self) { try DeviceTokenSigner(activeKey: keyA, previousKeys: [keyA]) }
    }
}

@Suite("Device token keys from the environment")
struct DeviceTokenSignerConfigurationTests {
    let secretA = Data(repeating: 0xA1, count: 32).base64EncodedString()
    let secretB = Data(repeating: 0xB2, count: 48).base64EncodedString()

    @Test func keysAndTheActiveOneAreRead() throws {
        let env = EnvironmentReader(["DEVICE_TOKEN_KEYS": "old:\(secretA), new:\(secretB)", "DEVICE_TOKEN_ACTIVE_KEY": "new"])
        let signer = try DeviceTokenSigner.load(from: env)
        #expect(signer.activeKeyId == "new")
        #expect(signer.keyIds == ["old", "new"])
        let first = try DeviceTokenSigner.load(from: EnvironmentReader(["DEVICE_TOKEN_KEYS": "old:\(secretA),new:\(secretB)"]))
        #expect(first.activeKeyId == "old")
    }

    @Test(arguments: [
        [:],
        ["DEVICE_TOKEN_KEYS": "nocolon"],
        ["DEVICE_TOKEN_KEYS": "k:not base64!"],
        ["DEVICE_TOKEN_KEYS": "k:\(Data(repeating: 1, count: 16).base64EncodedString())"],
        ["DEVICE_TOKEN_KEYS": "k:\(Data(repeating: 1, count: 32).base64EncodedString())", "DEVICE_TOKEN_ACTIVE_KEY": "other"],
        // The active id twice, with two secrets: services listing them in another order would disagree.
        [
            "DEVICE_TOKEN_KEYS":
                "k:\(Data(repeating: 1, count: 32).base64EncodedString()),k:\(Data(repeating: 2, count: 32).base64EncodedString())"
        ],
    ])
    func badSettingsAreOneClearError(values: [String: String]) {
        #expect(throws: ConfigurationError.self) { try DeviceTokenSigner.load(from: EnvironmentReader(values)) }
    }
}
