// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The requests of an OpenID Connect sign-in at one provider: the authorization URL of the
/// browser flow and its code exchange (RFC 6749 §4.1 with PKCE), the device flow (RFC 8628), the
/// signing keys and userinfo, and who signed in (OpenID Connect Core §3.1.3.7).
struct OpenIDClient: Sendable {
    let binding: ServerBinding
    let provider: OpenIDProvider
    let exchange: TokenExchange
    private static let form = "application/x-www-form-urlencoded"

    init(binding: ServerBinding, provider: OpenIDProvider, transport: any HTTPTransport, timeout: Double,
         clock: @escaping @Sendable () -> UInt64) {
        self.binding = binding
        self.provider = provider
        exchange = TokenExchange(binding: binding, transport: transport, timeout: timeout, clock: clock)
    }

    private var clientID: String { binding.clientID ?? "" }
    private var scope: String { binding.scope ?? "openid" }

    // MARK: - The browser flow

    /// The URL that starts the browser flow.
    func authorizationURL(_ endpoint: ServerURL, redirectURI: String, proof: SignInProof, loginHint: AccountID?) -> String {
        var query = FormBody()
        query.add("response_type", "code")
        query.add("client_id", clientID)
        query.add("redirect_uri", redirectURI)
        query.add("scope", scope)
        query.add("state", proof.state)
        query.add("nonce", proof.nonce)
        query.add("code_challenge", proof.codeChallenge)
        query.add("code_challenge_method", "S256")
        if let loginHint { query.add("login_hint", loginHint.rawValue) }
        let separator = endpoint.rawValue.contains("?") ? "&" : "?"
        return endpoint.rawValue + separator + String(decoding: query.bytes, as: UTF8.self)
    }

    /// Exchanges the code the browser brought back for tokens.
    func exchange(code: String, redirectURI: String, proof: SignInProof) async throws(AuthError) -> TokenGrant {
        var body = FormBody()
        body.add("grant_type", "authorization_code")
        body.add("code", code)
        body.add("redirect_uri", redirectURI)
        body.add("client_id", clientID)
        body.add("code_verifier", proof.codeVerifier)
        let (response, arrivedAt, serverDate) = try await exchange.post(provider.tokenEndpoint.rawValue, contentType: Self.form, body: body.bytes)
        return try OAuth2TokenClient.grant(from: response, arrivedAt: arrivedAt, serverDate: serverDate, server: provider.tokenEndpoint,
                                           refusal: "the OpenID provider \(binding.server) did not accept the sign-in's code",
                                           keepingIDToken: true)
    }

    // MARK: - The device flow

    /// What the device authorization endpoint answered (RFC 8628 §3.2).
    struct DeviceAuthorization: Sendable {
        var deviceCode: String
        var code: DeviceCode
        var expiresIn: UInt64
        var interval: UInt64
    }

    /// Starts the device flow.
    func authorizeDevice(at endpoint: ServerURL) async throws(AuthError) -> DeviceAuthorization {
        var body = FormBody()
        body.add("client_id", clientID)
        body.add("scope", scope)
        let (response, _, _) = try await exchange.post(endpoint.rawValue, contentType: Self.form, body: body.bytes)
        struct Answer: Decodable {
            var device_code: String?
            var user_code: String?
            var verification_uri: String?
            var verification_uri_complete: String?
            var expires_in: Double?
            var interval: Double?
            var error: String?
            var error_description: String?
        }
        let answer = TokenExchange.decode(Answer.self, response.body)
        guard response.status == 200 else { throw refusal(response.status, answer?.error, answer?.error_description, at: endpoint) }
        func refuse(_ problem: String) -> AuthError {
            .protocolError("the OpenID provider \(binding.server) answered the device authorization request \(problem)")
        }
        guard let answer else { throw refuse("with something other than a JSON object of RFC 8628's fields") }
        guard let deviceCode = answer.device_code, !deviceCode.isEmpty, deviceCode.utf8.count <= 4096 else { throw refuse("without a device_code") }
        // Shown whole, not cut short as diagnostics are: the person types it.
        guard let userCode = answer.user_code.map({ $0.peerText() }), !userCode.isEmpty else { throw refuse("without a user_code") }
        guard userCode.utf8.count <= 1024 else { throw refuse("with a user_code over 1 KiB, which nobody could type") }
        guard let verification = answer.verification_uri.flatMap(Self.webURL) else { throw refuse("without an http or https verification_uri") }
        guard let expiresIn = answer.expires_in, expiresIn.isFinite, expiresIn > 0 else { throw refuse("without a positive expires_in") }
        let interval = answer.interval ?? 5
        guard interval.isFinite, interval >= 0 else { throw refuse("with an interval that is not a non-negative number") }
        // At least a second between polls, whatever the provider says; never sooner than it asks.
        return DeviceAuthorization(
            deviceCode: deviceCode,
            code: DeviceCode(verificationURI: verification, userCode: userCode,
                             verificationURIComplete: answer.verification_uri_complete.flatMap(Self.webURL)),
            expiresIn: TokenExchange.seconds(expiresIn), interval: max(1, min(TokenExchange.seconds(interval), 86_400)))
    }

