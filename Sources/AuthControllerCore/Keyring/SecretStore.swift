// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// Where an item lives in the keyring: a service's account, and for the tokens of a service
/// bound to a token server, that server too; for the AWS credentials kept for a session, the
/// role. Two keys that differ in any part are two items: accounts of one service or one server,
/// and the roles of one account, never collide.
public struct ItemKey: Hashable, Sendable, CustomStringConvertible {
    /// The item's `service` attribute.
    public var service: ServiceName
    /// The item's `account` attribute.
    public var account: AccountID
    /// The token server the item belongs to; `nil` for a password hash.
    public var server: ServerURL?
    /// The IAM role (its ARN) whose credentials the item keeps; `nil` for a password hash or tokens.
    public var awsRole: String?

    /// The key of `account`'s item under `service` (at `server`, for tokens).
    public init(service: ServiceName, account: AccountID, server: ServerURL? = nil) {
        self.service = service
        self.account = account
        self.server = server
    }

    /// The key of the AWS credentials kept for `account`'s session of `service` and the role `awsRole`.
    public init(service: ServiceName, account: AccountID, awsRole: String) {
        self.service = service
        self.account = account
        self.awsRole = awsRole
    }

    /// The schema recorded on the item: `io.github.authctl.Password`, `io.github.authctl.Tokens`
    /// or `io.github.authctl.AWSCredentials`.
    public var schema: String {
        server != nil ? "io.github.authctl.Tokens" : awsRole != nil ? "io.github.authctl.AWSCredentials" : "io.github.authctl.Password"
    }

    /// The attributes the item is stored and found by (not the schema: an item another tool
    /// stored with these attributes is found too).
    public var attributes: [(String, String)] {
        var attributes = [("service", service.rawValue), ("account", account.rawValue)]
        if let server { attributes.append(("server", server.rawValue)) }
        if let awsRole { attributes.append(("aws-role", awsRole)) }
        return attributes
    }

    /// Whether an item with `attributes`, found by a search for this key's, is this key's: a
    /// search for a password hash's `service` and `account` finds that account's tokens and AWS
    /// credentials too.
    public func isKey(of attributes: [String: String]) -> Bool {
        attributes["server"] == server?.rawValue && attributes["aws-role"] == awsRole
    }

    /// Whether the item holds JSON (tokens, credentials) rather than a password hash's text.
    public var holdsJSON: Bool { server != nil || awsRole != nil }

    /// Whether a search by ``attributes`` finds this key's items alone (tokens, credentials): a
    /// password hash's finds every item of its service and account.
    public var searchIsExact: Bool { server != nil || awsRole != nil }

    /// "ACCOUNT (SERVICE)", "ACCOUNT at SERVER (SERVICE)", or "ACCOUNT for ROLE (SERVICE)", as
    /// messages name the item.
    public var description: String {
        if let server { return "\(account) at \(server) (\(service))" }
        if let awsRole { return "\(account) for \(awsRole) (\(service))" }
        return "\(account) (\(service))"
    }
}

/// The keyring: one secret per ``ItemKey``.
public protocol SecretStore: Sendable {
    /// Whether the item exists. Never unlocks, never prompts, loads no secret: works while the
    /// collection is locked. Items are found by their attributes alone, never by the schema
    /// attribute, so an item another tool stored with them is seen; and a search for a password
    /// key names only `service` and `account`, so an item of that service and account with a
    /// `server` counts too: it is one search, which `status` can afford; reads and writes of secrets tell the two apart.
    func containsItem(_ key: ItemKey) throws(AuthError) -> Bool

    /// Whether the default collection is locked. Never prompts.
    func isLocked() throws(AuthError) -> Bool

    /// Whether the default collection is locked, and — only when it is not — whether `key`'s
    /// item exists (`nil` when nothing was searched: no key, or a locked collection, which proves
    /// nothing about its items). What a status read asks. Never prompts. The default
    /// implementation calls ``isLocked()`` and ``containsItem(_:)``.
    func lockState(andContains key: ItemKey?) throws(AuthError) -> (locked: Bool, containsItem: Bool?)

    /// Unlocks the default collection if it is locked: may prompt (if the store allows
    /// prompts), or throws "locked". Lets a caller prompt before it takes the settings lock.
    func unlock() throws(AuthError)

    /// The item's secret, or `nil` when there is no item. May unlock the collection (and so
    /// prompt, if the store allows prompts) when the item is locked.
    func secret(_ key: ItemKey) throws(AuthError) -> [UInt8]?

    /// Stores `secret` (of MIME type `contentType`) as the item, replacing an existing secret in
    /// place: never two items for one key. May unlock.
    func store(_ secret: [UInt8], contentType: String, for key: ItemKey, label: String) throws(AuthError)

    /// Deletes the item; returns whether there was one. May unlock.
    @discardableResult
    func deleteItem(_ key: ItemKey) throws(AuthError) -> Bool

    /// The accounts with an item under `service` — password items when `server` is `nil`, else
    /// that server's token items — each once, in any order. Never unlocks; throws
    /// ``AuthError/keyringLockedForListing`` when the collection is locked, because a locked
    /// collection may expose only hashed attribute values.
    func accounts(service: ServiceName, server: ServerURL?) throws(AuthError) -> [AccountID]

