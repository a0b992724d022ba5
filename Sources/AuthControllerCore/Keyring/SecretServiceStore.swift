// SPDX-License-Identifier: Apache-2.0
/// The desktop Secret Service — gnome-keyring, KWallet, KeePassXC — or libsecret's file keyring.
/// Items live in the default collection, with the schema `io.github.authctl.Password` and the
/// attributes `service` and `account`, so `secret-tool lookup service S account A` prints the
/// stored hash.
///
/// Everything that stores, deletes, unlocks or prompts goes through libsecret, which performs the
/// prompts a service returns (KeePassXC returns one from every new item, and asks a person to
/// confirm access and deletion when set so), negotiates sessions, and serves its file keyring.
/// Reads that every script runs in loops — whether the collection is locked, whether an item
/// exists, an unlocked item's secret — take a faster path of their own and hand anything unusual
/// (a locked item, a locked collection) to libsecret.
///
/// A locked collection proves nothing about its items: KeePassXC answers a search in a locked
/// database with nothing, and may hold the search behind an unlock dialog. So the lock state is
/// read before any search, and a locked collection is not searched for a read that must not
/// prompt (see ``lockState(andContains:)``).
///
/// The Secret Service is the one on the process's session bus, as libsecret finds it
/// (`DBUS_SESSION_BUS_ADDRESS`): libsecret cannot be pointed at another bus. A test that wants a
/// keyring of its own runs the code that uses it in a process of its own, with that bus in its
/// environment.
///
/// Every call runs with its own deadline; a call that may show the unlock prompt gets
/// `promptTimeout`, any other `callTimeout`. When a deadline passes the call is cancelled,
/// which also dismisses a prompt. Each call blocks its thread until the reply comes or its
/// deadline passes: async code makes it from a thread of its own (as `authctl serve` does), not
/// on the cooperative pool.
public struct SecretServiceStore: SecretStore {
    /// Where libsecret keeps items.
    public enum Backend: Sendable, Equatable {
        /// The Secret Service on the session bus (`org.freedesktop.secrets`).
        case secretService
        /// libsecret's own file keyring (`SECRET_BACKEND=file`, and inside Flatpak and Snap
        /// sandboxes): no daemon, no lock, no prompt. libsecret takes the file's path and master
        /// password from its environment.
        case fileKeyring
    }

    /// Whether the unlock prompt may be shown (false with `--no-prompt` or without a display).
    public let promptAllowed: Bool
    /// Seconds a call that may prompt may take.
    package let promptTimeout: Double
    /// Seconds any other call may take.
    package let callTimeout: Double
    /// Where the items are.
    public let backend: Backend
    /// The bus of the reads made without libsecret: the session bus, but for tests of those reads.
    private let readBusAddress: String?
    private var bus: SessionBus { SessionBus.shared(address: readBusAddress) }

    /// A store on the session bus's Secret Service, or on libsecret's file keyring. Does not
    /// connect yet: the first call opens the connection, which this process shares with the other
    /// users of the session bus, libsecret among them.
    ///
    /// - Parameters:
    ///   - promptAllowed: whether a call that needs the keyring unlocked may show the unlock prompt;
    ///     without it such a call throws ``AuthError/keyringLocked``. A prompt the service returns
    ///     unasked (KeePassXC's for a new item) is still performed, within `callTimeout`.
    ///   - promptTimeout: how long a call that may prompt may take.
    ///   - callTimeout: how long any other call may take.
    ///   - backend: the Secret Service, or libsecret's file keyring.
    public init(promptAllowed: Bool, promptTimeout: Duration = .seconds(60), callTimeout: Duration = .seconds(5),
                backend: Backend = .secretService) {
        self.promptAllowed = promptAllowed
        self.promptTimeout = promptTimeout.seconds
        self.callTimeout = callTimeout.seconds
        self.backend = backend
        readBusAddress = nil
    }