    /// What one poll of the token endpoint found.
    enum Poll: Sendable {
        case tokens(TokenGrant)
        case pending
        case slowDown
        /// The poll got no answer (refused, reset, deadline, 5xx): try again later.
        case noAnswer
    }

    /// Asks once whether the person has approved the device code, waiting for the answer at
    /// most `seconds` (and never longer than the server deadline): a slow answer must not hold
    /// the sign-in past the time the person was given.
    func poll(_ authorization: DeviceAuthorization, within seconds: Double) async throws(AuthError) -> Poll {
        var body = FormBody()
        body.add("grant_type", "urn:ietf:params:oauth:grant-type:device_code")
        body.add("device_code", authorization.deviceCode)
        body.add("client_id", clientID)
        let exchange = TokenExchange(binding: exchange.binding, transport: exchange.transport,
                                     timeout: min(exchange.timeout, seconds), clock: exchange.clock)
        let sent: (HTTPResponse, arrivedAt: UInt64, serverDate: UInt64?)
        do {
            sent = try await exchange.post(provider.tokenEndpoint.rawValue, contentType: Self.form, body: body.bytes)
        } catch {
            switch error {
            case .unavailable, .temporaryFailure: return .noAnswer
            default: throw error
            }
        }
        let (response, arrivedAt, serverDate) = sent
        if response.status >= 500 { return .noAnswer }
        if response.status != 200 {
            struct Answer: Decodable { var error: String?; var error_description: String? }
            let answer = TokenExchange.decode(Answer.self, response.body)
            switch answer?.error {
            case "authorization_pending": return .pending
            case "slow_down": return .slowDown
            case "access_denied": throw .denied("the sign-in was refused at the provider")
            case "expired_token": throw .temporaryFailure("the device code expired before the sign-in was approved; \(hint: .signInAgain)")
            default: throw refusal(response.status, answer?.error, answer?.error_description, at: provider.tokenEndpoint)
            }
        }
        return .tokens(try OAuth2TokenClient.grant(from: response, arrivedAt: arrivedAt, serverDate: serverDate,
                                                   server: provider.tokenEndpoint, refusal: "the OpenID provider \(binding.server) did not accept the device code",
                                                   keepingIDToken: true))
    }

    // MARK: - Who signed in

    /// The person the tokens of `grant` belong to, from the verified ID token (its `nonce`
    /// must be `nonce` when one is given) and, when it lacks what is needed, userinfo.
    func identify(_ grant: TokenGrant, nonce: String?) async throws(AuthError) -> SignedInIdentity {
        var claims: Claims?
        if let idToken = grant.tokens.idToken {
            claims = try await verified(idToken, nonce: nonce, clockOffset: grant.clockOffset)
        }
        let wanted = binding.openID?.accountClaim ?? "email"
        if claims?.has(wanted) != true {
            if let endpoint = provider.userinfoEndpoint {
                let userinfo = try await self.userinfo(at: endpoint, accessToken: grant.tokens.accessToken)
                if let subject = claims?.subject, userinfo.subject != subject {
                    throw .protocolError("the OpenID provider \(binding.server) answered userinfo for another subject than the ID token's")
                }
                claims = claims?.filling(from: userinfo) ?? userinfo
            } else if claims == nil {
                throw .protocolError("the OpenID provider \(binding.server) issued no ID token and has no userinfo endpoint: authctl cannot tell who signed in")
            }
        }
        guard let claims, let subject = claims.subject, !subject.isEmpty else {
            throw .protocolError("the OpenID provider \(binding.server) did not say who signed in (no 'sub' claim)")
        }
        let accountText: String?
        if let claim = binding.openID?.accountClaim {
            accountText = claims.string(claim)
            guard accountText != nil else {
                throw .protocolError("the OpenID provider \(binding.server) gave no string claim '\(claim)' to use as the account id")
            }
        } else {
            accountText = claims.verifiedEmail ?? claims.string("preferred_username") ?? subject
        }
        guard let accountText, let account = try? AccountID(validating: accountText) else {
            throw .protocolError("the OpenID provider \(binding.server) signed in '\(TokenExchange.quote(accountText ?? ""))', which is not a valid account id")
        }
        let email = claims.verifiedEmail.flatMap { (try? DisplayName.validate($0)).flatMap { $0.isEmpty ? nil : $0 } }
        let name = claims.string("name").flatMap { try? DisplayName.validate($0) }.flatMap { $0.isEmpty ? nil : $0 }
        return SignedInIdentity(account: account, subject: subject, email: email, name: name)
    }

