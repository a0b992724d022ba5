// SPDX-License-Identifier: Apache-2.0
/// What a binding to an OpenID Connect provider adds to ``ServerBinding``: the options given
/// (settings keys `account-claim`, `device-authorization-url`, `redirect-port`) and what
/// discovery found (``provider``).
public struct OpenIDOptions: Equatable, Sendable {
    /// The ID-token claim that becomes the account id; `nil` for the first of `email` (when
    /// verified), `preferred_username` and `sub`.
    public var accountClaim: String?
    /// The device authorization endpoint, for a provider whose discovery document names none.
    public var deviceAuthorizationURL: ServerURL?
    /// The fixed port of the browser flow's loopback redirect; `nil` lets the system pick one.
    public var redirectPort: UInt16?
    /// The provider's endpoints, as discovery last found them; `nil` before the first discovery.
    public var provider: OpenIDProvider?

    /// Options of already validated parts.
    public init(accountClaim: String? = nil, deviceAuthorizationURL: ServerURL? = nil, redirectPort: UInt16? = nil,
                provider: OpenIDProvider? = nil) {
        self.accountClaim = accountClaim
        self.deviceAuthorizationURL = deviceAuthorizationURL
        self.redirectPort = redirectPort
        self.provider = provider
    }

    /// Checks the options as typed: a claim name of 1–255 letters, digits, `_`, `-`, `.` and `:`;
    /// a URL by the rules of ``ServerURL``; a port of 1–65535. A broken rule is
    /// ``AuthError/invalidInput(_:)-enum.case``.
    public init(validatingAccountClaim accountClaim: String?, deviceAuthorizationURL: String?, redirectPort: String?) throws(AuthError) {
        if let accountClaim {
            let allowed = accountClaim.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || [UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":")].contains(byte)
            }
            guard (1...255).contains(accountClaim.utf8.count), allowed else {
                throw .invalidInput("invalid account claim '\(accountClaim.peerText(limit: 255))': use 1 to 255 letters, digits, '_', '-', '.' or ':'")
            }
        }
        var port: UInt16?
        if let redirectPort {
            guard redirectPort.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let number = UInt16(redirectPort), number > 0 else {
                throw .invalidInput("invalid redirect port '\(redirectPort.peerText(limit: 40))': use a number from 1 to 65535")
            }
            port = number
        }
        self.init(accountClaim: accountClaim,
                  deviceAuthorizationURL: try deviceAuthorizationURL.map { (text) throws(AuthError) in
                      try ServerURL(validating: text, role: "device authorization URL")
                  },
                  redirectPort: port)
    }
}

/// An OpenID provider's endpoints, from its discovery document (OpenID Connect Discovery 1.0),
/// each checked by the rules of ``ServerURL``.
public struct OpenIDProvider: Equatable, Sendable {
    /// The issuer as the document spells it: ID tokens must carry exactly this `iss`.
    public var issuer: String
    /// Where codes, device codes and refresh tokens are exchanged for tokens.
    public var tokenEndpoint: ServerURL
    /// Where the browser flow sends the person; `nil` when the provider has no browser flow.
    public var authorizationEndpoint: ServerURL?
    /// Where the device flow starts (RFC 8628), from the document; `nil` when it names none.
    public var deviceAuthorizationEndpoint: ServerURL?
    /// Where the claims of an access token's owner are read; `nil` when there is none.
    public var userinfoEndpoint: ServerURL?
    /// Where refresh tokens are revoked (RFC 7009); `nil` when there is none.
    public var revocationEndpoint: ServerURL?
    /// The provider's signing keys (a JSON Web Key Set).
    public var jwksURI: ServerURL
    /// Whether the provider announced RFC 9207's `iss` in authorization responses. Not kept in
    /// the settings: it is learnt again at every sign-in.
    public var announcesIssuerInResponses: Bool

    /// Endpoints already checked.
    public init(issuer: String, tokenEndpoint: ServerURL, authorizationEndpoint: ServerURL? = nil,
                deviceAuthorizationEndpoint: ServerURL? = nil, userinfoEndpoint: ServerURL? = nil,
                revocationEndpoint: ServerURL? = nil, jwksURI: ServerURL, announcesIssuerInResponses: Bool = false) {
        self.issuer = issuer
        self.tokenEndpoint = tokenEndpoint
        self.authorizationEndpoint = authorizationEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.userinfoEndpoint = userinfoEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.jwksURI = jwksURI
        self.announcesIssuerInResponses = announcesIssuerInResponses
    }
}

extension OpenIDOptions {
    /// The device authorization endpoint to use: the one given, else the one discovery found.
    var deviceEndpoint: ServerURL? {
        deviceAuthorizationURL ?? provider?.deviceAuthorizationEndpoint
    }
}