    /// A store whose reads made without libsecret go to the bus at `busAddress`: for tests of those
    /// reads against a Secret Service of their own. Writes, unlocks and prompts still go through
    /// libsecret, on the session bus.
    init(promptAllowed: Bool, callTimeout: Double = 5, readingFrom busAddress: String) {
        self.promptAllowed = promptAllowed
        promptTimeout = 60
        self.callTimeout = callTimeout
        backend = .secretService
        readBusAddress = busAddress
    }

    // MARK: - Reads that never prompt

    /// `Service.SearchItems` by the key's attributes. Blocks until the reply or `callTimeout`;
    /// never prompts. In a locked collection only items the service still lists are found (none
    /// on KeePassXC): ``itemIsGone(_:)`` tells a missing item from one that cannot be seen.
    public func containsItem(_ key: ItemKey) throws(AuthError) -> Bool {
        if backend == .fileKeyring { return try !libsecretItems(of: key, includingTokenItems: true).isEmpty }
        let found = try search(key, leavingOutTokenItems: false)
        return !found.unlocked.isEmpty || !found.locked.isEmpty
    }

    /// The default collection's lock state, then — only when it is unlocked — one search by the
    /// key's attributes (`containsItem` is `nil` when nothing was searched). The first read of a
    /// process asks without GIO: `ReadAlias`, `Locked` at the collection's own path, and
    /// `SearchItems`, in that order.
    public func lockState(andContains key: ItemKey?) throws(AuthError) -> (locked: Bool, containsItem: Bool?) {
        if backend == .fileKeyring { return (false, try key.map { (key) throws(AuthError) in try containsItem(key) }) }
        switch try SecretServiceCalls.statusReadWithoutGIO(bus, attributes: key?.attributes, what: "read the keyring's lock state",
                                                           timeout: callTimeout) {
        case .answered(let read): return (read.locked, read.found)
        case .notMade, .refused: break
        }
        let locked = try defaultCollection().locked
        guard !locked, let key else { return (locked, nil) }
        return (false, try containsItem(key))
    }

    /// Whether the default collection is locked: `ReadAlias("default")`, then its `Locked`
    /// property at the collection's own path. Never prompts.
    public func isLocked() throws(AuthError) -> Bool {
        if backend == .fileKeyring { return false }
        return try defaultCollection().locked
    }

    /// `Service.SearchItems` by `service` (and `server`), then each item's `Attributes`; items whose
    /// `account` is not a valid ``AccountID`` are skipped. Blocks; never prompts: a locked
    /// collection is ``AuthError/keyringLockedForListing``.
    public func accounts(service: ServiceName, server: ServerURL?) throws(AuthError) -> [AccountID] {
        var query = [("service", service.rawValue)]
        if let server { query.append(("server", server.rawValue)) }
        // Password items have neither `server` nor `aws-role`; items another tool stored with an
        // account attribute that is not a valid id are skipped; duplicates another tool left
        // count once.
        var seen = Set<AccountID>()
        return try attributes(of: query).filter { $0["server"] == server?.rawValue && $0["aws-role"] == nil }
            .compactMap { $0["account"].flatMap(AccountID.init(rawValue:)) }
            .filter { seen.insert($0).inserted }
    }

    /// `Service.SearchItems` by `service` and `account`, then each item's `Attributes`: the
    /// `aws-role` of those that have one. Blocks; never prompts.
    public func awsRoles(service: ServiceName, account: AccountID) throws(AuthError) -> [String] {
        var seen = Set<String>()
        return try attributes(of: [("service", service.rawValue), ("account", account.rawValue)])
            .compactMap { $0["server"] == nil ? $0["aws-role"] : nil }
            .filter { seen.insert($0).inserted }
    }

