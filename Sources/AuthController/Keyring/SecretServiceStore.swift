internal import CLibsecret

/// The desktop Secret Service (GNOME Keyring) through libsecret. Items live in the default
/// collection, with the schema `io.github.authctl.Password` and the attributes `service` and
/// `account`, so `secret-tool lookup service S account A` prints the stored hash.
///
/// Every libsecret call runs with its own deadline; a call that may show the unlock prompt
/// gets ``promptTimeout``, any other ``callTimeout``. When a deadline passes the call is
/// cancelled, which also dismisses a prompt.
public struct SecretServiceStore: SecretStore {
    /// Whether the unlock prompt may be shown (false with `--no-prompt` or without a display).
    public let promptAllowed: Bool
    /// Seconds a call that may prompt may take.
    public let promptTimeout: Double
    /// Seconds any other call may take.
    public let callTimeout: Double

    public init(promptAllowed: Bool, promptTimeout: Double = 60, callTimeout: Double = 5) {
        self.promptAllowed = promptAllowed
        self.promptTimeout = promptTimeout
        self.callTimeout = callTimeout
    }

    // Reads that need no secret go straight to D-Bus: one round trip each, never a prompt.

    public func containsItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool {
        let bus = try sessionBus()
        let found = try call("search the keyring") { (deadline) throws(GLibError) in
            try SecretServiceCalls.searchItems(bus, attributes: Self.attributes(service, account), deadline)
        }
        return !found.unlocked.isEmpty || !found.locked.isEmpty
    }

    public func isLocked() throws(AuthError) -> Bool {
        let bus = try sessionBus()
        return try call("read the keyring's lock state", missingObject: Self.noDefaultCollection) { (deadline) throws(GLibError) in
            try SecretServiceCalls.collectionIsLocked(bus, path: SecretServiceCalls.defaultCollectionPath, deadline)
        }
    }

    public func secret(service: ServiceName, account: AccountID) throws(AuthError) -> String? {
        try unlockIfLocked()
        let bus = try sessionBus()
        let found = try call("search the keyring") { (deadline) throws(GLibError) in
            try SecretServiceCalls.searchItems(bus, attributes: Self.attributes(service, account), deadline)
        }
        guard let path = found.unlocked.first else {
            if found.locked.isEmpty { return nil }
            throw Self.locked  // in another, locked collection
        }
        let bytes = try call("read the password hash") { (deadline) throws(GLibError) in
            try SecretServiceCalls.secret(bus, item: path, deadline)
        }
        // A secret that is not text reads as empty: the hasher then refuses it, and the user
        // is told to `forget` it.
        return String(validating: bytes, as: UTF8.self) ?? ""
    }

    public func store(_ secret: String, service: ServiceName, account: AccountID, label: String) throws(AuthError) {
        let secretService = try connect()
        let collection = try unlockDefaultCollection(secretService)
        let items = try search(secretService, service, account, flags: SECRET_SEARCH_ALL)
        if let existing = items.first {
            try call("store the password hash") { (deadline) throws(GLibError) in
                try Libsecret.itemSetSecret(existing, secret: secret, deadline)
            }
            // Never two items for one pair: drop duplicates another tool may have left.
            for duplicate in items.dropFirst() {
                try call("delete a duplicate item") { (deadline) throws(GLibError) in try Libsecret.itemDelete(duplicate, deadline) }
            }
        } else {
            try call("store the password hash") { (deadline) throws(GLibError) in
                try Libsecret.itemCreate(in: collection, attributes: Self.attributes(service, account), label: label,
                                         secret: secret, deadline)
            }
        }
    }

    public func deleteItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool {
        // Asked first: without a default collection this is 69, not a silent "nothing to delete".
        let locked = try isLocked()
        let secretService = try connect()
        let items = try search(secretService, service, account, flags: SECRET_SEARCH_ALL)
        guard !items.isEmpty else { return false }
        if locked { try unlockDefaultCollection(secretService) }
        for item in items {
            try call("delete the password hash") { (deadline) throws(GLibError) in try Libsecret.itemDelete(item, deadline) }
        }
        return true
    }

    public func accounts(service: ServiceName) throws(AuthError) -> [AccountID] {
        if try isLocked() { throw Self.lockedForListing }
        let bus = try sessionBus()
        let found = try call("search the keyring") { (deadline) throws(GLibError) in
            try SecretServiceCalls.searchItems(bus, attributes: ["service": service.rawValue], deadline)
        }
        if !found.locked.isEmpty { throw Self.lockedForListing }
        let attributes = try call("read the items' attributes") { (deadline) throws(GLibError) in
            try SecretServiceCalls.itemsAttributes(bus, paths: found.unlocked, deadline)
        }
        // Items another tool stored with an account attribute that is not a valid id are skipped.
        return attributes.compactMap { $0["account"].flatMap(AccountID.init(rawValue:)) }
    }

    // MARK: - Steps

    private static let locked = AuthError.unavailable(
        "the keyring is locked and no unlock prompt can be shown; unlock the login keyring (e.g. in Seahorse), or run in a desktop session without --no-prompt")
    private static let noDefaultCollection = AuthError.unavailable(
        "the Secret Service has no default collection; create one (e.g. a \"Login\" keyring in Seahorse), or run in `authctl sandbox`")
    private static let lockedForListing = AuthError.unavailable(
        "the keyring is locked, so account ids cannot be listed; unlock the login keyring (e.g. in Seahorse) and try again")

    private static func attributes(_ service: ServiceName, _ account: AccountID) -> KeyValuePairs<String, String> {
        ["service": service.rawValue, "account": account.rawValue]
    }

