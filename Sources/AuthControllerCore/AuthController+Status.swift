// SPDX-License-Identifier: Apache-2.0
public import FoundationEssentials

/// Queries: who is signed in, since when, which accounts exist. None of them prompts, and none
/// writes; each blocks briefly on the settings file and the keyring.
extension AuthController {
    /// The login status. Never prompts, and works while the keyring is locked: then it answers
    /// from the settings alone (``LoginStatus/keyringLocked``), since a locked keyring may hide
    /// its items. The D-Bus method `GetStatus` of `serve` answers with it.
    public func status() throws(AuthError) -> LoginStatus {
        let record = try intactRecord()
        let asked = try keyring.lockState(andContains: record.user.map { itemKey($0, in: record) })
        return try status(of: record, keyringLocked: asked.locked, itemExists: asked.containsItem)
    }

    /// The status `record` describes, looking in the keyring for its user's item only (unless
    /// `itemExists` already says whether it is there). While the keyring is locked the record is
    /// taken at its word: a locked collection may hide its items, and is never searched here.
    func status(of record: SessionRecord, keyringLocked locked: Bool, itemExists: Bool? = nil) throws(AuthError) -> LoginStatus {
        var status = LoginStatus(service: service, sequence: record.sequence, keyringLocked: locked)
        status.server = record.binding?.server
        let signedIn: AccountID?
        if locked {
            signedIn = record.user
        } else if let itemExists {
            signedIn = itemExists ? record.user : nil
        } else {
            // The lock state was just read: one search (serve re-reads hundreds of services this way).
            signedIn = try record.user.flatMap { (user) throws(AuthError) in try keyring.containsItem(itemKey(user, in: record)) ? user : nil }
        }
        // A bound session also ends when its known end has passed (see `sessionHasEnded`).
        guard let user = signedIn, !sessionHasEnded(record) else { return status }
        status.account = user
        status.name = record.name
        status.verifiedEmail = record.email
        status.signedInAt = record.signedInAt.flatMap(Timestamp.microseconds(rfc3339:)).map(Timestamp.date(microseconds:))
        status.accessTokenExpiresAt = record.tokenTimes?.accessExpiresAt.map(Timestamp.date(microseconds:))
        status.refreshTokenExpiresAt = record.tokenTimes?.refreshExpiresAt.map(Timestamp.date(microseconds:))
        return status
    }

    /// The current state as an event with reason `initial` (user `nil` when nobody is signed
    /// in), for listeners that print where things stand before the first change. Never prompts.
    public func initialEvent() throws(AuthError) -> LoginEvent {
        let status = try status()
        return LoginEvent(service: service, status: status.isSignedIn ? .signedIn : .signedOut, account: status.account,
                          reason: .initial, name: status.name ?? "", timestamp: Timestamp.date(microseconds: clock()),
                          sequence: status.sequence)
    }

    /// Throws when the settings file is unsafe, unreadable or corrupt
    /// (``AuthError/settingsUnsafe(_:)-enum.case``, ``AuthError/settingsIO(_:)-enum.case``): settings
    /// problems are reported before keyring ones. Blocks briefly; never prompts.
    package func checkSettings() throws(AuthError) {
        _ = try intactRecord()
    }

    /// Whether `account` has a stored password hash. Never prompts. An unsafe settings file is
    /// reported first; a corrupt one is not, since a sign-in replaces it.
    package func hasStoredPassword(for account: AccountID) throws(AuthError) -> Bool {
        _ = try settings.read(service: service)
        return try keyring.containsItem(service: service, account: account)
    }

    /// The accounts with a keyring item (password hashes, or tokens at the bound server), sorted
    /// by bytes, marking the signed-in one. Never prompts; a locked keyring is
    /// ``AuthError/unavailable(_:detail:)-enum.case``. The D-Bus method `ListAccounts` of `serve` answers
    /// with their ids.
    public func accounts() throws(AuthError) -> [Account] {
        let record = try intactRecord()
        let current = sessionHasEnded(record) ? nil : record.user
        return try keyring.accounts(service: service, server: record.binding?.server).sorted()
            .map { Account(id: $0, isCurrent: $0 == current) }
    }