    /// The roles (ARNs) with AWS credentials kept for `account` under `service`, each once, in
    /// any order. Never unlocks; throws ``AuthError/keyringLockedForListing`` when the
    /// collection is locked.
    func awsRoles(service: ServiceName, account: AccountID) throws(AuthError) -> [String]
}

// MARK: - Password hashes

extension SecretStore {
    /// ``isLocked()``, then ``containsItem(_:)`` when there is a key and the collection is unlocked.
    public func lockState(andContains key: ItemKey?) throws(AuthError) -> (locked: Bool, containsItem: Bool?) {
        let locked = try isLocked()
        guard !locked, let key else { return (locked, nil) }
        return (false, try containsItem(key))
    }

    /// Whether the item is known to be gone: its collection is unlocked and it is not there. A
    /// locked collection proves nothing (some services list nothing while locked), so an item
    /// not found in one is not gone. Never prompts.
    public func itemIsGone(_ key: ItemKey) throws(AuthError) -> Bool {
        try lockState(andContains: key).containsItem == false
    }

    /// Whether `account` has a stored password hash. Never prompts.
    public func containsItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool {
        try containsItem(ItemKey(service: service, account: account))
    }

    /// The stored password hash of `account`; a secret that is not text reads as empty (the
    /// hasher then refuses it, and the user is told to `forget` it). May prompt.
    public func secret(service: ServiceName, account: AccountID) throws(AuthError) -> String? {
        try secret(ItemKey(service: service, account: account)).map { String(validating: $0, as: UTF8.self) ?? "" }
    }

    /// Stores the password hash of `account`. May prompt.
    public func store(_ secret: String, service: ServiceName, account: AccountID, label: String) throws(AuthError) {
        try store(Array(secret.utf8), contentType: "text/plain", for: ItemKey(service: service, account: account), label: label)
    }

    /// Deletes the password hash of `account`. May prompt.
    @discardableResult
    public func deleteItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool {
        try deleteItem(ItemKey(service: service, account: account))
    }

    /// The accounts with a stored password hash. Never prompts.
    public func accounts(service: ServiceName) throws(AuthError) -> [AccountID] {
        try accounts(service: service, server: nil)
    }
}

// MARK: - Typed values

/// ``Keyring`` binds these to one service, for an app's own items.
extension SecretStore {
    /// Stores any `Encodable` value as the item, as JSON (content type `application/json`),
    /// replacing the old one in place. Blocks on the keyring; may prompt. The corresponding
    /// Secret Service call is `Collection.CreateItem` with `replace` set.
    public func store<Value: Encodable>(_ value: Value, service: ServiceName, account: AccountID, server: ServerURL? = nil,
                                        label: String) throws(AuthError) {
        try store(value, for: ItemKey(service: service, account: account, server: server), label: label)
    }

    /// Stores `value` as JSON at `key` (tokens, AWS credentials). May prompt.
    public func store<Value: Encodable>(_ value: Value, for key: ItemKey, label: String) throws(AuthError) {
        let data: Data
        do { data = try JSONEncoder().encode(value) } catch {
            preconditionFailure("SecretStore.store: \(Value.self) failed to encode: \(error)")
        }
        try store(Array(data), contentType: "application/json", for: key, label: label)
    }

    /// The item decoded as `Value`, or `nil` when there is no item. A secret that does not decode
    /// (another tool's, or damaged) is ``AuthError/invalidInput(_:)-enum.case`` naming the item. Blocks on
    /// the keyring; may prompt. The corresponding Secret Service calls are `Service.SearchItems`
    /// and `Item.GetSecret`.
    public func value<Value: Decodable>(_ type: Value.Type, service: ServiceName, account: AccountID,
                                        server: ServerURL? = nil) throws(AuthError) -> Value? {
        let key = ItemKey(service: service, account: account, server: server)
        guard let bytes = try secret(key) else { return nil }
        do {
            return try JSONDecoder().decode(Value.self, from: Data(bytes))
        } catch {
            throw .invalidInput("the keyring item of \(key) is not what authctl stored there; \(hint: .forget(account))")
        }
    }

    /// Deletes the item of `account` (at `server`); returns whether there was one. Blocks on the
    /// keyring; may prompt. The corresponding Secret Service call is `Item.Delete`.
    @discardableResult
    public func delete(service: ServiceName, account: AccountID, server: ServerURL? = nil) throws(AuthError) -> Bool {
        try deleteItem(ItemKey(service: service, account: account, server: server))
    }
}

extension AuthError {
    /// The keyring is locked and no unlock prompt may be shown: ``unavailable(_:detail:)-enum.case``.
    public static let keyringLocked = AuthError.unavailable(
        "the keyring is locked and no unlock prompt can be shown; unlock the login keyring (e.g. in Seahorse), or \(hint: .allowUnlockPrompt)")
    /// Account ids cannot be listed from a locked keyring: ``unavailable(_:detail:)-enum.case``.
    public static let keyringLockedForListing = AuthError.unavailable(
        "the keyring is locked, so account ids cannot be listed; unlock the login keyring (e.g. in Seahorse) and try again")
    /// The unlock prompt was shown and dismissed: ``denied(_:)-enum.case``.
    public static let unlockDismissed = AuthError.denied("the keyring unlock prompt was dismissed; the keyring stays locked")
}
