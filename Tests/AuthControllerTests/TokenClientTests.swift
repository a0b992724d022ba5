// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import Foundation
import Synchronization
import Testing
import TestSupport

/// Answers each POST with the next scripted response, and keeps every request.
final class ScriptedTransport: HTTPTransport {
    private let state: Mutex<(answers: [Result<HTTPResponse, AuthError>], requests: [HTTPRequest])>

    init(_ answers: [Result<HTTPResponse, AuthError>]) { state = Mutex((answers, [])) }
    convenience init(_ status: Int, _ body: String, headers: [String: String] = [:]) {
        self.init([.success(HTTPResponse(status: status, headers: headers, body: Array(body.utf8)))])
    }

    var requests: [HTTPRequest] { state.withLock { $0.requests } }

    func send(_ request: HTTPRequest, timeout: Duration) async throws(AuthError) -> HTTPResponse {
        try state.withLock { (state) throws(AuthError) -> HTTPResponse in
            state.requests.append(request)
            return try state.answers.removeFirst().get()
        }
    }
}

extension HTTPRequest {
    var text: String { String(decoding: body, as: UTF8.self) }
    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
}

/// The two protocols of the README's "Remote accounts: a token server" and `authctl.server(1)`.
@Suite("Token clients: the OAuth 2 password grant and the JSON API")
struct TokenClientTests {
    let now: UInt64 = 1_795_000_000_000_000
    let alice = AccountID(rawValue: "alice@example.org")!

    func client(_ protocol: ServerBinding.TokenProtocol, _ transport: ScriptedTransport, clientID: String? = nil, scope: String? = nil,
                revoke: String? = nil) throws -> any TokenClient {
        let server = try ServerURL(validating: `protocol` == .oauth2 ? "https://auth.example.org/token" : "https://api.example.org/v1")
        let binding = ServerBinding(server: server, tokenProtocol: `protocol`, clientID: clientID, scope: scope,
                                    revokeURL: try revoke.map { (text) throws(AuthError) in try ServerURL(validating: text) })
        return makeTokenClient(for: binding, transport: transport, timeout: 10, clock: { [now] in now })
    }

    @Test("oauth2 password grant: the form body, headers, and the answer's tokens and expiries")
    func oauth2SignIn() async throws {
        let transport = ScriptedTransport(200, #"{"access_token":"at","token_type":"bearer","expires_in":300,"refresh_token":"rt","refresh_expires_in":1800}"#,
                                          headers: ["date": "Wed, 18 Nov 2026 14:06:40 GMT"])
        let grant = try await client(.oauth2, transport, clientID: "cli", scope: "openid profile")
            .signIn(account: alice, password: try Password("p&ss wörd=1"), register: false)
        let request = try #require(transport.requests.first)
        #expect(request.url == "https://auth.example.org/token")
        #expect(request.text == "grant_type=password&username=alice%40example.org&password=p%26ss%20w%C3%B6rd%3D1&client_id=cli&scope=openid%20profile")
        #expect(request.header("Content-Type") == "application/x-www-form-urlencoded")
        #expect(request.header("Accept") == "application/json")
        #expect(request.header("User-Agent")?.hasPrefix("authctl/") == true)
        #expect(grant.tokens == TokenSet(accessToken: "at", refreshToken: "rt", tokenType: "Bearer"))
        #expect(grant.accessExpiry == .after(seconds: 300))
        #expect(grant.refreshExpiry == .after(seconds: 1800))
        // The server's clock is three hours ahead; relative expiries count from arrival anyway.
        let times = grant.times()
        // The Date header names a second; its middle is taken, so the offset is 3 h + 0.5 s.
        #expect(times.clockOffset == 3 * 3600 + 1)
        #expect(times.accessExpiresAt == now + 300_000_000)
        #expect(times.refreshExpiresAt == now + 1_800_000_000)
        #expect(times.accessLifetime == 300)
    }

