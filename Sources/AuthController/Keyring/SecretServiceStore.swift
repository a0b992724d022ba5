/// The desktop Secret Service (GNOME Keyring). Items live in the default collection, with the
/// schema `io.github.authctl.Password` and the attributes `service` and `account`, so
/// `secret-tool lookup service S account A` prints the stored hash.
///
/// Every call runs with its own deadline; a call that may show the unlock prompt gets
/// ``promptTimeout``, any other ``callTimeout``. When a deadline passes the call is cancelled,
/// which also dismisses a prompt. Reads that need no secret never prompt.
public struct SecretServiceStore: SecretStore {
    /// Whether the unlock prompt may be shown (false with `--no-prompt` or without a display).
    public let promptAllowed: Bool
    /// Seconds a call that may prompt may take.
    public let promptTimeout: Double
    /// Seconds any other call may take.
    public let callTimeout: Double
    /// The bus the Secret Service is on; `nil` for the session bus.
    public var busAddress: String? { bus.address }
    private let bus: SessionBus

    /// The schema name recorded on every item (SPEC §2).
    public static let schema = "io.github.authctl.Password"

    public init(promptAllowed: Bool, promptTimeout: Double = 60, callTimeout: Double = 5, busAddress: String? = nil) {
        self.promptAllowed = promptAllowed
        self.promptTimeout = promptTimeout
        self.callTimeout = callTimeout
        bus = SessionBus.shared(address: busAddress)
    }

    public func containsItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool {
        let found = try search(service, account)
        return !found.unlocked.isEmpty || !found.locked.isEmpty
    }

    public func isLocked() throws(AuthError) -> Bool {
        try bus.call("read the keyring's lock state", timeout: callTimeout, missingObject: Self.noDefaultCollection) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.collectionIsLocked(connection, path: SecretServiceCalls.defaultCollectionPath, deadline)
        }
    }

    public func secret(service: ServiceName, account: AccountID) throws(AuthError) -> String? {
        try unlock()
        let found = try search(service, account)
        guard let path = found.unlocked.first else {
            if found.locked.isEmpty { return nil }
            throw .keyringLocked  // in another, locked collection
        }
        let bytes = try bus.call("read the password hash", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.secret(connection, item: path, deadline)
        }
        // A secret that is not text reads as empty: the hasher then refuses it, and the user
        // is told to `forget` it.
        return String(validating: bytes, as: UTF8.self) ?? ""
    }

    public func store(_ secret: String, service: ServiceName, account: AccountID, label: String) throws(AuthError) {
        let collection = try unlockedDefaultCollection()
        let found = try search(service, account)
        let items = found.unlocked + found.locked
        if let existing = items.first {
            try bus.call("store the password hash", timeout: callTimeout) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.setSecret(connection, item: existing, secret: Array(secret.utf8), contentType: "text/plain", deadline)
            }
            // Never two items for one pair: drop duplicates another tool may have left.
            for duplicate in items.dropFirst() { try delete(duplicate) }
        } else {
            try bus.call("store the password hash", timeout: callTimeout) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.createItem(connection, collection: collection, schema: Self.schema, label: label,
                                                  attributes: Self.attributes(service, account), secret: Array(secret.utf8),
                                                  contentType: "text/plain", deadline)
            }
        }
    }

    public func deleteItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool {
        // Asked first: without a default collection this is 69, not a silent "nothing to delete".
        let locked = try isLocked()
        let found = try search(service, account)
        let items = found.unlocked + found.locked
        guard !items.isEmpty else { return false }
        if locked { try unlockedDefaultCollection() }
        for item in items { try delete(item) }
        return true
    }

    public func accounts(service: ServiceName) throws(AuthError) -> [AccountID] {
        if try isLocked() { throw .keyringLockedForListing }
        let found = try bus.call("search the keyring", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.searchItems(connection, attributes: ["service": service.rawValue], deadline)
        }
        if !found.locked.isEmpty { throw .keyringLockedForListing }
        let attributes = try bus.call("read the items' attributes", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.itemsAttributes(connection, paths: found.unlocked, deadline)
        }
        // Items another tool stored with an account attribute that is not a valid id are
        // skipped; duplicate items another tool left for one account count once.
        var seen = Set<AccountID>()
        return attributes.compactMap { $0["account"].flatMap(AccountID.init(rawValue:)) }.filter { seen.insert($0).inserted }
    }

    public func unlock() throws(AuthError) {
        guard try isLocked() else { return }
        try unlockedDefaultCollection()
    }

    // MARK: - Steps

    private static let noDefaultCollection = AuthError.unavailable(
        "the Secret Service has no default collection; create one (e.g. a \"Login\" keyring in Seahorse), or run in `authctl sandbox`")

    private static func attributes(_ service: ServiceName, _ account: AccountID) -> KeyValuePairs<String, String> {
        ["service": service.rawValue, "account": account.rawValue]
    }

    /// `SearchItems` by `service` and `account` alone (not the schema), so items another tool
    /// stored with those attributes are found. Works while locked; never prompts.
    private func search(_ service: ServiceName, _ account: AccountID) throws(AuthError) -> (unlocked: [String], locked: [String]) {
        try bus.call("search the keyring", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.searchItems(connection, attributes: Self.attributes(service, account), deadline)
        }
    }

    private func delete(_ item: String) throws(AuthError) {
        try bus.call("delete the password hash", timeout: promptAllowed ? promptTimeout : callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.deleteItem(connection, item: item, deadline)
        }
    }

    /// The default collection's object path, unlocked: shows the unlock prompt if it is locked
    /// and prompts are allowed, else throws "locked".
    @discardableResult
    private func unlockedDefaultCollection() throws(AuthError) -> String {
        let collection = try bus.call("find the default collection", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.readAlias(connection, "default", deadline)
        }
        guard let collection else { throw Self.noDefaultCollection }
        guard try isLocked() else { return collection }
        guard promptAllowed else { throw .keyringLocked }
        let unlocked = try bus.call("unlock the keyring", timeout: promptTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.unlock(connection, object: collection, deadline)
        }
        guard unlocked else { throw .unlockDismissed }
        return collection
    }
}