    /// The service's record; a corrupt file is an error here (only sign-in and sign-out
    /// replace one).
    func intactRecord() throws(AuthError) -> SessionRecord {
        let read = try settings.read(service: service)
        if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
        return read.record
    }

    /// The account the record names, unless its keyring item is known to be gone (the record is
    /// then stale). A locked keyring proves nothing: the record stands.
    func signedInAccount(in record: SessionRecord) throws(AuthError) -> AccountID? {
        guard let user = record.user, try !keyring.itemIsGone(itemKey(user, in: record)) else { return nil }
        return user
    }

    /// Whether the session's known end has passed: the refresh token's expiry, or the access
    /// token's when the server issued no refresh token.
    func sessionHasEnded(_ record: SessionRecord) -> Bool {
        guard record.binding != nil, let expiry = record.tokenTimes?.sessionEndsAt else { return false }
        return expiry <= clock()
    }
}

/// An account with a keyring item.
public struct Account: Equatable, Sendable {
    /// The account id.
    public var id: AccountID
    /// Whether it is the signed-in account.
    public var isCurrent: Bool

    /// An account as ``AuthController/accounts()`` lists it.
    public init(id: AccountID, isCurrent: Bool) {
        self.id = id
        self.isCurrent = isCurrent
    }
}

/// The login status of a service, as ``AuthController/status()`` finds it and the D-Bus method
/// `GetStatus` of `serve` returns it (with times as microseconds since the Unix epoch).
public struct LoginStatus: Equatable, Sendable {
    /// The service.
    public var service: ServiceName
    /// The signed-in account, or `nil` when signed out.
    public var account: AccountID?
    /// The signed-in account's display name.
    public var name: String?
    /// When the signed-in account signed in; `nil` when signed out or not recorded.
    public var signedInAt: Date?
    /// The number of the last event (0 if none).
    public var sequence: UInt64
    /// Whether the keyring's default collection is locked.
    public var keyringLocked: Bool
    /// The token server the service is bound to, `nil` for a local service.
    public var server: ServerURL?
    /// When the signed-in account's access token expires, by the local clock; `nil` when unknown.
    public var accessTokenExpiresAt: Date?
    /// When its refresh token expires, likewise.
    public var refreshTokenExpiresAt: Date?
    /// The signed-in account's e-mail address, when an OpenID provider vouched for one.
    public var verifiedEmail: String?

    /// A status with the given parts; token times start unknown.
    public init(service: ServiceName, account: AccountID? = nil, name: String? = nil, signedInAt: Date? = nil,
                sequence: UInt64, keyringLocked: Bool) {
        self.service = service
        self.account = account
        self.name = name
        self.signedInAt = signedInAt
        self.sequence = sequence
        self.keyringLocked = keyringLocked
    }

    /// Whether someone is signed in.
    public var isSignedIn: Bool { account != nil }

    /// The Gravatar URL of the signed-in account's e-mail address (``verifiedEmail``), else of its id:
    /// MD5 of the trimmed, lower-cased text.
    public var avatarURL: String? {
        guard let account else { return nil }
        // Unicode's White_Space property is the set Foundation's `.whitespacesAndNewlines` trims.
        let scalars = (verifiedEmail ?? account.rawValue).unicodeScalars
        let start = scalars.firstIndex { !$0.properties.isWhitespace } ?? scalars.endIndex
        let end = scalars.lastIndex { !$0.properties.isWhitespace }.map(scalars.index(after:)) ?? start
        let normalized = String(scalars[start..<end]).lowercased()
        return "https://www.gravatar.com/avatar/" + GLibText.md5Hex(normalized)
    }
}
