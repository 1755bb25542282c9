import AccessControl
import AttendanceProtocol
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOFoundationEssentialsCompat
import Testing

@testable import ServiceRuntime

@Suite("Control characters refused at the edge")
struct RequestTextGuardTests {
    @Test func jsonStringsAreScannedRawAndEscaped() {
        func hit(_ json: String) -> Bool { RequestTextGuard.jsonHasControlCharacter(Array(json.utf8)) }
        #expect(!hit(#"{"name": "plain", "n": 1, "list": ["a", "b"]}"#))
        #expect(!hit("{\n\t\"name\" : \"between tokens\"\r\n}"))
        #expect(!hit(#"{"path": "C:\\dir\\new", "quote": "say \"hi\"", "e": "\u00e9 \u2028"}"#))
        #expect(hit(#"{"name": "x\u0000"}"#))
        #expect(hit(#"{"name": "x\u001F"}"#))
        #expect(hit(#"{"name": "x\u007f"}"#))
        #expect(hit(#"{"name": "line\nbreak"}"#))
        #expect(hit(#"{"name": "tab\there"}"#))
        #expect(hit("{\"name\": \"raw\u{1}byte\"}"))
        #expect(hit(#"{"ke\u0000y": 1}"#))
    }

    @Test func theFieldIsNamedByItsPath() {
        func field(_ json: String) -> String? { RequestTextGuard.fieldWithControl(in: Data(json.utf8)) }
        #expect(field(#"{"name": "x\u0000"}"#) == "name")
        #expect(field(#"{"a": {"b": ["ok", "n\u0001"]}}"#) == "a.b[1]")
        #expect(field(#"[{"id": "x"}, {"id": "y\n"}]"#) == "[1].id")
        #expect(field(#"{"ke\u0000y": 1}"#) == "(a key)")
        #expect(field("not json") == nil)
    }

    static func app() -> some ApplicationProtocol {
        let router = Router()
        router.add(middleware: ProblemMiddleware(ProblemMapper(maxBodyBytes: 1_024)))
        router.post("echo") { request, _ -> String in
            let body = try await request.body.collect(upTo: 1_024)
            return String(buffer: body)
        }
        router.get("items/{id}") { _, context -> String in context.pathParameter("id") ?? "" }
        return Application(router: router)
    }

    static func problem(_ response: TestResponse) throws -> ProblemDetails {
        #expect(response.headers[.contentType] == ProblemDetails.mediaType)
        return try JSONDecoder().decode(ProblemDetails.self, from: Data(buffer: response.body))
    }

