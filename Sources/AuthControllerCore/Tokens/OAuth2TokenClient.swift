// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// RFC 6749's password and refresh-token grants at a token endpoint, and RFC 7009's
/// revocation (protocol `oauth2`): what Keycloak, Authentik, Dex and most
/// identity servers offer.
struct OAuth2TokenClient: TokenClient {
    let exchange: TokenExchange
    /// Whether answers' `id_token` is kept (for an OpenID provider's refreshes).
    let keepingIDToken: Bool

    init(binding: ServerBinding, transport: any HTTPTransport, timeout: Double, clock: @escaping @Sendable () -> UInt64,
         keepingIDToken: Bool = false) {
        exchange = TokenExchange(binding: binding, transport: transport, timeout: timeout, clock: clock)
        self.keepingIDToken = keepingIDToken
    }

    private var binding: ServerBinding { exchange.binding }
    private static let form = "application/x-www-form-urlencoded"

    func signIn(account: AccountID, password: Password, register: Bool) async throws(AuthError) -> TokenGrant {
        guard !register else { throw .usage("\(hint: .registration) is for servers of protocol json; an oauth2 server has no registration") }
        var body = FormBody()
        body.add("grant_type", "password")
        body.add("username", account.rawValue)
        password.withBytes { body.add("password", bytes: $0) }
        addClient(to: &body)
        defer { body.wipe() }
        return try await grant(body, refusal: "wrong password for \(account) at \(binding.server)")
    }

    func refresh(_ tokens: TokenSet) async throws(AuthError) -> TokenGrant {
        guard let refreshToken = tokens.refreshToken else { throw Self.noRefreshToken(binding.server) }
        var body = FormBody()
        body.add("grant_type", "refresh_token")
        body.add("refresh_token", refreshToken)
        addClient(to: &body)
        var grant = try await grant(body, refusal: "the token server \(binding.server) no longer accepts the refresh token")
        // Without a new refresh token the old one stays (no rotation).
        if grant.tokens.refreshToken == nil { grant.tokens.refreshToken = refreshToken }
        return grant
    }

    func revoke(_ tokens: TokenSet) async throws(AuthError) {
        guard let revokeURL = binding.revocationURL, let refreshToken = tokens.refreshToken else { return }
        var body = FormBody()
        body.add("token", refreshToken)
        body.add("token_type_hint", "refresh_token")
        if let clientID = binding.clientID { body.add("client_id", clientID) }
        let (response, _, _) = try await exchange.post(revokeURL.rawValue, contentType: Self.form, body: body.bytes)
        // RFC 7009: 200 whether or not the token was valid.
        guard response.status == 200 else {
            throw .unavailable("the token server \(revokeURL) did not revoke the refresh token (HTTP \(response.status))")
        }
    }

    static func noRefreshToken(_ server: ServerURL) -> AuthError {
        .denied("the token server \(server) gave no refresh token, so the session cannot be renewed; sign in again")
    }

    private func addClient(to body: inout FormBody) {
        if let clientID = binding.clientID { body.add("client_id", clientID) }
        if let scope = binding.scope { body.add("scope", scope) }
    }

    /// RFC 6749 §5.1 and §5.2: the members authctl reads. A member of the wrong type makes the
    /// whole answer not understood.
    private struct Answer: Decodable {
        var access_token: String?
        var token_type: String?
        var expires_in: Double?
        var refresh_token: String?
        var refresh_expires_in: Double?
        var id_token: String?
        var error: String?
        var error_description: String?
    }

    private func grant(_ body: FormBody, refusal: AuthError.Message) async throws(AuthError) -> TokenGrant {
        let (response, arrivedAt, serverDate) = try await exchange.post(binding.server.rawValue, contentType: Self.form, body: body.bytes)
        return try Self.grant(from: response, arrivedAt: arrivedAt, serverDate: serverDate, server: binding.server, refusal: refusal,
                              keepingIDToken: keepingIDToken)
    }

    /// The tokens of an answer to a grant at `server`'s token endpoint (RFC 6749 §5.1, and an
    /// OpenID provider's `id_token` with `keepingIDToken`); an `invalid_grant` refusal is
    /// ``AuthError/denied(_:)-enum.case`` with `refusal`.
    static func grant(from response: HTTPResponse, arrivedAt: UInt64, serverDate: UInt64?, server: ServerURL, refusal: AuthError.Message,
                      keepingIDToken: Bool) throws(AuthError) -> TokenGrant {
        let answer = TokenExchange.decode(Answer.self, response.body)
        guard response.status == 200 else {
            if (response.status == 400 || response.status == 401) && answer?.error == "invalid_grant" { throw .denied("\(refusal); sign in again") }
            if let error = answer?.error {
                let description = answer?.error_description.map { ": " + TokenExchange.quote($0) } ?? ""
                throw .unavailable("the token server \(server) refused the request (HTTP \(response.status), \(TokenExchange.quote(error))\(description))")
            }
            throw .unavailable("the token server \(server) failed (HTTP \(response.status)); try again later")
        }
        guard let answer else {
            throw .protocolError("the token server \(server) answered with something other than the JSON object of a token answer")
        }
        guard let accessToken = try TokenExchange.token(answer.access_token, "access_token", server: server) else {
            throw .protocolError("the token server \(server) answered without an access token")
        }
        let tokenType = answer.token_type ?? ""
        guard tokenType.lowercased() == "bearer" else {
            throw .protocolError("the token server \(server) answered with token type '\(TokenExchange.quote(tokenType))'; authctl handles Bearer tokens only")
        }
        let refreshToken = try TokenExchange.token(answer.refresh_token, "refresh_token", server: server)
        let accessExpiry = try TokenExchange.nonNegative(answer.expires_in, "expires_in", server: server)
            .map { TokenGrant.Expiry.after(seconds: TokenExchange.seconds($0)) }
        let refreshExpiry = try TokenExchange.nonNegative(answer.refresh_expires_in, "refresh_expires_in", server: server)
            .map { TokenGrant.Expiry.after(seconds: TokenExchange.seconds($0)) }
        let idToken = keepingIDToken ? try TokenExchange.token(answer.id_token, "id_token", server: server) : nil
        return TokenGrant(tokens: TokenSet(accessToken: accessToken, refreshToken: refreshToken, tokenType: "Bearer", idToken: idToken),
                          accessExpiry: accessExpiry, refreshExpiry: refreshToken == nil ? nil : refreshExpiry,
                          serverDate: serverDate, arrivedAt: arrivedAt)
    }
}

/// An `application/x-www-form-urlencoded` body. Built from bytes rather than with Foundation's
/// percent-encoding of a `String`, so that the copy holding the password can be wiped.
struct FormBody {
    private(set) var bytes: [UInt8] = []

    mutating func add(_ name: String, _ value: String) {
        add(name, bytes: Array(value.utf8))
    }

    mutating func add(_ name: String, bytes value: some Sequence<UInt8>) {
        if !bytes.isEmpty { bytes.append(UInt8(ascii: "&")) }
        append(Array(name.utf8))
        bytes.append(UInt8(ascii: "="))
        append(value)
    }

    mutating func add(_ name: String, bytes value: UnsafeRawBufferPointer) {
        add(name, bytes: value.lazy.map { $0 })
    }

    /// Percent-encodes all but RFC 3986's unreserved characters.
    private mutating func append(_ value: some Sequence<UInt8>) {
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in value {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                bytes.append(byte)
            default:
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
    }

    mutating func wipe() {
        bytes.withUnsafeMutableBytes { Memory.wipe($0) }
    }
}