    @Test("oauth2 refresh: rotation replaces the refresh token; without one the old one stays")
    func oauth2Refresh() async throws {
        let old = TokenSet(accessToken: "old", refreshToken: "r1")
        var transport = ScriptedTransport(200, #"{"access_token":"a2","token_type":"Bearer","refresh_token":"r2"}"#)
        var grant = try await client(.oauth2, transport).refresh(old)
        #expect(transport.requests.first?.text == "grant_type=refresh_token&refresh_token=r1")
        #expect(grant.tokens.refreshToken == "r2")
        transport = ScriptedTransport(200, #"{"access_token":"a3","token_type":"Bearer"}"#)
        grant = try await client(.oauth2, transport).refresh(old)
        #expect(grant.tokens.refreshToken == "r1")
    }

    @Test("oauth2 failures map to exit codes; server text is quoted safely", arguments: [
        (400, #"{"error":"invalid_grant"}"#, 77, "wrong password"),
        (401, #"{"error":"invalid_grant","error_description":"bad"}"#, 77, "wrong password"),
        (401, #"{"error":"invalid_client","error_description":"no such client\u001b[31m\nforged line"}"#, 69, "invalid_client: no such client[31mforged line"),
        (400, #"{"error":"unsupported_grant_type"}"#, 69, "unsupported_grant_type"),
        (500, "oops", 69, "HTTP 500"),
        (302, "", 76, "redirect"),
        (200, "not json", 76, "JSON object"),
        (200, #"["array"]"#, 76, "JSON object"),
        (200, #"{"token_type":"Bearer"}"#, 76, "without an access token"),
        (200, #"{"access_token":"","token_type":"Bearer"}"#, 76, "without an access token"),
        (200, #"{"access_token":"a","token_type":"mac"}"#, 76, "token type 'mac'"),
        (200, #"{"access_token":"a"}"#, 76, "token type"),
        (200, #"{"access_token":"a","token_type":"Bearer","expires_in":-5}"#, 76, "expires_in"),
        (200, #"{"access_token":"a","token_type":"Bearer","expires_in":"300"}"#, 76, "JSON object"),
        (200, #"{"access_token":"a","token_type":"Bearer","expires_in":true}"#, 76, "JSON object"),
        (200, #"{"access_token":"a\nb","token_type":"Bearer"}"#, 76, "visible ASCII"),
        (200, #"{"access_token":"a b","token_type":"Bearer"}"#, 76, "visible ASCII"),
        (200, #"{"access_token":"ok","token_type":"Bearer","refresh_token":"r\r\nX-Evil: 1"}"#, 76, "visible ASCII"),
    ])
    func oauth2Failures(_ status: Int, _ body: String, _ code: Int32, _ text: String) async throws {
        let transport = ScriptedTransport(status, body)
        do {
            _ = try await client(.oauth2, transport).signIn(account: alice, password: try Password("pw"), register: false)
            Issue.record("no error")
        } catch let error as AuthError {
            #expect(error.exitCode == code, "\(error.message)")
            #expect(error.message.contains(text), "\(error.message)")
            #expect(!error.message.contains("\n"))
            #expect(!error.message.contains("\u{1b}"))
        }
    }

    @Test("a discovery endpoint with a control character is refused without it in the message")
    func discoveryEndpointQuoted() async throws {
        let issuer = "https://id.example.com/realms/desk"
        let document = #"{"issuer":"\#(issuer)","token_endpoint":"https://id.example.c\u007fm/\u001b]0;x\u0007","jwks_uri":"\#(issuer)/certs"}"#
        let transport = ScriptedTransport(200, document)
        let exchange = TokenExchange(binding: ServerBinding(server: try ServerURL(validating: issuer), tokenProtocol: .oidc, clientID: "authctl"),
                                     transport: transport, timeout: 10, clock: { [now] in now })
        let discovered: Result<OpenIDProvider, AuthError>
        do {
            discovered = .success(try await Discovery(exchange: exchange).provider(at: try ServerURL(validating: issuer), deviceAuthorizationURL: nil))
        } catch {
            discovered = .failure(error)
        }
        guard case .failure(let error) = discovered else {
            Issue.record("no error")
            return
        }
        #expect(error.message.contains("'token_endpoint' is not usable"), "\(error.message)")
        #expect(!error.message.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(error.message.debugDescription)")
    }

    @Test("a long error description is cut to 200 characters")
    func longQuote() async throws {
        let transport = ScriptedTransport(400, #"{"error":"x","error_description":"\#(String(repeating: "d", count: 5000))"}"#)
        do {
            _ = try await client(.oauth2, transport).signIn(account: alice, password: try Password("pw"), register: false)
        } catch let error as AuthError {
            #expect(error.message.count < 400)
            #expect(error.message.contains(String(repeating: "d", count: 200) + "…"))
        }
    }

    @Test("an answer over 64 KiB is 76")
    func oversized() async throws {
        let transport = ScriptedTransport(200, String(repeating: " ", count: 64 * 1024 + 1))
        await #expect { try await client(.oauth2, transport).refresh(TokenSet(accessToken: "a", refreshToken: "r")) } throws: {
            ($0 as? AuthError)?.exitCode == 76
        }
    }

    @Test("--register is a usage error under oauth2")
    func oauth2Register() async throws {
        await #expect(throws: AuthError.self) {
            try await client(.oauth2, ScriptedTransport([])).signIn(account: alice, password: try Password("pw"), register: true)
        }
    }

    @Test("revocation: RFC 7009 form to the revoke URL")
    func revoke() async throws {
        let transport = ScriptedTransport(200, "")
        try await client(.oauth2, transport, clientID: "cli", revoke: "https://auth.example.org/revoke").revoke(TokenSet(accessToken: "a", refreshToken: "r t"))
        #expect(transport.requests.first?.url == "https://auth.example.org/revoke")
        #expect(transport.requests.first?.text == "token=r%20t&token_type_hint=refresh_token&client_id=cli")
        let none = ScriptedTransport([])
        try await client(.oauth2, none).revoke(TokenSet(accessToken: "a", refreshToken: "r"))
        #expect(none.requests.isEmpty)
    }

    @Test("json login and register: endpoints, JSON body, millisecond expiries by the server's clock")
    func jsonSignIn() async throws {
        let expire = (now / 1000 + 60_000 + 3 * 3_600_000)  // one minute, by a server clock three hours ahead
        let transport = ScriptedTransport([
            .success(HTTPResponse(status: 201, headers: ["date": "Wed, 18 Nov 2026 14:06:40 GMT"],
                                  body: Array(#"{"accessToken":"at","accessTokenExpire":\#(expire),"refreshToken":"rt","refreshTokenExpire":\#(expire + 3_600_000),"user":{"id":1}}"#.utf8))),
            .success(HTTPResponse(status: 409, body: Array(#"{"code":409,"message":"exists"}"#.utf8))),
        ])
        let json = try client(.json, transport)
        let grant = try await json.signIn(account: alice, password: try Password(#"a"b\c"#), register: false)
        #expect(transport.requests[0].url == "https://api.example.org/v1/login")
        #expect(transport.requests[0].text == #"{"login":"alice@example.org","password":"a\"b\\c"}"#)
        #expect(transport.requests[0].header("Content-Type") == "application/json")
        let times = grant.times()
        #expect(times.clockOffset == 3 * 3600 + 1)
        // One minute by the server's clock, less the half second the Date header cannot tell.
        #expect(times.accessExpiresAt == now + 59_500_000)
        #expect(times.accessLifetime == 59)
        await #expect { try await json.signIn(account: alice, password: try Password("pw"), register: true) } throws: {
            ($0 as? AuthError)?.exitCode == 65
        }
        #expect(transport.requests[1].url == "https://api.example.org/v1/register")
    }

    @Test("json refresh: the refresh token in the Authorization header, empty body")
    func jsonRefresh() async throws {
        let transport = ScriptedTransport(200, #"{"accessToken":"a2"}"#)
        let grant = try await client(.json, transport).refresh(TokenSet(accessToken: "a", refreshToken: "r1"))
        #expect(transport.requests[0].url == "https://api.example.org/v1/refresh_tokens")
        #expect(transport.requests[0].header("Authorization") == "Bearer r1")
        #expect(transport.requests[0].body.isEmpty)
        #expect(grant.tokens.refreshToken == "r1")
    }

    @Test("json failures", arguments: [
        (401, "", 77), (403, "{}", 77), (500, #"{"code":"E1","message":"down"}"#, 69), (404, "<html>", 69), (200, "{}", 76), (301, "", 76),
    ])
    func jsonFailures(_ status: Int, _ body: String, _ code: Int32) async throws {
        await #expect {
            try await client(.json, ScriptedTransport(status, body)).signIn(account: alice, password: try Password("pw"), register: false)
        } throws: { ($0 as? AuthError)?.exitCode == code }
    }

    @Test("a JWT's exp is the fallback expiry; its signature is not checked; junk is ignored")
    func jwtExpiry() {
        func jwt(_ payload: String) -> String {
            let encoded = Data(payload.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            return "eyJhbGciOiJub25lIn0.\(encoded).sig"
        }
        #expect(JWT.expiry(of: jwt(#"{"exp":1795000060}"#)) == 1_795_000_060_000_000)
        #expect(JWT.expiry(of: jwt(#"{"exp":"1795000060"}"#)) == nil)
        #expect(JWT.expiry(of: jwt(#"{"exp":true}"#)) == nil)
        #expect(JWT.expiry(of: jwt(#"{"exp":1e300}"#)) == nil)
        #expect(JWT.expiry(of: "opaque-token") == nil)
        #expect(JWT.expiry(of: "a.%%%.c") == nil)
        let grant = TokenGrant(tokens: TokenSet(accessToken: jwt(#"{"exp":1795000060}"#)), serverDate: now + 10_800_000_000, arrivedAt: now)
        // exp is by the server's clock, here exactly three hours ahead.
        #expect(grant.times().accessExpiresAt == 1_795_000_060_000_000 - 10_800_000_000)
    }

    @Test("hostile expiries saturate instead of trapping")
    func hostileExpiries() {
        let grant = TokenGrant(tokens: TokenSet(accessToken: "a", refreshToken: "r"), accessExpiry: .after(seconds: .max),
                               refreshExpiry: .at(serverMicroseconds: .max), serverDate: 1, arrivedAt: now)
        let times = grant.times()
        // Clamped to the longest span the settings keep, so the file stays readable.
        let span = TokenTimes.maximumSpan * 1_000_000
        #expect(times.accessExpiresAt == now + span)
        #expect(times.refreshExpiresAt == now + span)
        #expect(times.accessLifetime == TokenTimes.maximumSpan)
        #expect(times.clockOffset == 0)
    }

    @Test("Date headers: IMF-fixdate only, the middle of the second")
    func dates() {
        #expect(HTTPDate.microseconds(imfFixdate: "Wed, 18 Nov 2026 11:06:40 GMT") == now + 500_000)
        #expect(HTTPDate.microseconds(imfFixdate: "Wednesday, 18-Nov-26 11:06:40 GMT") == nil)
        #expect(HTTPDate.microseconds(imfFixdate: "Wed, 31 Feb 2026 11:06:40 GMT") == nil)
        #expect(HTTPDate.microseconds(imfFixdate: "") == nil)
    }
}
