// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// OpenID Connect Discovery 1.0: the provider's endpoints, read from
/// `ISSUER/.well-known/openid-configuration` and checked field by field before anything uses them.
struct Discovery {
    let exchange: TokenExchange

    /// The members authctl reads; one of the wrong type is named in the refusal.
    private struct Document: Decodable {
        var issuer: String?
        var authorization_endpoint: String?
        var token_endpoint: String?
        var device_authorization_endpoint: String?
        var userinfo_endpoint: String?
        var revocation_endpoint: String?
        var jwks_uri: String?
        var authorization_response_iss_parameter_supported: Bool?
        /// The first member read whose value is of the wrong type (null counts as absent).
        var mistyped: String?

        private enum CodingKeys: String, CodingKey {
            case issuer, authorization_endpoint, token_endpoint, device_authorization_endpoint, userinfo_endpoint
            case revocation_endpoint, jwks_uri, authorization_response_iss_parameter_supported
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            var mistyped: String?
            func value<Value: Decodable>(_ key: CodingKeys, _ type: Value.Type) -> Value? {
                guard container.contains(key), (try? container.decodeNil(forKey: key)) == false else { return nil }
                if let value = try? container.decode(type, forKey: key) { return value }
                if mistyped == nil { mistyped = key.rawValue }
                return nil
            }
            issuer = value(.issuer, String.self)
            authorization_endpoint = value(.authorization_endpoint, String.self)
            token_endpoint = value(.token_endpoint, String.self)
            device_authorization_endpoint = value(.device_authorization_endpoint, String.self)
            userinfo_endpoint = value(.userinfo_endpoint, String.self)
            revocation_endpoint = value(.revocation_endpoint, String.self)
            jwks_uri = value(.jwks_uri, String.self)
            authorization_response_iss_parameter_supported = value(.authorization_response_iss_parameter_supported, Bool.self)
            self.mistyped = mistyped
        }
    }

    /// The provider at `issuer`. A 4xx or a document that breaks a rule is
    /// ``AuthError/protocolError(_:)-enum.case`` naming the field; a 5xx or no answer
    /// ``AuthError/unavailable(_:detail:)-enum.case``; the deadline
    /// ``AuthError/temporaryFailure(_:detail:)-enum.case``.
    func provider(at issuer: ServerURL, deviceAuthorizationURL: ServerURL?) async throws(AuthError) -> OpenIDProvider {
        let base = issuer.rawValue.hasSuffix("/") ? String(issuer.rawValue.dropLast()) : issuer.rawValue
        let url = base + "/.well-known/openid-configuration"
        let (response, _, _) = try await exchange.get(url)
        switch response.status {
        case 200: break
        case 400..<500: throw .protocolError("no OpenID provider at \(issuer): \(url) answered HTTP \(response.status); check the issuer URL")
        default: throw .unavailable("the OpenID provider \(issuer) failed (HTTP \(response.status)); try again later")
        }
        guard let document = TokenExchange.decode(Document.self, response.body) else {
            throw .protocolError("the OpenID provider \(issuer) answered its discovery request with something other than a JSON object of the OpenID Connect Discovery fields")
        }
        func refuse(_ field: String, _ problem: String) -> AuthError {
            .protocolError("the OpenID provider \(issuer) has a discovery document whose '\(field)' \(problem)")
        }
        if let field = document.mistyped {
            throw refuse(field, field == "authorization_response_iss_parameter_supported" ? "is not true or false" : "is not a string")
        }
        guard let spelledIssuer = document.issuer else { throw refuse("issuer", "is missing") }
        guard Self.sameIssuer(spelledIssuer, issuer) else {
            throw refuse("issuer", "is '\(TokenExchange.quote(spelledIssuer))', not \(issuer)")
        }
        func endpoint(_ field: String, _ value: String?) throws(AuthError) -> ServerURL? {
            guard let value else { return nil }
            do {
                return try ServerURL(validating: value, role: field)
            } catch {
                // The refusal repeats the URL, which is the provider's text: quoted, as every
                // provider answer is, or a control character in it would reach the terminal.
                throw refuse(field, "is not usable: \(error.message.peerText())")
            }
        }
        guard let tokenEndpoint = try endpoint("token_endpoint", document.token_endpoint) else { throw refuse("token_endpoint", "is missing") }
        guard let jwksURI = try endpoint("jwks_uri", document.jwks_uri) else { throw refuse("jwks_uri", "is missing") }
        let authorization = try endpoint("authorization_endpoint", document.authorization_endpoint)
        let device = try endpoint("device_authorization_endpoint", document.device_authorization_endpoint)
        guard authorization != nil || device != nil || deviceAuthorizationURL != nil else {
            throw refuse("authorization_endpoint", "is missing, and so is a device authorization endpoint: there is no way to sign in")
        }
        return OpenIDProvider(
            issuer: spelledIssuer, tokenEndpoint: tokenEndpoint, authorizationEndpoint: authorization,
            deviceAuthorizationEndpoint: device,
            userinfoEndpoint: try endpoint("userinfo_endpoint", document.userinfo_endpoint),
            revocationEndpoint: try endpoint("revocation_endpoint", document.revocation_endpoint),
            jwksURI: jwksURI,
            announcesIssuerInResponses: document.authorization_response_iss_parameter_supported == true)
    }

    /// Whether the document's `issuer` names the issuer bound: both normalised, and a trailing
    /// `/` after a non-empty path not counted.
    static func sameIssuer(_ spelled: String, _ issuer: ServerURL) -> Bool {
        guard let normalised = try? ServerURL(validating: spelled) else { return false }
        func trimmed(_ url: ServerURL) -> String {
            url.rawValue.hasSuffix("/") ? String(url.rawValue.dropLast()) : url.rawValue
        }
        return trimmed(normalised) == trimmed(issuer)
    }
}
