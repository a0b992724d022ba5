// SPDX-License-Identifier: Apache-2.0
/// The keyring items of one service, holding `Codable` values: what an app keeps per account —
/// an API key, a refresh token, a small settings blob — in the desktop's Secret Service, one
/// call per operation.
///
/// ```swift
/// let keyring = Keyring(service: "com.example.notes")
/// try keyring.set(credentials, for: account)
/// let saved = try keyring.value(Credentials.self, for: account)
/// ```
///
/// Each value is stored as JSON (content type `application/json`) under the item's `service`
/// and `account` attributes, and, when the handle has a ``server``, its `server` attribute too;
/// accounts of one service, or one server, never collide. Use a service name of the app's own:
/// authctl keeps its password hashes under ``ServiceName/standard`` and under the services it
/// signs in to.
///
/// Every call blocks on the Secret Service (a D-Bus round trip); those that read or write a
/// secret may show the unlock prompt when the store allows prompts. From `async` code, call it
/// off the cooperative pool. Tests pass `AuthControllerTesting`'s `InMemorySecretStore`.
public struct Keyring: Sendable {
    /// The service whose items this handle reads and writes.
    public let service: ServiceName
    /// The token server the items belong to, or `nil` for the service's own items.
    public let server: ServerURL?
    /// Where the items are.
    public let store: any SecretStore

    /// A handle on `service`'s items in `store`: by default the desktop's Secret Service,
    /// which may show its unlock prompt.
    public init(service: ServiceName, server: ServerURL? = nil, store: any SecretStore = SecretServiceStore(promptAllowed: true)) {
        self.service = service
        self.server = server
        self.store = store
    }

    /// Stores `value` as the item of `account`, replacing the one there in place (never two
    /// items for one account). `label` is what a keyring manager such as Seahorse shows; by
    /// default "SERVICE: ACCOUNT". May show the unlock prompt. The corresponding Secret Service
    /// call is `Collection.CreateItem` with `replace` set.
    public func set<Value: Encodable>(_ value: Value, for account: AccountID, label: String? = nil) throws(AuthError) {
        try store.store(value, service: service, account: account, server: server, label: label ?? "\(service): \(account)")
    }

    /// The item of `account` decoded as `Value`, or `nil` when there is none. A secret that does
    /// not decode (another program's, or damaged) is ``AuthError/invalidInput(_:)-enum.case`` naming the
    /// item. May show the unlock prompt. The corresponding Secret Service calls are
    /// `Service.SearchItems` and `Item.GetSecret`.
    public func value<Value: Decodable>(_ type: Value.Type = Value.self, for account: AccountID) throws(AuthError) -> Value? {
        try store.value(type, service: service, account: account, server: server)
    }

    /// Deletes the item of `account`; returns whether there was one. May show the unlock
    /// prompt. The corresponding Secret Service call is `Item.Delete`.
    @discardableResult
    public func remove(_ account: AccountID) throws(AuthError) -> Bool {
        try store.delete(service: service, account: account, server: server)
    }

    /// Whether `account` has an item. Never prompts, and works while the keyring is locked. Items
    /// are found by their attributes alone, so on a handle without a ``server`` an item of the
    /// same account at a server counts too (as ``SecretStore/containsItem(_:)`` tells).
    public func contains(_ account: AccountID) throws(AuthError) -> Bool {
        try store.containsItem(ItemKey(service: service, account: account, server: server))
    }

    /// The accounts with an item, each once, sorted by bytes. Never prompts; a locked keyring is
    /// ``AuthError/keyringLockedForListing``. The corresponding Secret Service call is
    /// `Service.SearchItems`.
    public func accounts() throws(AuthError) -> [AccountID] {
        try store.accounts(service: service, server: server).sorted()
    }
}
