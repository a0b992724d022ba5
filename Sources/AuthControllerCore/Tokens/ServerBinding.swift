// SPDX-License-Identifier: Apache-2.0
/// The token server a service is bound to, as kept in the service's settings
/// group (`server`, `protocol`, `client-id`, `scope`, `revoke-url`, and for an OpenID Connect
/// provider the keys of ``OpenIDOptions``). It outlives sign-out.
///
/// Two bindings are equal when they name the same server the same way: what discovery found
/// at an OpenID provider (``OpenIDOptions/provider``) is left out, since it is looked up again
/// at every sign-in.
public struct ServerBinding: Equatable, Sendable {
    /// How authctl talks to the server.
    public enum TokenProtocol: String, Sendable, CaseIterable {
        /// RFC 6749 password and refresh-token grants at a token endpoint.
        case oauth2
        /// A plain JSON API with `login`, `register` and `refresh_tokens` endpoints.
        case json
        /// An OpenID Connect provider, found by discovery from its issuer URL; accounts sign in
        /// in the browser or with a code on another device, never with a password.
        case oidc
    }

    /// The token server: for `oauth2` the token endpoint itself, for `json` the URL that
    /// `login`, `register` and `refresh_tokens` are appended to, for `oidc` the issuer.
    public var server: ServerURL
    /// How authctl talks to the server.
    public var tokenProtocol: TokenProtocol
    /// The OAuth `client_id` sent with each `oauth2` grant and revocation; `nil` to send none.
    public var clientID: String?
    /// The OAuth `scope` sent with each `oauth2` grant (words separated by single spaces);
    /// `nil` to send none.
    public var scope: String?
    /// Where refresh tokens are revoked at sign-out (RFC 7009); `nil` for none (for `oidc`: the
    /// revocation endpoint discovery found).
    public var revokeURL: ServerURL?
    /// What an `oidc` binding adds; `nil` for the other protocols.
    public var openID: OpenIDOptions?

    /// A binding of already validated parts: ``ServerURL/init(validating:role:)`` checks a URL a
    /// person typed.
    public init(server: ServerURL, tokenProtocol: TokenProtocol = .oauth2, clientID: String? = nil, scope: String? = nil,
                revokeURL: ServerURL? = nil, openID: OpenIDOptions? = nil) {
        self.server = server
        self.tokenProtocol = tokenProtocol
        self.clientID = clientID
        self.scope = scope
        self.revokeURL = revokeURL
        self.openID = tokenProtocol == .oidc ? openID ?? OpenIDOptions() : nil
    }

    /// Equal when every part a user gives is; what discovery found is not compared.
    public static func == (lhs: ServerBinding, rhs: ServerBinding) -> Bool {
        lhs.server == rhs.server && lhs.tokenProtocol == rhs.tokenProtocol && lhs.clientID == rhs.clientID
            && lhs.scope == rhs.scope && lhs.revokeURL == rhs.revokeURL
            && lhs.openID?.accountClaim == rhs.openID?.accountClaim
            && lhs.openID?.deviceAuthorizationURL == rhs.openID?.deviceAuthorizationURL
            && lhs.openID?.redirectPort == rhs.openID?.redirectPort
    }

    /// Where refresh tokens are revoked: the revoke URL given, else (for `oidc`) the provider's
    /// revocation endpoint.
    var revocationURL: ServerURL? {
        revokeURL ?? openID?.provider?.revocationEndpoint
    }

