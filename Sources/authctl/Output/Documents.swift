// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore

// The `--json` documents of the commands (their man pages, `authctl.COMMAND(1)`), one type each,
// all printed by `Output.json`. Absent values are `null`, never left out: see `Nullable`. The
// library's times are `Date`s; the documents write them as RFC 3339 UTC, in whole seconds.

/// `status --json`.
struct StatusDocument: Encodable {
    var service: String
    var signedIn: Bool
    @Nullable var user: String?
    @Nullable var name: String?
    @Nullable var signedInAt: String?
    var sequence: UInt64
    var keyringLocked: Bool
    @Nullable var avatarURL: String?
    @Nullable var server: String?
    @Nullable var accessTokenExpiresAt: String?
    @Nullable var refreshTokenExpiresAt: String?

    init(_ status: LoginStatus) {
        service = status.service.rawValue
        signedIn = status.isSignedIn
        user = status.account?.rawValue
        name = status.reportedName
        signedInAt = status.signedInAt.map(Timestamp.rfc3339(_:))
        sequence = status.sequence
        keyringLocked = status.keyringLocked
        avatarURL = status.avatarURL
        server = status.server?.rawValue
        accessTokenExpiresAt = status.accessTokenExpiresAt.map(Timestamp.rfc3339(_:))
        refreshTokenExpiresAt = status.refreshTokenExpiresAt.map(Timestamp.rfc3339(_:))
    }
}

/// `server show --json`.
struct BindingDocument: Encodable {
    var service: String
    @Nullable var server: String?
    @Nullable var `protocol`: String?
    @Nullable var clientId: String?
    @Nullable var scope: String?
    @Nullable var revokeUrl: String?
    @Nullable var accountClaim: String?
    @Nullable var deviceAuthorizationUrl: String?
    @Nullable var redirectPort: UInt16?
    @Nullable var issuer: String?
    /// `HOST:PORT` of the proxy requests to the server go through; null when direct or unbound.
    @Nullable var proxy: String?

    init(service: ServiceName, _ binding: ServerBinding?, proxy: String? = nil) {
        self.service = service.rawValue
        server = binding?.server.rawValue
        `protocol` = binding?.tokenProtocol.rawValue
        clientId = binding?.clientID
        scope = binding?.scope
        revokeUrl = binding?.revokeURL?.rawValue
        accountClaim = binding?.openID?.accountClaim
        deviceAuthorizationUrl = binding?.openID?.deviceAuthorizationURL?.rawValue
        redirectPort = binding?.openID?.redirectPort
        issuer = binding?.openID?.provider?.issuer
        self.proxy = proxy
    }
}

/// `token --json`.
struct TokenDocument: Encodable {
    var service: String
    var user: String
    var accessToken: String
    var tokenType: String
    @Nullable var expiresAt: String?
    /// Only with `--id-token`: absent, not null, otherwise.
    var idToken: String?

    init(service: ServiceName, _ token: AuthController.AccessToken, includingIDToken: Bool = false) {
        self.service = service.rawValue
        user = token.account.rawValue
        accessToken = token.token
        tokenType = token.tokenType
        expiresAt = token.expiresAt.map(Timestamp.rfc3339(_:))
        idToken = includingIDToken ? token.idToken : nil
    }
}

/// `whoami --json`.
struct WhoAmIDocument: Encodable {
    var service: String
    @Nullable var user: String?
    @Nullable var name: String?

    init(_ status: LoginStatus) {
        service = status.service.rawValue
        user = status.account?.rawValue
        name = status.reportedName
    }
}

/// One element of the `accounts --json` array.
struct AccountDocument: Encodable {
    var user: String
    var current: Bool

    init(_ account: Account) {
        user = account.id.rawValue
        current = account.isCurrent
    }
}

/// `doctor --json`.
struct DoctorDocument: Encodable {
    struct Check: Encodable {
        var name: String
        var ok: Bool
        var detail: String
        @Nullable var fix: String?
        /// On the `secret-service` check only.
        var implementation: String?
    }

    var ok: Bool
    var checks: [Check]

    init(_ checks: [Doctor.Check]) {
        ok = checks.allSatisfy(\.ok)
        self.checks = checks.map { Check(name: $0.name, ok: $0.ok, detail: Output.words($0.detail), fix: $0.fix.map(Output.words),
                                            implementation: $0.implementation) }
    }
}

/// One line of `watch --json`.
struct EventDocument: Encodable {
    var service: String
    var signedIn: Bool
    @Nullable var user: String?
    var reason: String
    var name: String
    /// RFC 3339, UTC.
    var timestamp: String
    var sequence: UInt64

    init(_ event: LoginEvent) {
        service = event.service.rawValue
        signedIn = event.isSignedIn
        user = event.account?.rawValue
        reason = event.reason.rawValue
        name = event.name
        timestamp = Timestamp.rfc3339(event.timestamp)
        sequence = event.sequence
    }
}

/// An optional that is encoded as `null` when absent. The synthesised `Encodable` of a plain
/// optional property calls `encodeIfPresent`, which leaves the key out; the documents keep
/// every key, with `null` for an absent value.
@propertyWrapper
struct Nullable<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}

extension LoginStatus {
    /// The display name as `status` and `whoami` report it: empty rather than unknown while
    /// someone is signed in, `nil` when nobody is.
    var reportedName: String? { isSignedIn ? name ?? "" : nil }
}
