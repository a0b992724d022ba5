// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// A plain JSON API as many app back ends have (protocol `json`): `login` and
/// `register` take `{"login", "password"}`; `refresh_tokens` takes the refresh token in the
/// `Authorization` header; answers carry expiries in milliseconds by the server's clock.
struct JSONAPITokenClient: TokenClient {
    let exchange: TokenExchange

    init(binding: ServerBinding, transport: any HTTPTransport, timeout: Double, clock: @escaping @Sendable () -> UInt64) {
        exchange = TokenExchange(binding: binding, transport: transport, timeout: timeout, clock: clock)
    }

    private var server: ServerURL { exchange.binding.server }

    func signIn(account: AccountID, password: Password, register: Bool) async throws(AuthError) -> TokenGrant {
        // JSON text built around the password's bytes, so that the one copy can be wiped.
        var body = Array(#"{"login":"#.utf8) + Self.jsonString(Array(account.rawValue.utf8)) + Array(#","password":"#.utf8)
        password.withBytes { body += Self.jsonString(Array($0)) }
        body += Array("}".utf8)
        defer { body.withUnsafeMutableBytes { Memory.wipe($0) } }
        let endpoint = register ? "register" : "login"
        let (response, arrivedAt, serverDate) = try await exchange.post(server.appending(endpoint: endpoint), contentType: "application/json",
                                                                       body: body)
        if register && response.status == 409 {
            throw .invalidInput("\(account) already has an account at \(server); \(hint: .signInWithoutRegistering)")
        }
        return try grant(response, arrivedAt: arrivedAt, serverDate: serverDate, refusal: "wrong password for \(account) at \(server)")
    }

    func refresh(_ tokens: TokenSet) async throws(AuthError) -> TokenGrant {
        guard let refreshToken = tokens.refreshToken else { throw OAuth2TokenClient.noRefreshToken(server) }
        let (response, arrivedAt, serverDate) = try await exchange.post(server.appending(endpoint: "refresh_tokens"), contentType: nil,
                                                                       authorization: "Bearer " + refreshToken, body: [])
        var grant = try grant(response, arrivedAt: arrivedAt, serverDate: serverDate,
                              refusal: "the token server \(server) no longer accepts the refresh token")
        if grant.tokens.refreshToken == nil { grant.tokens.refreshToken = refreshToken }
        return grant
    }

    /// The JSON protocol has no revocation endpoint.
    func revoke(_ tokens: TokenSet) async throws(AuthError) {}

    private func grant(_ response: HTTPResponse, arrivedAt: UInt64, serverDate: UInt64?,
                       refusal: String) throws(AuthError) -> TokenGrant {
        let answer = TokenExchange.decode(Answer.self, response.body)
        guard response.status == 200 || response.status == 201 else {
            if response.status == 401 || response.status == 403 { throw .denied(refusal + "; sign in again") }
            if let failure = TokenExchange.decode(Failure.self, response.body), let message = failure.message {
                throw .unavailable("the token server \(server) failed (HTTP \(response.status): \(TokenExchange.quote(message)))")
            }
            throw .unavailable("the token server \(server) failed (HTTP \(response.status)); try again later")
        }
        guard let answer else {
            throw .protocolError("the token server \(server) answered with something other than the JSON object of a token answer")
        }
        guard let accessToken = try TokenExchange.token(answer.accessToken, "accessToken", server: server) else {
            throw .protocolError("the token server \(server) answered without an access token")
        }
        let refreshToken = try TokenExchange.token(answer.refreshToken, "refreshToken", server: server)
        func expiry(_ milliseconds: Double?, _ key: String) throws(AuthError) -> TokenGrant.Expiry? {
            try TokenExchange.nonNegative(milliseconds, key, server: server).map { .at(serverMicroseconds: UInt64(min($0, 1e15)) * 1000) }
        }
        return TokenGrant(tokens: TokenSet(accessToken: accessToken, refreshToken: refreshToken),
                          accessExpiry: try expiry(answer.accessTokenExpire, "accessTokenExpire"),
                          refreshExpiry: refreshToken == nil ? nil : try expiry(answer.refreshTokenExpire, "refreshTokenExpire"),
                          serverDate: serverDate, arrivedAt: arrivedAt)
    }

    /// The members authctl reads; others are ignored.
    private struct Answer: Decodable {
        var accessToken: String?
        var accessTokenExpire: Double?
        var refreshToken: String?
        var refreshTokenExpire: Double?
    }

    /// `{"code", "message"}`: the code may be a number or a string.
    private struct Failure: Decodable {
        var message: String?
    }

    /// A JSON string literal of UTF-8 bytes (quotes, backslash and control characters escaped).
    static func jsonString(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        let hex = Array("0123456789abcdef".utf8)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), byte]
            case 0..<0x20: out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
        return out
    }
}