    /// Checks every part as typed on the command line; a broken rule is ``AuthError/invalidInput(_:)-enum.case``,
    /// an `oidc` binding without a client id, or OpenID options on another protocol,
    /// ``AuthError/usage(_:)-enum.case``. An `oidc` scope gets `openid` in front when it lacks it,
    /// and is `openid profile email` when none is given.
    package init(validatingServer server: String, protocol tokenProtocol: String?, clientID: String?, scope: String?,
                revokeURL: String?, accountClaim: String? = nil, deviceAuthorizationURL: String? = nil,
                redirectPort: String? = nil) throws(AuthError) {
        let parsedProtocol: TokenProtocol
        if let tokenProtocol {
            guard let known = TokenProtocol(rawValue: tokenProtocol) else {
                throw .invalidInput("invalid protocol '\(tokenProtocol.peerText(limit: 40))': use oauth2, json or oidc")
            }
            parsedProtocol = known
        } else {
            parsedProtocol = .oauth2
        }
        var openID: OpenIDOptions?
        var scope = scope
        if parsedProtocol == .oidc {
            guard clientID != nil else {
                throw .usage("an OpenID Connect provider needs the client id it registered for authctl (\(hint: .clientID))")
            }
            openID = try OpenIDOptions(validatingAccountClaim: accountClaim, deviceAuthorizationURL: deviceAuthorizationURL,
                                       redirectPort: redirectPort)
            let words = (scope ?? "openid profile email").split(separator: " ", omittingEmptySubsequences: false)
            scope = words.contains("openid") ? scope ?? "openid profile email" : "openid " + scope!
        } else if accountClaim != nil || deviceAuthorizationURL != nil || redirectPort != nil {
            throw .usage("\(hint: .openIDOptions) are for OpenID Connect providers (protocol oidc)")
        }
        self.init(server: try ServerURL(validating: server, role: parsedProtocol == .oidc ? "issuer URL" : "server URL"),
                  tokenProtocol: parsedProtocol,
                  clientID: try clientID.map { (text) throws(AuthError) in try Self.validate(text, as: "client id", spaces: false) },
                  scope: try scope.map { (text) throws(AuthError) in try Self.validate(text, as: "scope", spaces: true) },
                  revokeURL: try revokeURL.map { (text) throws(AuthError) in try ServerURL(validating: text, role: "revoke URL") },
                  openID: openID)
    }

    /// 1–255 bytes of printable ASCII; no spaces, except (with `spaces`) single spaces between
    /// words, as in an OAuth scope list.
    package static func validate(_ text: String, as role: String, spaces: Bool) throws(AuthError) -> String {
        let bytes = Array(text.utf8)
        guard (1...255).contains(bytes.count) else { throw .invalidInput("invalid \(role): it must be 1 to 255 bytes long") }
        guard bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw .invalidInput("invalid \(role): use printable ASCII only")
        }
        if bytes.contains(0x20) {
            let words = text.split(separator: " ", omittingEmptySubsequences: false)
            guard spaces, !words.contains(where: \.isEmpty) else {
                throw .invalidInput(spaces ? "invalid \(role): spaces may only separate words, one at a time"
                                           : "invalid \(role): it must not contain spaces")
            }
        }
        return text
    }
}

/// What authctl knows about a signed-in account's tokens without reading a secret:
/// kept in the settings group so that `status` never touches the keyring's secrets or the server.
package struct TokenTimes: Equatable, Sendable {
    /// The longest span authctl keeps (ten years, in seconds): a lifetime, how far ahead an
    /// expiry lies, or a server's clock offset. Whatever a server says is clamped to it when the
    /// answer arrives, and the settings file refuses anything beyond it, so an answer can never
    /// write a file that authctl would then call corrupt.
    package static let maximumSpan: UInt64 = 10 * 365 * 86_400

    /// When the access token expires, µs since the epoch by the local clock; `nil` when unknown.
    package var accessExpiresAt: UInt64?
    /// When the refresh token expires, likewise; `nil` when unknown.
    package var refreshExpiresAt: UInt64?
    /// The server's clock minus the local one, in whole seconds.
    package var clockOffset: Int64
    /// The access token's lifetime as the server granted it, in seconds; `nil` when unknown.
    package var accessLifetime: UInt64?
    /// Whether the server issued a refresh token. Without one (RFC 6749 allows it) the access
    /// token is never refreshed: it is used as long as it lives, and the session ends with it.
    package var renewable: Bool

    /// Lifetimes with every field given; the defaults say nothing is known.
    package init(accessExpiresAt: UInt64? = nil, refreshExpiresAt: UInt64? = nil, clockOffset: Int64 = 0,
                accessLifetime: UInt64? = nil, renewable: Bool = true) {
        self.accessExpiresAt = accessExpiresAt
        self.refreshExpiresAt = refreshExpiresAt
        self.clockOffset = clockOffset
        self.accessLifetime = accessLifetime
        self.renewable = renewable
    }

    /// When the session ends by itself, µs since the epoch by the local clock: when the refresh
    /// token expires, or, when the server issued none, when the access token does; `nil` when
    /// unknown.
    package var sessionEndsAt: UInt64? {
        renewable ? refreshExpiresAt : accessExpiresAt
    }
}
