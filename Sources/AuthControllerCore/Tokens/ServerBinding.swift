/// The token server a service is bound to, as kept in the service's settings
/// group (`server`, `protocol`, `client-id`, `scope`, `revoke-url`). It outlives sign-out.
public struct ServerBinding: Equatable, Sendable {
    /// How authctl talks to the server.
    public enum TokenProtocol: String, Sendable, CaseIterable {
        /// RFC 6749 password and refresh-token grants at a token endpoint.
        case oauth2
        /// A plain JSON API with `login`, `register` and `refresh_tokens` endpoints.
        case json
    }

    /// The token server: for `oauth2` the token endpoint itself, for `json` the URL that
    /// `login`, `register` and `refresh_tokens` are appended to.
    public var server: ServerURL
    /// How authctl talks to the server.
    public var tokenProtocol: TokenProtocol
    /// The OAuth `client_id` sent with each `oauth2` grant and revocation; `nil` to send none.
    public var clientID: String?
    /// The OAuth `scope` sent with each `oauth2` grant (words separated by single spaces);
    /// `nil` to send none.
    public var scope: String?
    /// Where refresh tokens are revoked at sign-out (RFC 7009); `nil` for none.
    public var revokeURL: ServerURL?

    /// A binding of already validated parts; ``init(validatingServer:protocol:clientID:scope:revokeURL:)``
    /// checks text typed by a user.
    public init(server: ServerURL, tokenProtocol: TokenProtocol = .oauth2, clientID: String? = nil, scope: String? = nil,
                revokeURL: ServerURL? = nil) {
        self.server = server
        self.tokenProtocol = tokenProtocol
        self.clientID = clientID
        self.scope = scope
        self.revokeURL = revokeURL
    }

    /// Checks every part as typed on the command line; a broken rule is ``AuthError/invalidInput(_:)-enum.case``.
    public init(validatingServer server: String, protocol tokenProtocol: String?, clientID: String?, scope: String?,
                revokeURL: String?) throws(AuthError) {
        let parsedProtocol: TokenProtocol
        if let tokenProtocol {
            guard let known = TokenProtocol(rawValue: tokenProtocol) else {
                throw .invalidInput("invalid protocol '\(tokenProtocol)': use oauth2 or json")
            }
            parsedProtocol = known
        } else {
            parsedProtocol = .oauth2
        }
        self.init(server: try ServerURL(validating: server), tokenProtocol: parsedProtocol,
                  clientID: try clientID.map { (text) throws(AuthError) in try Self.validate(text, as: "client id", spaces: false) },
                  scope: try scope.map { (text) throws(AuthError) in try Self.validate(text, as: "scope", spaces: true) },
                  revokeURL: try revokeURL.map { (text) throws(AuthError) in try ServerURL(validating: text, role: "revoke URL") })
    }

    /// 1–255 bytes of printable ASCII; no spaces, except (with `spaces`) single spaces between
    /// words, as in an OAuth scope list.
    public static func validate(_ text: String, as role: String, spaces: Bool) throws(AuthError) -> String {
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
public struct TokenTimes: Equatable, Sendable {
    /// The longest span authctl keeps (ten years, in seconds): a lifetime, how far ahead an
    /// expiry lies, or a server's clock offset. Whatever a server says is clamped to it when the
    /// answer arrives, and the settings file refuses anything beyond it, so an answer can never
    /// write a file that authctl would then call corrupt.
    public static let maximumSpan: UInt64 = 10 * 365 * 86_400

    /// When the access token expires, µs since the epoch by the local clock; `nil` when unknown.
    public var accessExpiresAt: UInt64?
    /// When the refresh token expires, likewise; `nil` when unknown.
    public var refreshExpiresAt: UInt64?
    /// The server's clock minus the local one, in whole seconds.
    public var clockOffset: Int64
    /// The access token's lifetime as the server granted it, in seconds; `nil` when unknown.
    public var accessLifetime: UInt64?
    /// Whether the server issued a refresh token. Without one (RFC 6749 allows it) the access
    /// token is never refreshed: it is used as long as it lives, and the session ends with it.
    public var renewable: Bool

    /// Lifetimes with every field given; the defaults say nothing is known.
    public init(accessExpiresAt: UInt64? = nil, refreshExpiresAt: UInt64? = nil, clockOffset: Int64 = 0,
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
    public var sessionEndsAt: UInt64? {
        renewable ? refreshExpiresAt : accessExpiresAt
    }
}