    /// The attributes of the items a search by `query` finds, but for items deleted since the
    /// search. A locked collection is ``AuthError/keyringLockedForListing``.
    private func attributes(of query: [(String, String)]) throws(AuthError) -> [[String: String]] {
        let attributes: [[String: String]?]
        if backend == .fileKeyring {
            attributes = try libsecret("search the keyring", timeout: callTimeout) { deadline throws(GLibError) in
                try Libsecret.search(query, deadline).map(\.attributes)
            }
        } else {
            if try isLocked() { throw lockedError(listing: true) }
            let found = try bus.call("search the keyring", timeout: callTimeout) { [query] connection, deadline throws(GLibError) in
                try SecretServiceCalls.searchItems(connection, attributes: query, deadline)
            }
            // Items locked on their own (KeePassXC's, until a person allows access) show their
            // attributes in an unlocked collection: listing them needs no confirmation.
            attributes = try bus.call("read the items' attributes", timeout: callTimeout) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.itemsAttributes(connection, paths: found.unlocked + found.locked, deadline)
            }
        }
        return attributes.compactMap { $0 }
    }

    // MARK: - Reads that may prompt

    /// The item's secret: an unlocked item's through a `plain` session of authctl's own; a locked
    /// one (its collection locked, or the item asking for a confirmation of access) through
    /// libsecret, which shows the service's prompt when prompts are allowed. Blocks.
    public func secret(_ key: ItemKey) throws(AuthError) -> [UInt8]? {
        if backend == .fileKeyring {
            let items = try libsecretItems(of: key)
            guard let item = items.first else { return nil }
            return try readSecret(of: item, "read the secret of \(key)", timeout: callTimeout)
        }
        // The lock state first: a locked collection may hide its items (KeePassXC's answers an
        // empty search), or hold a search behind its unlock dialog (KeePassXC's by default).
        try unlockedDefaultCollection()
        let found: (unlocked: [String], locked: [String])
        if key.searchIsExact {
            // A token or credentials item is found exactly by its attributes: search and read in one go.
            let read = try bus.call("read the secret of \(key)", timeout: callTimeout) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.searchAndReadSecret(connection, attributes: key.attributes, deadline)
            }
            if let secret = read.secret { return secret }
            // Found unlocked but not read: deleted meanwhile (by another authctl, say).
            if !read.found.unlocked.isEmpty { return nil }
            found = read.found
        } else {
            found = try search(key)
            if let path = found.unlocked.first {
                // `nil`: deleted since the search, so not there.
                return try bus.callUnlessGone("read the secret of \(key)", timeout: callTimeout) { connection, deadline throws(GLibError) in
                    try SecretServiceCalls.secret(connection, item: path, deadline)
                }
            }
        }
        // Nothing found in an unlocked collection: there is nothing.
        if found.locked.isEmpty { return nil }
        // Locked on its own: the item asks a person to confirm access (KeePassXC's).
        guard promptAllowed else { throw .accessNeedsConfirmation(key) }
        let path = found.locked[0]
        try unlockItem(at: path, of: key)
        return try bus.callUnlessGone("read the secret of \(key)", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.secret(connection, item: path, deadline)
        }
    }

    /// Asks the service to unlock one item through libsecret, which shows its prompt (KeePassXC's
    /// confirmation of access): a dismissed prompt is "not confirmed", a deadline a deadline.
    private func unlockItem(at path: String, of key: ItemKey) throws(AuthError) {
        let unlocked = try libsecret("unlock the item of \(key)", timeout: promptTimeout) { deadline throws(GLibError) in
            try Libsecret.unlock(path, deadline)
        }
        guard unlocked else { throw .accessNotConfirmed(key) }
    }

    // MARK: - Writes

    /// Stores the secret through libsecret as a new item of the default collection (at its own
    /// object path), then finds it again by its attributes and reads its secret back: a service
    /// that accepted the item but kept nothing is an error here, before the caller changes
    /// anything else. Then every other item of the key is deleted: exactly one item per key,
    /// without `CreateItem`'s `replace`, which services read differently (gnome-keyring and KWallet
    /// replace an item whose attributes include the new ones, KWallet dropping the rest; KeePassXC
    /// 2.7.4 asks a person before it replaces another program's item). libsecret's file keyring
    /// replaces an item of the same attributes itself. Blocks; unlocks the collection first, which
    /// may prompt.
    public func store(_ secret: [UInt8], contentType: String, for key: ItemKey, label: String) throws(AuthError) {
        let timeout = promptAllowed ? promptTimeout : callTimeout
        let created: String?
        if backend == .fileKeyring {
            // What a write whose deadline passed is undone to: the file keyring replaces in place.
            let previous = try? self.secret(key)
            do {
                try replace(key, with: secret, contentType: contentType, label: label, in: nil, timeout: timeout)
            } catch {
                if case .temporaryFailure = error,
                   !undoLateStore(of: key, written: secret, previous: previous, contentType: contentType, label: label) {
                    throw Self.mayStillHappen("store the secret of \(key)", after: error)
                }
                throw error
            }
            created = nil
        } else {
            let collection = try unlockedDefaultCollection()
            do {
                created = try libsecret("store the secret of \(key)", timeout: timeout) { deadline throws(GLibError) in
                    try Libsecret.createItem(secret, contentType: contentType, schema: key.schema, attributes: key.attributes,
                                             collection: collection, label: label, deadline)
                }
            } catch {
                if case .temporaryFailure = error,
                   !undoLateStore(of: key, written: secret, previous: nil, contentType: contentType, label: label) {
                    throw Self.mayStillHappen("store the secret of \(key)", after: error)
                }
                throw error
            }
        }
        let items = try libsecretItems(of: key)
        // Whatever the service made of a new item that is not kept, it goes: a failed write changes nothing.
        func removeCreated() {
            for item in items where created != nil && item.path == created {
                _ = try? libsecret("delete the item of \(key)", timeout: callTimeout) { deadline throws(GLibError) in try Libsecret.delete(item, deadline) }
            }
        }
        // The item created is looked for at its path first. Any other item of the key holding
        // what was written will do too: the key then holds the secret, whatever path the
        // service reports for it (KWallet, on a loaded machine, once listed bob's new item
        // without the path its CreateItem had answered).
        let candidates = items.filter { created == nil || $0.path == created } + items.filter { created != nil && $0.path != created }
        var kept: Libsecret.Item?
        let ownAttributes = Dictionary(uniqueKeysWithValues: key.attributes)
        func isOwn(_ item: Libsecret.Item) -> Bool {
            item.path == created || item.attributes.filter { $0.key != SecretServiceCalls.schemaAttribute } == ownAttributes
        }
        for item in candidates where !item.locked && isOwn(item) && kept == nil {
            // A read that fails is that error, not an item that was not kept.
            let stored: [UInt8]
            do {
                stored = try readSecret(of: item, "read back the secret of \(key)", timeout: callTimeout)
            } catch {
                removeCreated()
                throw error
            }
            if stored == secret { kept = item }
        }
        guard let kept else {
            removeCreated()
            let found = items.isEmpty ? "no item of it was found" : "\(items.count) item(s) of it were found, none unlocked and holding what was written"
                + (items.contains { $0.path == created } ? "" : " (none at the path the service answered)")
            throw .unavailable("the Secret Service accepted the item of \(key) but did not keep it; nothing was changed — check that its collection takes new items (KeePassXC: a group exposed to other programs)",
                               detail: "after the write, \(found)")
        }
        for duplicate in items where duplicate.path != kept.path || duplicate.attributes != kept.attributes {
            try libsecret("delete another item of \(key)", timeout: timeout) { deadline throws(GLibError) in
                try Libsecret.delete(duplicate, deadline)
            }
        }
        // The file keyring deletes by attributes: a duplicate whose attributes are a part of the
        // kept item's took that one along. Stored again, it is the one item.
        if backend == .fileKeyring, items.count > 1, try libsecretItems(of: key).isEmpty {
            try replace(key, with: secret, contentType: contentType, label: label, in: nil, timeout: callTimeout)
        }
    }

    /// Deletes every item of the key through libsecret, which performs any prompt the service
    /// returns (a confirmation of deletion). Blocks; unlocks the collection first when it is
    /// locked and may hold something, which may prompt.
    public func deleteItem(_ key: ItemKey) throws(AuthError) -> Bool {
        if backend == .secretService {
            // Asked first: without a default collection this is 69, not a silent "nothing to delete".
            let collection = try defaultCollection()
            let found = try search(key)
            if found.unlocked.isEmpty && found.locked.isEmpty && !collection.locked { return false }
            try unlocked(collection)
        }
        var items = try libsecretItems(of: key)
        if items.contains(where: \.locked) {
            // Items locked on their own ask a person to confirm access, deleting them too.
            guard promptAllowed else { throw .accessNeedsConfirmation(key) }
            for item in items where item.locked { if let path = item.path { try unlockItem(at: path, of: key) } }
            items = try libsecretItems(of: key)
            if items.contains(where: \.locked) { throw .accessNotConfirmed(key) }
        }
        for item in items {
            // Read first, so that a delete carried out after its deadline can be undone.
            let saved = item.locked ? nil : try readSecret(of: item, "read the item of \(key)", timeout: callTimeout)
            do {
                try libsecret("delete the item of \(key)", timeout: promptAllowed ? promptTimeout : callTimeout) { deadline throws(GLibError) in
                    try Libsecret.delete(item, deadline)
                }
            } catch {
                if case .temporaryFailure = error, let saved, !undoLateDelete(of: key, saved: saved, label: item.label) {
                    throw Self.mayStillHappen("delete the item of \(key)", after: error)
                }
                throw error
            }
        }
        return !items.isEmpty
    }

    /// Unlocks the default collection if it is locked, through libsecret: blocks while the
    /// prompt is shown, up to `promptTimeout`. Throws ``AuthError/keyringLocked`` when prompts
    /// are not allowed and ``AuthError/unlockDismissed`` when the prompt is dismissed.
    public func unlock() throws(AuthError) {
        if backend == .fileKeyring { return }
        try unlockedDefaultCollection()
    }

    // MARK: - Writes whose deadline passed

    // A write whose deadline passed may still be carried out by the service after authctl stopped
    // waiting (gnome-keyring finishes what it was asked), so it is undone, and "nothing was
    // changed" stays true. The undo's calls go out on the connection the write went out on (GIO's
    // shared session bus connection, libsecret's too), after it: the service answers a
    // connection's calls in order, so the undo sees the write if the write was made at all. It is
    // best effort, with a deadline of its own of at least 5 s: its failure leaves the first error.

    /// Deletes the item holding `written`, or where the write replaced an item (the file keyring's),
    /// puts `previous` back.
    private func undoLateStore(of key: ItemKey, written: [UInt8], previous: [UInt8]?, contentType: String, label: String) -> Bool {
        let timeout = max(callTimeout, 5)
        guard let items = try? libsecretItems(of: key, timeout: timeout) else { return false }
        for item in items where !item.locked {
            guard let stored = try? readSecret(of: item, "undo a late write", timeout: timeout) else { return false }
            guard stored == written else { continue }
            let undone: Void?
            if let previous {
                undone = try? replace(key, with: previous, contentType: contentType, label: label, in: undoCollection(), timeout: timeout)
            } else {
                undone = try? libsecret("undo a late write", timeout: timeout) { deadline throws(GLibError) in try Libsecret.delete(item, deadline) }
            }
            if undone == nil { return false }
        }
        return true
    }

    /// Stores `saved` again when the key has no item left.
    private func undoLateDelete(of key: ItemKey, saved: [UInt8], label: String) -> Bool {
        let timeout = max(callTimeout, 5)
        guard let remaining = try? libsecretItems(of: key, timeout: timeout) else { return false }
        guard remaining.isEmpty else { return true }
        let undone: Void? = try? replace(key, with: saved, contentType: key.holdsJSON ? "application/json" : "text/plain",
                                         label: label, in: undoCollection(), timeout: timeout)
        return undone != nil
    }

    /// Stores `secret` as the key's item through libsecret's password API, which lets the service
    /// replace an item of the same attributes: the file keyring's write, and what an undo puts back.
    /// `collection`: the default collection's own path; `nil` for the file keyring.
    private func replace(_ key: ItemKey, with secret: [UInt8], contentType: String, label: String, in collection: String?,
                         timeout: Double) throws(AuthError) {
        try libsecret("store the secret of \(key)", timeout: timeout) { deadline throws(GLibError) in
            try Libsecret.store(secret, contentType: contentType, schema: key.schema, attributes: key.attributes, collection: collection,
                                label: label, deadline)
        }
    }

    /// A write whose deadline passed and whose undo could not be confirmed: the service may still
    /// carry it out, and saying "nothing was changed" would not be true.
    private static func mayStillHappen(_ what: String, after error: AuthError) -> AuthError {
        .temporaryFailure("could not \(what): the Secret Service did not answer in time, and may still carry it out when it does; check in a moment whether it did",
                          detail: error.detail)
    }

    /// The program that serves the Secret Service, asked only when a message needs its advice:
    /// a fix names the program a person runs (KWallet Manager, KeePassXC's settings, Seahorse).
    /// gnome-keyring's advice when it cannot be told.
    private func implementation() -> SecretServiceImplementation {
        SecretServiceImplementation.owner(on: bus, timeout: callTimeout)?.implementation ?? .gnomeKeyring
    }

    /// "Locked", with the advice that fits the program that serves the Secret Service (KWallet
    /// reports its wallet locked after every login until a program asks it to unlock).
    private func lockedError(listing: Bool = false) -> AuthError {
        let owner = implementation()
        if listing { return .unavailable("the keyring is locked, so account ids cannot be listed; \(owner.unlockAdvice) and try again") }
        return .unavailable("the keyring is locked and no unlock prompt can be shown; \(owner.unlockAdvice), or \(hint: .allowUnlockPrompt)")
    }

    /// No default collection, with the advice that fits the program that serves the Secret
    /// Service (KWallet offers a wallet made at login only after it restarts; KeePassXC only
    /// once a group is exposed).
    private func noDefaultCollectionError() -> AuthError {
        .unavailable("the Secret Service has no default collection; \(implementation().collectionAdvice), or run \(hint: .sandbox)")
    }

    /// The default collection's own path for an undo (libsecret would otherwise write through the
    /// alias); `nil` for the file keyring, or when it cannot be read, which leaves the alias.
    private func undoCollection() -> String? {
        backend == .fileKeyring ? nil : try? defaultCollection().path
    }

    // MARK: - Steps

    /// The default collection's own object path and whether it is locked: `ReadAlias("default")`
    /// — the first call on a connection is a method call, which gnome-keyring needs to set up a
    /// new caller before any property read — asked once more when it answers `/` (gnome-keyring
    /// now and then does, under load), then `Locked` at that path, never at the alias's.
    private func defaultCollection() throws(AuthError) -> (path: String, locked: Bool) {
        for attempt in 1...2 {
            let path = try bus.call("find the default collection", timeout: callTimeout) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.readAlias(connection, "default", deadline)
            }
            guard let path else { continue }
            let locked = try bus.callUnlessGone("read the keyring's lock state", timeout: callTimeout) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.collectionIsLocked(connection, path: path, deadline)
            }
            // Deleted between the two calls: the alias is read again.
            if let locked { return (path, locked) }
            if attempt == 2 { break }
        }
        throw noDefaultCollectionError()
    }

    /// The default collection's object path, unlocked: libsecret shows the unlock prompt if it is
    /// locked and prompts are allowed, else this throws "locked".
    @discardableResult
    private func unlockedDefaultCollection() throws(AuthError) -> String {
        try unlocked(try defaultCollection())
    }

    /// `collection` (as ``defaultCollection()`` read it), unlocked as ``unlockedDefaultCollection()`` does.
    @discardableResult
    private func unlocked(_ collection: (path: String, locked: Bool)) throws(AuthError) -> String {
        guard collection.locked else { return collection.path }
        guard promptAllowed else { throw lockedError() }
        let unlocked = try libsecret("unlock the keyring", timeout: promptTimeout) { deadline throws(GLibError) in
            try Libsecret.unlock(collection.path, deadline)
        }
        guard unlocked else { throw .unlockDismissed }
        return collection.path
    }

    /// `SearchItems` by the key's attributes alone (not the schema), so items another tool
    /// stored with those attributes are found. Never prompts.
    ///
    /// A search by `service` and `account` also matches that account's token items, which add
    /// a `server` attribute; for a password key those are left out, at the cost of one more
    /// (pipelined) round trip when anything was found. An item deleted between the search and
    /// that round trip is left out too.
    private func search(_ key: ItemKey, leavingOutTokenItems: Bool = true) throws(AuthError) -> (unlocked: [String], locked: [String]) {
        let found = try bus.call("search the keyring", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.searchItems(connection, attributes: key.attributes, deadline)
        }
        guard leavingOutTokenItems, !key.searchIsExact, !(found.unlocked.isEmpty && found.locked.isEmpty) else { return found }
        let paths = found.unlocked + found.locked
        let attributes = try bus.call("read the items' attributes", timeout: callTimeout) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.itemsAttributes(connection, paths: paths, deadline)
        }
        let leftOut = Set(zip(paths, attributes).filter { $0.1.map { !key.isKey(of: $0) } ?? true }.map(\.0))
        // authctl's own items first: a read takes the first, and another tool's item with the same
        // attributes (not a hash, say) must not hide the account's own.
        let own = Set(zip(paths, attributes).filter { $0.1?[SecretServiceCalls.schemaAttribute] == key.schema }.map(\.0))
        func ordered(_ list: [String]) -> [String] {
            let kept = list.filter { !leftOut.contains($0) }
            return kept.filter { own.contains($0) } + kept.filter { !own.contains($0) }
        }
        return (ordered(found.unlocked), ordered(found.locked))
    }

    /// The key's items as libsecret finds them (by attributes alone); never prompts. A password
    /// key's search leaves out the account's token items.
    private func libsecretItems(of key: ItemKey, includingTokenItems: Bool = false, timeout: Double? = nil) throws(AuthError) -> [Libsecret.Item] {
        let found = try libsecret("search the keyring", timeout: timeout ?? callTimeout) { deadline throws(GLibError) in
            try Libsecret.search(key.attributes, deadline)
        }
        return found.filter { includingTokenItems || key.isKey(of: $0.attributes) }
    }

    /// Runs a libsecret call under its deadline, after making sure the session bus's connection
    /// has made a method call to the Secret Service (see ``defaultCollection()``): libsecret's
    /// first message is a property read. When no prompt may be shown, a call whose deadline
    /// passed while libsecret showed one (the service returned it unasked, as KeePassXC's
    /// confirmations) waited for a person: that is "the keyring asks a person to confirm", not a
    /// slow keyring.
    private func libsecret<T>(_ what: String, timeout: Double, _ body: @escaping (Deadline) throws(GLibError) -> T) throws(AuthError) -> T {
        try Libsecret.load()
        if backend == .secretService {
            if !bus.hasCalledSecretService { _ = try defaultCollection() }
            // Counted on libsecret's connection, the session bus's shared one, from its first use on.
            Libsecret.watchPrompts(on: try SessionBus.shared(address: nil).connection(timeout: callTimeout))
        }
        // libsecret's file keyring is read once per process and kept: another process's writes since
        // would go unseen, and this process's would overwrite them. Read afresh for every call.
        if backend == .fileKeyring { Libsecret.disconnect() }
        var sentAgain = false
        while true {
            let promptsBefore = Libsecret.promptsShown
            let deadline = Deadline(seconds: timeout)
            switch Libsecret.bounded(by: timeout + Self.abandonAfter, { () throws(GLibError) in try body(deadline) }) {
            case .some(.success(let value)):
                return value
            case .some(.failure(let error)):
                // A Secret Service that restarted since libsecret met it: libsecret still calls the
                // old one (serve and apps outlive a keyring's restart); or a session KWallet
                // refused. Once more, on a fresh start; the call was not carried out, so nothing
                // was done twice.
                if (error.isNoOwner || error.isRefusedSession) && !sentAgain && backend == .secretService {
                    sentAgain = true
                    Libsecret.disconnect()
                    continue
                }
                // A prompt authctl may show is the person's to answer within the call's deadline:
                // past it, a deadline (75) like any other.
                if deadline.expired && Libsecret.promptsShown != promptsBefore && !promptAllowed {
                    throw .confirmationAwaited(while: what)
                }
                if error.isSecretServiceLocked { throw promptAllowed ? .unlockDismissed : lockedError() }
                throw ErrorMap.authError(error, from: .secretService, while: what, deadline: deadline)
            case .none:
                throw ErrorMap.wentAway(on: .secretService, while: what)
            }
        }
    }

    /// The secret of `item`, read through libsecret. libsecret's encrypted session with KWallet
    /// fails about one key exchange in a hundred: KWallet refuses it (see `isRefusedSession`),
    /// or the two sides derive different keys (a Diffie-Hellman value with a leading zero byte is
    /// read shorter on one side than on the other) and every read on that session comes back
    /// undecodable. So such a read is made once more on a new session, the item found again at
    /// its path through a service object of its own (an item keeps the session it was found
    /// with). A read changes nothing, so nothing is done twice.
    private func readSecret(of item: Libsecret.Item, _ what: String, timeout: Double) throws(AuthError) -> [UInt8] {
        try libsecret(what, timeout: timeout) { deadline throws(GLibError) in
            do throws(GLibError) {
                return try Libsecret.secret(of: item, deadline)
            } catch {
                guard error.isSecretServiceProtocolError || error.isRefusedSession, let path = item.path else { throw error }
                return try Libsecret.secret(ofItemAt: path, deadline)
            }
        }
    }

    /// How long past its deadline a libsecret call is waited for before it is abandoned: libsecret
    /// stops heeding the cancellation once the service behind a prompt has gone.
    private static let abandonAfter = 1.0
}

extension AuthError {
    /// An item that asks a person to confirm access (KeePassXC's "confirm access"), while no
    /// prompt may be shown: ``unavailable(_:detail:)-enum.case``.
    static func accessNeedsConfirmation(_ key: ItemKey) -> AuthError {
        .unavailable("the keyring asks a person to confirm access to the item of \(key), and no prompt can be shown; allow access when it asks, or turn the confirmation off in the keyring's settings, or \(hint: .allowUnlockPrompt)")
    }

    /// The confirmation of access to an item was refused: ``denied(_:)-enum.case``.
    static func accessNotConfirmed(_ key: ItemKey) -> AuthError {
        .denied("access to the keyring item of \(key) was not confirmed; nothing was changed")
    }

    /// A call that waited past its deadline for a person to answer a prompt the service showed
    /// unasked (KeePassXC's confirmations of access and deletion): ``unavailable(_:detail:)-enum.case``.
    static func confirmationAwaited(while what: String) -> AuthError {
        .unavailable("could not \(what): the keyring asks a person to confirm (access, deletion), and nobody did in time; nothing was changed — confirm it when asked, or turn the confirmations off in the keyring's settings")
    }
}