    /// The claims of `idToken` once its signature and claims check out — and, for a refresh,
    /// once its `iss`, `aud` and `sub` are those of `stored`'s. The signing keys are fetched for
    /// each verification (a sign-in, a verify or a refresh is seldom enough), and once more when
    /// the token names a key they lack: the provider may have rotated its keys.
    func verified(_ idToken: String, nonce: String?, clockOffset: Int64, refreshing stored: String? = nil) async throws(AuthError) -> Claims {
        var keys = try await signingKeys()
        if let keyID = IDToken.keyID(of: idToken), !keys.hasKey(id: keyID) { keys = try await signingKeys() }
        // As for token times: a server clock more than the longest span away is ignored.
        let offset = clockOffset.magnitude <= TokenTimes.maximumSpan * 1_000_000 ? clockOffset : 0
        let serverNow = exchange.clock().subtractingClamped(-offset)
        if let stored {
            _ = try IDToken.verifyRefreshed(idToken, stored: try IDToken.storedClaims(of: stored), keys: keys, issuer: provider.issuer,
                                            clientID: clientID, serverNow: serverNow)
        } else {
            _ = try IDToken.verify(idToken, keys: keys, issuer: provider.issuer, clientID: clientID, nonce: nonce, serverNow: serverNow)
        }
        guard let claims = Claims(payloadOf: idToken) else {
            throw .protocolError("the OpenID provider \(binding.server) issued an ID token whose claims are not a JSON object")
        }
        return claims
    }

    /// The provider's JSON Web Key Set.
    func signingKeys() async throws(AuthError) -> JSONWebKeySet {
        let (response, _, _) = try await exchange.get(provider.jwksURI.rawValue)
        guard response.status == 200 else {
            if response.status >= 500 { throw .unavailable("the OpenID provider \(binding.server) failed to give its signing keys (HTTP \(response.status)); try again later") }
            throw .protocolError("the OpenID provider \(binding.server) did not give its signing keys at \(provider.jwksURI) (HTTP \(response.status))")
        }
        return try JSONWebKeySet(json: response.body)
    }

    /// The userinfo answer for `accessToken`.
    func userinfo(at endpoint: ServerURL, accessToken: String) async throws(AuthError) -> Claims {
        let (response, _, _) = try await exchange.get(endpoint.rawValue, authorization: "Bearer " + accessToken)
        guard response.status == 200 else {
            if response.status >= 500 { throw .unavailable("the OpenID provider \(binding.server) failed to answer userinfo (HTTP \(response.status)); try again later") }
            throw .protocolError("the OpenID provider \(binding.server) refused userinfo (HTTP \(response.status))")
        }
        guard let claims = Claims(json: response.body) else {
            throw .protocolError("the OpenID provider \(binding.server) answered userinfo with something other than a JSON object")
        }
        return claims
    }

    // MARK: - Helpers

    private func refusal(_ status: Int, _ error: String?, _ description: String?, at endpoint: ServerURL) -> AuthError {
        if let error {
            let detail = description.map { ": " + TokenExchange.quote($0) } ?? ""
            return .unavailable("the OpenID provider \(binding.server) refused the request (HTTP \(status), \(TokenExchange.quote(error))\(detail))")
        }
        return .unavailable("the OpenID provider \(binding.server) failed at \(endpoint) (HTTP \(status)); try again later")
    }

    /// An `http` or `https` URL as the provider gave it, fit to show (no spaces or controls).
    static func webURL(_ text: String) -> String? {
        let lower = text.lowercased()
        guard lower.hasPrefix("https://") || lower.hasPrefix("http://"), text.utf8.count <= 2048,
              text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        return text
    }
}

/// The secrets of one browser sign-in: `state` and `nonce` (128 random bits each) and a PKCE
/// code verifier (256 random bits) with its S256 challenge (RFC 7636).
struct SignInProof: Sendable {
    let state: String
    let nonce: String
    let codeVerifier: String
    let codeChallenge: String

    init() {
        state = Self.random(bytes: 16)
        nonce = Self.random(bytes: 16)
        codeVerifier = Self.random(bytes: 32)
        codeChallenge = Base64URL.encode(GLibText.sha256(Array(codeVerifier.utf8)))
    }

    /// `bytes` bytes from the system's generator (getrandom), base64url without padding.
    static func random(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }
}

/// Who an OpenID sign-in signed in.
struct SignedInIdentity: Sendable {
    var account: AccountID
    var subject: String
    var email: String?
    var name: String?
}

/// What the person is shown in the device flow: where to go and the code to enter there.
public struct DeviceCode: Sendable, Equatable {
    /// The page where the code is entered.
    public var verificationURI: String
    /// The code to enter, control characters removed.
    public var userCode: String
    /// A page that needs no code typed, when the provider gave one.
    public var verificationURIComplete: String?

    /// A code to show.
    public init(verificationURI: String, userCode: String, verificationURIComplete: String? = nil) {
        self.verificationURI = verificationURI
        self.userCode = userCode
        self.verificationURIComplete = verificationURIComplete
    }
}
