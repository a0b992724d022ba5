/// The desktop Secret Service (GNOME Keyring). Items live in the default collection, with the
/// schema `io.github.authctl.Password` and the attributes `service` and `account`, so
/// `secret-tool lookup service S account A` prints the stored hash.
///
/// Every call runs with its own deadline; a call that may show the unlock prompt gets
/// ``promptTimeout``, any other ``callTimeout``. When a deadline passes the call is cancelled,
/// which also dismisses a prompt. Reads that need no secret never prompt.
///
/// Each call blocks its thread until the reply comes or its deadline passes: async code makes
/// it from a thread of its own (as `authctl serve` does), not on the cooperative pool.
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

    /// A store on the Secret Service of the bus at `busAddress` (`unix:path=…`), or of the session
    /// bus with `nil`. Does not connect yet: the first call opens the connection, which this process
    /// shares with the other users of that bus.
    ///
    /// - Parameters:
    ///   - promptAllowed: whether a call that needs the keyring unlocked may show the unlock prompt;
    ///     without it such a call throws ``AuthError/keyringLocked``.
    ///   - promptTimeout: seconds a call that may prompt may take.
    ///   - callTimeout: seconds any other call may take.
    ///   - busAddress: the D-Bus address to use; `nil` for the session bus.
    public init(promptAllowed: Bool, promptTimeout: Double = 60, callTimeout: Double = 5, busAddress: String? = nil) {
        self.promptAllowed = promptAllowed
        self.promptTimeout = promptTimeout
        self.callTimeout = callTimeout
        bus = SessionBus.shared(address: busAddress)
    }

    /// One `Service.SearchItems` by the key's attributes, answered while locked too. Blocks until
    /// the reply or ``callTimeout``; never prompts.
    public func containsItem(_ key: ItemKey) throws(AuthError) -> Bool {
        // One SearchItems and nothing more: this is `status`'s call.
        let found = try search(key, leavingOutTokenItems: false)
        return !found.unlocked.isEmpty || !found.locked.isEmpty
    }

    /// `SearchItems` and the collection's `Locked` property sent together: one round trip.
    /// gnome-keyring now and then answers the property, when it arrives beside the search, with
    /// `UnknownMethod` for a collection path it made up: then both are asked again one after the
    /// other, and only that answer counts.
    public func lockState(andContains key: ItemKey?) throws(AuthError) -> (locked: Bool, containsItem: Bool) {
        switch try SecretServiceCalls.searchItemsAndCollectionLockWithoutGIO(
            bus, attributes: key?.attributes, collection: SecretServiceCalls.defaultCollectionPath,
            what: "read the keyring's lock state", timeout: callTimeout) {
        case .answered(let read):
            return (read.locked, read.found)
        case .refused:
            // As when the calls below fail.
            return try lockStateOneCallAtATime(andContains: key)
        case .notMade:
            break
        }
        guard let key else { return try lockStateOneCallAtATime(andContains: nil) }
        do {
            let together = try bus.call("read the keyring's lock state", timeout: callTimeout) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.searchItemsAndCollectionLock(connection, attributes: key.attributes,
                                                                    collection: SecretServiceCalls.defaultCollectionPath, deadline)
            }
            return (together.locked, !together.found.unlocked.isEmpty || !together.found.locked.isEmpty)
        } catch {
            // A deadline that passed is not asked again: a command still ends within its deadline.
            if case .temporaryFailure = error { throw error }
            return try lockStateOneCallAtATime(andContains: key)
        }
    }

    /// ``lockState(andContains:)`` asked one call after the other, each answer counting alone.
    private func lockStateOneCallAtATime(andContains key: ItemKey?) throws(AuthError) -> (locked: Bool, containsItem: Bool) {
        let locked = try isLocked()
        guard let key else { return (locked, false) }
        return (locked, try containsItem(key))
    }

    /// `Properties.Get` of the default collection's `Locked` property. Never prompts.
    ///
    /// Asked at the `default` alias's path: one call. gnome-keyring now and then answers a call
    /// there, amid other clients' calls, as if nothing were at the path; only when the alias
    /// resolves to nothing either is there no default collection.
    public func isLocked() throws(AuthError) -> Bool {
        let locked = try bus.callUnlessGone("read the keyring's lock state", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.collectionIsLocked(connection, path: SecretServiceCalls.defaultCollectionPath, deadline)
        }
        if let locked { return locked }
        return try isLocked(try defaultCollection())
    }

    /// The `Locked` property of the collection at `path`.
    private func isLocked(_ path: String) throws(AuthError) -> Bool {
        try bus.call("read the keyring's lock state", timeout: callTimeout, missingObject: Self.noDefaultCollection) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.collectionIsLocked(connection, path: path, deadline)
        }
    }

    /// The object path the `default` alias names.
    private func defaultCollection() throws(AuthError) -> String {
        let collection = try bus.call("find the default collection", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.readAlias(connection, "default", deadline)
        }
        guard let collection else { throw Self.noDefaultCollection }
        return collection
    }

    /// `Service.SearchItems`, then `Item.GetSecret` through a `plain` session. Blocks; when the item
    /// is locked it unlocks the default collection first, which may show the prompt (see
    /// ``unlock()``).
    public func secret(_ key: ItemKey) throws(AuthError) -> [UInt8]? {
        if key.server != nil {
            // A token item is found exactly by its attributes: search and read in one go.
            let read = try bus.call("read the secret of \(key)", timeout: callTimeout) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.searchAndReadSecret(connection, attributes: key.attributes, deadline)
            }
            if let secret = read.secret { return secret }
            if read.found.locked.isEmpty { return nil }
        }
        // The search says whether the item is locked: unlocking (a lock-state read at least)
        // is needed only then.
        var found = try search(key)
        if found.unlocked.isEmpty && !found.locked.isEmpty {
            try unlock()
            found = try search(key)
        }
        guard let path = found.unlocked.first else {
            if found.locked.isEmpty { return nil }
            throw .keyringLocked  // in another, locked collection
        }
        // Deleted since the search (by another authctl, say): not there.
        return try bus.callUnlessGone("read the secret of \(key)", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.secret(connection, item: path, deadline)
        }
    }

    /// `Item.SetSecret` on the item the key finds (deleting any duplicate), else
    /// `Collection.CreateItem` in the default collection. Blocks; unlocks the collection first, which
    /// may prompt. A write whose deadline passed is undone if the service carries it out later.
    public func store(_ secret: [UInt8], contentType: String, for key: ItemKey, label: String) throws(AuthError) {
        let collection = try unlockedDefaultCollection()
        let found = try search(key)
        let items = found.unlocked + found.locked
        if let existing = items.first {
            let old = try bus.call("read the secret of \(key)", timeout: callTimeout) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.secret(connection, item: existing, deadline)
            }
            try undoingLateWrites("store the secret of \(key)", { connection, deadline throws(GLibError) in
                try SecretServiceCalls.setSecret(connection, item: existing, secret: secret, contentType: contentType, deadline)
            }, undo: { connection, deadline throws(GLibError) in
                try SecretServiceCalls.setSecret(connection, item: existing, secret: old, contentType: contentType, deadline)
            })
            // Never two items for one key: drop duplicates another tool may have left.
            for duplicate in items.dropFirst() { try delete(duplicate, of: key) }
        } else {
            try undoingLateWrites("store the secret of \(key)", { connection, deadline throws(GLibError) in
                try SecretServiceCalls.createItem(connection, collection: collection, schema: key.schema, label: label,
                                                  attributes: key.attributes, secret: secret, contentType: contentType, deadline)
            }, undo: { connection, deadline throws(GLibError) in
                let created = try SecretServiceCalls.searchItems(connection, attributes: key.attributes, deadline)
                for item in created.unlocked + created.locked { try SecretServiceCalls.deleteItem(connection, item: item, deadline) }
            })
        }
    }

    /// `Item.Delete` on each item the key finds. Blocks; unlocks the collection first when it is
    /// locked and there is something to delete, which may prompt.
    public func deleteItem(_ key: ItemKey) throws(AuthError) -> Bool {
        // Asked first: without a default collection this is 69, not a silent "nothing to delete".
        let locked = try isLocked()
        let found = try search(key)
        let items = found.unlocked + found.locked
        guard !items.isEmpty else { return false }
        if locked { try unlockedDefaultCollection() }
        for item in items { try delete(item, of: key) }
        return true
    }

    /// `Service.SearchItems` by `service` (and `server`), then each item's `Attributes`; items whose
    /// `account` is not a valid ``AccountID`` are skipped. Blocks; never prompts: a locked
    /// collection is ``AuthError/keyringLockedForListing``.
    public func accounts(service: ServiceName, server: ServerURL?) throws(AuthError) -> [AccountID] {
        if try isLocked() { throw .keyringLockedForListing }
        var query = [("service", service.rawValue)]
        if let server { query.append(("server", server.rawValue)) }
        let found = try bus.call("search the keyring", timeout: callTimeout) { [query] connection, deadline throws(GLibError) in
            try SecretServiceCalls.searchItems(connection, attributes: query, deadline)
        }
        if !found.locked.isEmpty { throw .keyringLockedForListing }
        let attributes = try bus.call("read the items' attributes", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.itemsAttributes(connection, paths: found.unlocked, deadline)
        }
        // Password items have no `server`; items deleted since the search (`nil`) are not there;
        // items another tool stored with an account attribute that is not a valid id are
        // skipped; duplicates another tool left count once.
        var seen = Set<AccountID>()
        return attributes.compactMap { $0 }.filter { $0["server"] == server?.rawValue }
            .compactMap { $0["account"].flatMap(AccountID.init(rawValue:)) }
            .filter { seen.insert($0).inserted }
    }

    /// `Service.Unlock` of the default collection when it is locked: blocks while the prompt is
    /// shown, up to ``promptTimeout``. Throws ``AuthError/keyringLocked`` when prompts are not
    /// allowed and ``AuthError/unlockDismissed`` when the prompt is dismissed.
    public func unlock() throws(AuthError) {
        guard try isLocked() else { return }
        try unlockedDefaultCollection()
    }

    // MARK: - Steps

    private static let noDefaultCollection = AuthError.unavailable(
        "the Secret Service has no default collection; create one (e.g. a \"Login\" keyring in Seahorse), or run \(hint: .sandbox)")

    /// `SearchItems` by the key's attributes alone (not the schema), so items another tool
    /// stored with those attributes are found. Works while locked; never prompts.
    ///
    /// A search by `service` and `account` also matches that account's token items, which add
    /// a `server` attribute; for a password key those are left out, at the cost of one more
    /// (pipelined) round trip when anything was found. Attribute names stay readable while
    /// the collection is locked, so this works then too. An item deleted between the search and
    /// that round trip is left out too.
    private func search(_ key: ItemKey, leavingOutTokenItems: Bool = true) throws(AuthError) -> (unlocked: [String], locked: [String]) {
        let found = try bus.call("search the keyring", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.searchItems(connection, attributes: key.attributes, deadline)
        }
        guard leavingOutTokenItems, key.server == nil, !(found.unlocked.isEmpty && found.locked.isEmpty) else { return found }
        let paths = found.unlocked + found.locked
        let attributes = try bus.call("read the items' attributes", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.itemsAttributes(connection, paths: paths, deadline)
        }
        let leftOut = Set(zip(paths, attributes).filter { $0.1 == nil || $0.1?["server"] != nil }.map(\.0))
        return (found.unlocked.filter { !leftOut.contains($0) }, found.locked.filter { !leftOut.contains($0) })
    }

    /// Deletes one item of `key`; if the deadline passes, a delete the service carries out
    /// afterwards is undone by storing the item again. An item already gone is left so.
    private func delete(_ item: String, of key: ItemKey) throws(AuthError) {
        let read = try bus.callUnlessGone("read the item of \(key)", timeout: callTimeout) { connection, deadline throws(GLibError) in
            (try SecretServiceCalls.secret(connection, item: item, deadline), try SecretServiceCalls.itemLabel(connection, item: item, deadline))
        }
        guard let (secret, label) = read else { return }
        try undoingLateWrites("delete the item of \(key)", { connection, deadline throws(GLibError) in
            try SecretServiceCalls.deleteItem(connection, item: item, deadline)
        }, undo: { connection, deadline throws(GLibError) in
            let remaining = try SecretServiceCalls.searchItems(connection, attributes: key.attributes, deadline)
            guard remaining.unlocked.isEmpty && remaining.locked.isEmpty,
                  let collection = try SecretServiceCalls.readAlias(connection, "default", deadline) else { return }
            try SecretServiceCalls.createItem(connection, collection: collection, schema: key.schema, label: label, attributes: key.attributes,
                                              secret: secret, contentType: key.server == nil ? "text/plain" : "application/json", deadline)
        })
    }

    /// Runs a write under its deadline. A write whose deadline passed may still be carried out
    /// by the service after authctl stopped waiting (gnome-keyring finishes what it was asked),
    /// so `undo` then puts things back — with a deadline of its own, at least 5 s — and "nothing
    /// was changed" stays true. The undo is best effort: its failure leaves the first error.
    private func undoingLateWrites(_ what: String, _ write: (GDBus.Connection, Deadline) throws(GLibError) -> Void,
                                   undo: (GDBus.Connection, Deadline) throws(GLibError) -> Void) throws(AuthError) {
        do throws(AuthError) {
            try bus.call(what, timeout: promptAllowed ? promptTimeout : callTimeout, write)
        } catch {
            if case .temporaryFailure = error {
                _ = try? bus.call("undo a late write", timeout: max(callTimeout, 5), undo)
            }
            throw error
        }
    }

    /// The default collection's object path, unlocked: shows the unlock prompt if it is locked
    /// and prompts are allowed, else throws "locked".
    @discardableResult
    private func unlockedDefaultCollection() throws(AuthError) -> String {
        let collection = try defaultCollection()
        guard try isLocked(collection) else { return collection }
        guard promptAllowed else { throw .keyringLocked }
        let unlocked = try bus.call("unlock the keyring", timeout: promptTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.unlock(connection, object: collection, deadline)
        }
        guard unlocked else { throw .unlockDismissed }
        return collection
    }
}