    @Test func everyPartOfARequestIsCheckedAndTheBodyStaysReadable() async throws {
        try await Self.app().test(.router) { client in
            let ok = try await client.execute(uri: "/echo", method: .post, body: ByteBuffer(string: #"{"name":"fine"}"#))
            #expect(ok.status == .ok && String(buffer: ok.body) == #"{"name":"fine"}"#)
            // Every answer, success or problem, carries the hardening headers.
            #expect(ok.headers[.xContentTypeOptions] == "nosniff" && ok.headers[.cacheControl] == "no-store")

            let body = try await client.execute(uri: "/echo", method: .post, body: ByteBuffer(string: #"{"user":{"name":"x\u0000"}}"#))
            #expect(body.status == .badRequest)
            #expect(try Self.problem(body).errors?.first?.field == "user.name")
            #expect(body.headers[.xContentTypeOptions] == "nosniff" && body.headers[.cacheControl] == "no-store")

            let query = try await client.execute(uri: "/items/1?siteId=a%00b", method: .get)
            #expect(query.status == .badRequest)
            #expect(try Self.problem(query).errors?.first?.field == "siteId")

            // A value that is not valid percent-encoded UTF-8 would reach the route as U+FFFD.
            let encoding = try await client.execute(uri: "/items/1?limit=5&siteId=a%ffb", method: .get)
            #expect(encoding.status == .badRequest)
            #expect(try Self.problem(encoding).errors?.map(\.field) == ["siteId"])
            let name = try await client.execute(uri: "/items/1?%e2%82=1", method: .get)
            #expect(name.status == .badRequest)
            #expect(try Self.problem(name).errors?.first?.field == "query")
            let fine = try await client.execute(uri: "/items/1?siteId=caf%C3%A9%20x&empty=&flag", method: .get)
            #expect(fine.status == .ok)

            let path = try await client.execute(uri: "/items/a%00b", method: .get)
            #expect(path.status == .badRequest)
            #expect(try Self.problem(path).errors?.first?.field == "path")

            // Path parameters come percent-decoded.
            let decoded = try await client.execute(uri: "/items/AC%3A23%3A3F", method: .get)
            #expect(decoded.status == .ok && String(buffer: decoded.body) == "AC:23:3F")

            // Over the limit: 413, not read further.
            let big = try await client.execute(uri: "/echo", method: .post, body: ByteBuffer(string: String(repeating: "x", count: 2_000)))
            #expect(big.status == .contentTooLarge)
        }
    }
}

@Suite("Admin request bodies: a field the request does not have is refused")
struct AdminBodyTests {
    struct Body: Codable, Equatable {
        struct Inner: Codable, Equatable { var a: Int }
        var name: String
        var note: String?
        var inner: Inner?
        var list: [Inner]?
    }

    func decode(_ json: String) throws -> Body { try AdminJSON.decodeBody(Body.self, from: Data(json.utf8)) }

    @Test func knownFieldsAndNullsDecode() throws {
        #expect(
            try decode(#"{"name":"x","note":null,"inner":{"a":1},"list":[{"a":2}]}"#)
                == Body(name: "x", note: nil, inner: .init(a: 1), list: [.init(a: 2)]))
    }

    @Test func unknownFieldsAreNamedAtAnyDepth() throws {
        for (json, field) in [
            (#"{"name":"x","nmae":"y"}"#, "nmae"),
            (#"{"name":"x","nmae":null}"#, "nmae"),
            (#"{"name":"x","inner":{"a":1,"b":null}}"#, "inner.b"),
            (#"{"name":"x","inner":{"a":1,"b":2}}"#, "inner.b"),
            (#"{"name":"x","list":[{"a":1},{"a":2,"c":3}]}"#, "list[1].c"),
        ] {
            #expect(
                performing: { try decode(json) },
                throws: { error in
                    (error as? ProblemDetails)?.status == 400 && (error as? ProblemDetails)?.errors?.first?.field == field
                })
        }
    }
}

extension AdminBodyTests {
    /// The decoder never reads a member the request has no field for; a number there that no double can
    /// hold made the second parse throw an error nothing mapped: a 500, without authentication.
    @Test func aNumberBeyondADoubleInAnUnknownMemberIsA400() throws {
        for json in [#"{"name":"x","x":1e400}"#, #"{"name":"x","inner":{"a":1,"huge":-1e999}}"#] {
            #expect(
                performing: { try decode(json) },
                throws: { error in (error as? ProblemDetails)?.status == 400 })
        }
    }

    @Test func aNumberAnIntegerFieldCannotHoldIsNamed() throws {
        for (json, field) in [
            (#"{"name":"x","inner":{"a":5.5}}"#, "inner.a"), (#"{"name":"x","list":[{"a":99999999999999999999}]}"#, "list[0].a"),
        ] {
            #expect(
                performing: { try decode(json) },
                throws: { error in
                    (error as? ProblemDetails)?.status == 400 && (error as? ProblemDetails)?.errors?.map(\.field) == [field]
                })
        }
    }

    @Test func toleratedTopLevelMembersAreIgnored() throws {
        let body = try AdminJSON.decodeBody(Body.self, from: Data(#"{"name":"x","version":3}"#.utf8), tolerating: ["version"])
        #expect(body.name == "x")
    }

    @Test func toleratedNestedMembersAreIgnoredAndOthersStillNamed() throws {
        let json = #"{"name":"x","inner":{"a":1,"old":true}}"#
        #expect(try AdminJSON.decodeBody(Body.self, from: Data(json.utf8), tolerating: ["inner.old"]).name == "x")
        #expect(
            performing: { try AdminJSON.decodeBody(Body.self, from: Data(json.utf8), tolerating: ["old"]) },
            throws: { error in (error as? ProblemDetails)?.errors?.map(\.field) == ["inner.old"] })
    }
}