    /// The session bus (GIO's shared connection, which libsecret uses too).
    private func sessionBus() throws(AuthError) -> GDBus.Connection {
        do throws(GLibError) {
            return try GDBus.busGet(Deadline(seconds: callTimeout))
        } catch {
            throw .unavailable("no session bus (\(error.message)); run inside a desktop session, under `dbus-run-session`, or in `authctl sandbox`",
                               detail: error.debugDescription)
        }
    }

    /// Connects to the session bus and the Secret Service, for calls that move secrets.
    private func connect() throws(AuthError) -> Libsecret.Service {
        _ = try sessionBus()
        return try call("connect to the Secret Service") { (deadline) throws(GLibError) in try Libsecret.serviceGet(deadline) }
    }

    private func search(_ secretService: Libsecret.Service, _ service: ServiceName, _ account: AccountID,
                        flags: SecretSearchFlags) throws(AuthError) -> [Libsecret.Item] {
        try call("search the keyring") { (deadline) throws(GLibError) in
            try Libsecret.serviceSearch(secretService, attributes: Self.attributes(service, account), flags: flags, deadline)
        }
    }

    private func defaultCollection(_ secretService: Libsecret.Service) throws(AuthError) -> Libsecret.Collection {
        let collection = try call("find the default collection") { (deadline) throws(GLibError) in
            try Libsecret.collectionForAlias(secretService, alias: "default", deadline)
        }
        guard let collection else { throw Self.noDefaultCollection }
        return collection
    }

    public func unlock() throws(AuthError) {
        try unlockIfLocked()
    }

    /// Unlocks the default collection if it is locked (showing the prompt if allowed); costs
    /// one round trip when it is not.
    private func unlockIfLocked() throws(AuthError) {
        guard try isLocked() else { return }
        try unlockDefaultCollection(try connect())
    }

    /// Makes sure the default collection is unlocked, showing the unlock prompt if allowed.
    @discardableResult
    private func unlockDefaultCollection(_ secretService: Libsecret.Service) throws(AuthError) -> Libsecret.Collection {
        let collection = try defaultCollection(secretService)
        guard Libsecret.collectionIsLocked(collection) else { return collection }
        guard promptAllowed else { throw Self.locked }
        let unlocked = try call("unlock the keyring", timeout: promptTimeout) { (deadline) throws(GLibError) in
            try Libsecret.serviceUnlock(secretService, collection, deadline)
        }
        guard unlocked > 0 else { throw .denied("the keyring unlock prompt was dismissed; the keyring stays locked") }
        return collection
    }

    /// Runs one libsecret call under its own deadline and maps its error.
    /// - Parameter missingObject: what a "no such object" answer means for this call.
    private func call<T>(_ what: String, timeout: Double? = nil, missingObject: AuthError? = nil,
                         _ body: (Deadline) throws(GLibError) -> T) throws(AuthError) -> T {
        let deadline = Deadline(seconds: timeout ?? callTimeout)
        do {
            return try body(deadline)
        } catch {
            if let missingObject, let name = error.remoteName, Self.missingObjectErrors.contains(name) { throw missingObject }
            throw Self.authError(error, deadline: deadline, while: what)
        }
    }

    private static let missingObjectErrors: Set<String> = [
        "org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject",
        "org.freedesktop.DBus.Error.UnknownMethod",
    ]

    /// The one mapping from a GLib error of the Secret Service to an ``AuthError``.
    static func authError(_ error: GLibError, deadline: Deadline, while what: String) -> AuthError {
        let detail = error.debugDescription
        if error.isCancelled || (error.domain == .io && error.code == Int32(G_IO_ERROR_TIMED_OUT.rawValue)) {
            return .temporaryFailure("could not \(what): the Secret Service did not answer within \(formatSeconds(deadline.seconds)) s; nothing was changed — try again, or raise --keyring-timeout",
                                     detail: detail)
        }
        switch error.remoteName {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
             "org.freedesktop.DBus.Error.Spawn.ServiceNotFound", "org.freedesktop.DBus.Error.Spawn.ChildExited":
            return .unavailable("no Secret Service on the session bus; start gnome-keyring-daemon (Debian package gnome-keyring), or run in `authctl sandbox`",
                                detail: detail)
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected",
             "org.freedesktop.DBus.Error.TimedOut", "org.freedesktop.DBus.Error.Timeout":
            return .temporaryFailure("could not \(what): the Secret Service went away mid-call; nothing was changed — try again",
                                     detail: detail)
        case "org.freedesktop.Secret.Error.IsLocked":
            return locked
        default:
            break
        }
        if error.domain == .secret && error.code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) { return locked }
        if error.domain == .dbus && [G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER].map({ Int32($0.rawValue) }).contains(error.code) {
            return .unavailable("no Secret Service on the session bus; start gnome-keyring-daemon (Debian package gnome-keyring), or run in `authctl sandbox`",
                                detail: detail)
        }
        if (error.domain == .dbus && [G_DBUS_ERROR_NO_REPLY, G_DBUS_ERROR_DISCONNECTED, G_DBUS_ERROR_TIMED_OUT, G_DBUS_ERROR_TIMEOUT].map({ Int32($0.rawValue) }).contains(error.code))
            || (error.domain == .io && [G_IO_ERROR_CLOSED, G_IO_ERROR_BROKEN_PIPE, G_IO_ERROR_CONNECTION_CLOSED].map({ Int32($0.rawValue) }).contains(error.code)) {
            return .temporaryFailure("could not \(what): the Secret Service went away mid-call; nothing was changed — try again",
                                     detail: detail)
        }
        return .unavailable("could not \(what): \(error.message)", detail: detail)
    }
}

/// `5` rather than `5.0`, `0.5` as is.
func formatSeconds(_ seconds: Double) -> String {
    seconds == seconds.rounded() && abs(seconds) < 1e15 ? String(Int64(seconds)) : String(seconds)
}
