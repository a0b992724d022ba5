import FoundationEssentials
import Synchronization

/// Signs accounts in and out of one service.
///
/// The password hash of each account lives in a ``SecretStore`` (the desktop Secret Service),
/// the signed-in account in a ``SettingsStore`` (the settings file), and every change of login
/// status is handed to the controller's ``LoginEventObserver``s (an app's `NotificationCenter`),
/// yielded to ``events()`` streams, and broadcast by an ``EventBroadcaster`` (a D-Bus signal).
///
/// Changes happen under the settings lock, so concurrent processes never lose an update and
/// their events are broadcast in the order of the changes. Argon2 runs outside the lock.
/// A failed operation changes nothing.
public final class AuthController: Sendable {
    /// The service this controller acts on.
    public let service: ServiceName
    /// Seconds each request to a token server may take.
    public let serverTimeout: Double
    let keyring: any SecretStore
    let settings: any SettingsStore
    private let hasher: any PasswordHasher
    private let broadcaster: any EventBroadcaster
    private let observers: [any LoginEventObserver]
    let clock: @Sendable () -> UInt64
    private let subscribers = Mutex<(next: Int, continuations: [Int: AsyncStream<LoginEvent>.Continuation])>((0, [:]))
    /// Makes the token client of a binding (bound services only).
    let tokenClients: @Sendable (ServerBinding) -> any TokenClient
    /// The refresh of this controller's service in flight in this process, if any.
    let refreshes = RefreshFlight()

    /// A controller made of the given parts; ``desktop(service:environment:prompting:keyringTimeout:serverTimeout:busAddress:observers:)``
    /// wires the desktop's own in one call.
    ///
    /// - Parameters:
    ///   - service: the service whose accounts this controller signs in and out.
    ///   - keyring: where password hashes and tokens are kept (``SecretServiceStore`` on the desktop).
    ///   - settings: where the signed-in account is recorded (``KeyFileSettingsStore`` on the desktop).
    ///   - hasher: how passwords are hashed and checked; Argon2id with the default parameters.
    ///   - broadcaster: who tells other processes of each event (``DBusBroadcaster`` on the desktop).
    ///   - observers: who hears each event in this process, after it is stored and broadcast
    ///     (an app that imports `AuthController` passes its `NotificationCenter` through the
    ///     initialiser that takes one).
    ///   - tokenTransport: how to reach token servers (bound services); `nil` for a
    ///     controller of local accounts only.
    ///   - serverTimeout: seconds each request to a token server may take.
    ///   - clock: microseconds since the Unix epoch.
    public init(service: ServiceName = .standard, keyring: any SecretStore, settings: any SettingsStore,
                hasher: any PasswordHasher = Argon2idHasher(), broadcaster: any EventBroadcaster,
                observers: [any LoginEventObserver], tokenTransport: (any HTTPTransport)? = nil,
                serverTimeout: Double = 10, clock: @escaping @Sendable () -> UInt64 = AuthController.systemClock) {
        self.tokenClients = { binding in
            guard let tokenTransport else { return UnreachableTokenClient() }
            return makeTokenClient(for: binding, transport: tokenTransport, timeout: serverTimeout, clock: clock)
        }
        self.serverTimeout = serverTimeout
        self.service = service
        self.keyring = keyring
        self.settings = settings
        self.hasher = hasher
        self.broadcaster = broadcaster
        self.observers = observers
        self.clock = clock
    }

    /// The version of authctl, as `--version` and the token client's `User-Agent` give it.
    public static let version = "0.2.0"

    /// Microseconds since the Unix epoch, from the system's real-time clock.
    public static let systemClock: @Sendable () -> UInt64 = { Posix.wallClockMicroseconds() }

    // MARK: - The original API

    /// Signs `user` in: enrols a new account, or verifies the password of a known one.
    /// `user.email` is the account id. Blocks for the hashing time; may prompt to unlock.
    public func signIn(_ user: User, password: String) throws {
        try signIn(account: AccountID(validating: user.email), name: DisplayName.validate(user.name),
                   password: Password(password))
    }

    /// Signs the current account out and deletes its stored hash.
    public func signOut() throws {
        try signOut(keepingCredentials: false)
    }

    /// Whether someone is signed in (the settings name a user whose keyring item exists).
    /// Never prompts; `false` when that cannot be found out.
    public var isSignedIn: Bool { (try? status().isSignedIn) ?? false }

    /// The signed-in user, or `nil`. Never prompts.
    public var currentUser: User? {
        guard let status = try? status(), let user = status.user else { return nil }
        return User(name: status.name ?? "", email: user.rawValue)
    }

    // MARK: - Operations

    /// Signs `account` in. If it has a stored hash the password must match it (else
    /// ``AuthError/denied(_:)``); otherwise a new hash is stored (enrolment). A hash with
    /// parameters weaker than the defaults is upgraded. Emits `signed-in` (reason `sign-in`),
    /// or `signed-out` + `signed-in` (reason `switch`) when another account was signed in,
    /// or nothing when `account` already was.
    @discardableResult
    public func signIn(account: AccountID, name: String, password: Password) throws(AuthError) -> ChangeOutcome {
        try refuseIfBound("signIn(account:name:password:register:binding:)")
        return try signInLocally(account: account, name: name, password: password)
    }

    func signInLocally(account: AccountID, name: String, password: Password) throws(AuthError) -> ChangeOutcome {
        // Settings problems (78, 74) are reported before keyring ones.
        _ = try settings.read(service: service)
        // Any unlock prompt comes now, before the settings lock is taken.
        try keyring.unlock()
        // Argon2 is slow by design: do it before taking the lock, then check under the lock
        // that the keyring still holds what was verified.
        let seen = try keyring.secret(service: service, account: account)
        var plan = try plan(signingIn: account, password: password, stored: seen)
        return try change { (read, record) throws(AuthError) -> Change in
            let stored = try keyring.secret(service: service, account: account)
            if stored != seen { plan = try self.plan(signingIn: account, password: password, stored: stored) }
            var change = Change()
            let previous = record.user
            if previous == account && read.corruption == nil {
                // Already signed in: nothing to record, but a weak hash is still upgraded.
                if let upgrade = plan.hashToStore {
                    do throws(AuthError) {
                        try keyring.store(upgrade, service: service, account: account, label: label(for: account))
                    } catch {
                        change.warnings.append(upgradeFailedNote(error))
                    }
                }
                return change
            }
            // Every read that can fail, and the numbering of the events, before the first write.
            let now = clock()
            if let previous {
                change.events.append(try event(.signedOut, previous, .switch, name: record.name ?? "", at: now, after: record.sequence))
            }
            change.events.append(try event(.signedIn, account, previous == nil ? .signIn : .switch, name: name, at: now,
                                           after: record.sequence, skipping: change.events.count, previousUser: previous))
            change.record = SessionRecord(user: account, name: name, signedInAt: Timestamp.rfc3339(microseconds: now),
                                          sequence: change.events.last!.sequence, binding: record.binding)
            if let hash = plan.hashToStore {
                do throws(AuthError) {
                    try keyring.store(hash, service: service, account: account, label: label(for: account))
                    // Put the keyring back as it was should the save fail: remove a new hash,
                    // restore an upgraded one.
                    let key = ItemKey(service: service, account: account), label = label(for: account)
                    change.undo = { self.restore(stored.map { Array($0.utf8) }, at: key, label: label) }
                } catch where plan.isUpgrade {
                    change.warnings.append(upgradeFailedNote(error))
                }
            }
            return change
        }
    }

    /// Signs the current account out, deleting its stored hash unless `keepingCredentials`.
    /// Nobody signed in is not an error: no event, and a note in the outcome. A corrupt
    /// settings file is replaced (a copy is kept) and nothing else happens.
    @discardableResult
    public func signOut(keepingCredentials: Bool) throws(AuthError) -> ChangeOutcome {
        try signOutLocally(keepingCredentials: keepingCredentials)
    }

    func signOutLocally(keepingCredentials: Bool) throws(AuthError) -> ChangeOutcome {
        // An unlock prompt may stay up for a minute: show it before taking the settings lock,
        // which every other authctl waits for at most 5 s.
        if !keepingCredentials, try settings.read(service: service).record.user != nil { try keyring.unlock() }
        return try change { (read, record) throws(AuthError) -> Change in
            if read.corruption != nil {
                return Change(record: SessionRecord(), whenReplaced:
                    "nobody was signed out and no password hash was deleted, since it did not say who was signed in")
            }
            guard let user = record.user else {
                // A stale session the transaction just ended is this sign-out's event.
                if let stale = read.record.user {
                    return Change(warnings: ["\(stale) was already signed out of \(service): its keyring item is gone"])
                }
                return Change(warnings: ["nobody is signed in to \(service)"])
            }
            var change = Change()
            change.events = [try event(.signedOut, user, .signOut, name: record.name ?? "", at: clock(), after: record.sequence)]
            change.record = record.signedOut(sequence: change.events[0].sequence)
            if !keepingCredentials {
                let key = itemKey(user, in: record)
                let removed = try keyring.secret(key)
                try keyring.deleteItem(key)
                let label = record.binding.map { tokenLabel(user, $0) } ?? label(for: user)
                change.undo = { self.restore(removed, at: key, label: label) }
            }
            return change
        }
    }

    /// Deletes the stored hash of `account`. If it is signed in, signs it out (one `signed-out`
    /// event, reason `forget`). Idempotent.
    @discardableResult
    public func forget(_ account: AccountID) throws(AuthError) -> ChangeOutcome {
        try forgetLocally(account)
    }

    func forgetLocally(_ account: AccountID) throws(AuthError) -> ChangeOutcome {
        let record = try intactRecord()
        // As in signOut(keepingCredentials:): any unlock prompt comes before the settings lock.
        if try keyring.containsItem(itemKey(account, in: record)) { try keyring.unlock() }
        return try change { (read, record) throws(AuthError) -> Change in
            if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
            var change = Change()
            let key = itemKey(account, in: record)
            guard record.user == account else {
                if try !keyring.deleteItem(key) {
                    change.warnings.append("\(account) has no stored \(record.binding == nil ? "password hash" : "tokens") for \(service)")
                }
                return change
            }
            // Signed in, so the item exists (stale state was cleared before this runs).
            change.events = [try event(.signedOut, account, .forget, name: record.name ?? "", at: clock(), after: record.sequence)]
            change.record = record.signedOut(sequence: change.events[0].sequence)
            let removed = try keyring.secret(key)
            try keyring.deleteItem(key)
            let label = record.binding.map { tokenLabel(account, $0) } ?? label(for: account)
            change.undo = { self.restore(removed, at: key, label: label) }
            return change
        }
    }

    /// Checks `password` against the signed-in account's hash (re-authentication).
    /// Throws ``AuthError/notSignedIn(_:)`` when nobody is signed in and
    /// ``AuthError/denied(_:)`` on a mismatch. May upgrade a weak hash.
    @discardableResult
    public func verify(_ password: Password) throws(AuthError) -> ChangeOutcome {
        try refuseIfBound("verify(_:)")
        return try verifyLocally(password)
    }

    /// A bound service signs in and verifies at its server: only the async API can do that.
    private func refuseIfBound(_ asyncAPI: String) throws(AuthError) {
        if let binding = try settings.read(service: service).record.binding {
            throw .unavailable("\(service) is bound to the token server \(binding.server); use `await \(asyncAPI)`, which asks it")
        }
    }

    func verifyLocally(_ password: Password) throws(AuthError) -> ChangeOutcome {
        let current = try status()
        guard let account = current.user,
              let stored = try keyring.secret(service: service, account: account) else {
            throw .notSignedIn("nobody is signed in to \(service)")
        }
        guard case .match(let upgraded) = try check(password, against: stored, of: account) else {
            throw .denied("wrong password for \(account)")
        }
        var warnings: [String] = []
        if let upgraded {
            do throws(AuthError) {
                try settings.withExclusiveLock { () throws(AuthError) in
                    // Another process may have changed the hash meanwhile: keep theirs.
                    guard try keyring.secret(service: service, account: account) == stored else { return }
                    try keyring.store(upgraded, service: service, account: account, label: label(for: account))
                }
            } catch {
                warnings.append(upgradeFailedNote(error))
            }
        }
        return ChangeOutcome(events: [], warnings: warnings)
    }

    /// The login status. Never prompts, and works while the keyring is locked.
    public func status() throws(AuthError) -> LoginStatus {
        let record = try intactRecord()
        return try status(of: record, keyringLocked: try keyring.isLocked())
    }

    /// The status `record` describes, looking in the keyring for its user's item only.
    func status(of record: SessionRecord, keyringLocked locked: Bool) throws(AuthError) -> LoginStatus {
        var status = LoginStatus(service: service, sequence: record.sequence, keyringLocked: locked)
        status.server = record.binding?.server
        // A bound session also ends when its refresh token's known expiry has passed.
        guard let user = try signedInAccount(in: record), !sessionHasEnded(record) else { return status }
        status.user = user
        status.name = record.name
        status.signedInAt = record.signedInAt
        status.accessTokenExpiresAt = record.tokenTimes?.accessExpiresAt
        status.refreshTokenExpiresAt = record.tokenTimes?.refreshExpiresAt
        return status
    }

    /// The current state as an event with reason `initial` (user `nil` when nobody is signed
    /// in), for listeners that print where things stand before the first change. Never prompts.
    public func initialEvent() throws(AuthError) -> LoginEvent {
        let status = try status()
        return LoginEvent(service: service, status: status.isSignedIn ? .signedIn : .signedOut, user: status.user,
                          reason: .initial, name: status.name ?? "", timestamp: clock(), sequence: status.sequence)
    }

    /// Throws when the settings file is unsafe, unreadable or corrupt (78, 74): settings
    /// problems are reported before keyring ones.
    public func checkSettings() throws(AuthError) {
        _ = try intactRecord()
    }

    /// The service's record; a corrupt file is an error here (only sign-in and sign-out
    /// replace one).
    func intactRecord() throws(AuthError) -> SessionRecord {
        let read = try settings.read(service: service)
        if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
        return read.record
    }

    /// Whether `account` has a stored hash. Never prompts. An unsafe settings file is reported
    /// first (78, 74); a corrupt one is not, since a sign-in replaces it.
    public func hasStoredPassword(for account: AccountID) throws(AuthError) -> Bool {
        _ = try settings.read(service: service)
        return try keyring.containsItem(service: service, account: account)
    }

    /// The accounts with a stored hash, sorted by bytes, marking the signed-in one. Never
    /// prompts; a locked keyring is ``AuthError/unavailable(_:detail:)``.
    public func accounts() throws(AuthError) -> [Account] {
        let record = try intactRecord()
        let current = sessionHasEnded(record) ? nil : record.user
        return try keyring.accounts(service: service, server: record.binding?.server).sorted()
            .map { Account(id: $0, isCurrent: $0 == current) }
    }

    /// A stream of this controller's events, from now on.
    public func events() -> AsyncStream<LoginEvent> {
        let (stream, continuation) = AsyncStream<LoginEvent>.makeStream()
        let id = subscribers.withLock { state in
            state.next += 1
            state.continuations[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    // MARK: - Steps

    private struct SignInPlan {
        var hashToStore: String?
        var isUpgrade: Bool
    }

    private func plan(signingIn account: AccountID, password: Password, stored: String?) throws(AuthError) -> SignInPlan {
        guard let stored else { return SignInPlan(hashToStore: try hasher.hash(password), isUpgrade: false) }
        guard case .match(let upgraded) = try check(password, against: stored, of: account) else {
            throw .denied("wrong password for \(account)")
        }
        return SignInPlan(hashToStore: upgraded, isUpgrade: true)
    }

    private func check(_ password: Password, against stored: String, of account: AccountID) throws(AuthError) -> PasswordVerification {
        let verification = hasher.verify(password, against: stored)
        switch verification {
        case .unusable(let reason):
            throw .invalidInput("the stored secret of \(account) is not an authctl password hash (\(reason)); clear it with `authctl forget \(account)`")
        case .failed(let error):
            throw error
        case .match, .mismatch:
            return verification
        }
    }

    /// The account the record names, if its keyring item exists (else the record is stale).
    func signedInAccount(in record: SessionRecord) throws(AuthError) -> AccountID? {
        guard let user = record.user, try keyring.containsItem(itemKey(user, in: record)) else { return nil }
        return user
    }

    /// Where `account`'s item is: its password hash, or its tokens at the bound server.
    func itemKey(_ account: AccountID, in record: SessionRecord) -> ItemKey {
        ItemKey(service: service, account: account, server: record.binding?.server)
    }

    /// What a change under the settings lock does: the record to save (`nil`: nothing to
    /// save), its events, warnings, and how to put the keyring back should the save fail.
    struct Change {
        var record: SessionRecord?
        var events: [LoginEvent] = []
        var warnings: [String] = []
        var undo: () -> Void = {}
        /// Said after the note that a corrupt settings file was replaced.
        var whenReplaced: String?
    }

    /// The transaction every change shares: under the settings lock, read the record, end a
    /// stale session (the settings name a user whose item is gone: one `signed-out` event,
    /// reason `removed`), let `body` make its change to the keyring, save the record — undoing
    /// the keyring change if that fails, so a failed command changes nothing — and broadcast
    /// the events; after the lock, post them in-process.
    func change(_ body: (SettingsRead, SessionRecord) throws(AuthError) -> Change) throws(AuthError) -> ChangeOutcome {
        var warnings: [String] = []
        let events = try settings.withExclusiveLock { () throws(AuthError) -> [LoginEvent] in
            let read = try settings.read(service: service)
            var record = read.record
            var ended: [LoginEvent] = []
            if let user = record.user, try !keyring.containsItem(itemKey(user, in: record)) {
                ended = [try event(.signedOut, user, .removed, name: record.name ?? "", at: clock(), after: record.sequence)]
                record = record.signedOut(sequence: ended[0].sequence)
            }
            var change = try body(read, record)
            if change.record == nil && !ended.isEmpty { change.record = record }
            if let newRecord = change.record {
                do throws(AuthError) {
                    if let copy = try settings.save(newRecord, service: service) {
                        warnings.append("the settings file was corrupt; it was replaced and the old one kept as \(copy)"
                                        + (change.whenReplaced.map { "; " + $0 } ?? ""))
                    }
                } catch {
                    change.undo()
                    throw error
                }
            }
            let events = ended + change.events
            warnings += change.warnings + broadcast(events)
            return events
        }
        post(events)
        return ChangeOutcome(events: events, warnings: warnings)
    }

    private func label(for account: AccountID) -> String { "authctl password hash for \(account) (\(service))" }

    private func upgradeFailedNote(_ error: AuthError) -> String {
        "could not store the stronger password hash (\(error.message)); the old one stays"
    }

    /// An event numbered `skipping + 1` after `sequence`. The numbers come from the settings
    /// file, so they are checked, never trapped on: a sequence at its limit is a corrupt file.
    func event(_ status: LoginEvent.Status, _ user: AccountID, _ reason: LoginEvent.Reason, name: String,
                       at time: UInt64, after sequence: UInt64, skipping: Int = 0,
                       previousUser: AccountID? = nil) throws(AuthError) -> LoginEvent {
        let (number, overflow) = sequence.addingReportingOverflow(UInt64(skipping) + 1)
        // At the limit the next read would call the file corrupt: refuse to write it.
        guard !overflow, number < .max else {
            throw .settingsUnsafe("the event sequence of \(service) in the settings file is at its limit (\(sequence)); remove its `sequence` line to start again at 0")
        }
        return LoginEvent(service: service, status: status, user: user, reason: reason, name: name, timestamp: time,
                          sequence: number, previousUser: previousUser)
    }

    /// Broadcasts under the lock, so processes' events go out in the order of their changes.
    /// A bus that went away after the change was stored is a warning: the change stands.
    private func broadcast(_ events: [LoginEvent]) -> [String] {
        do {
            try broadcaster.broadcast(events)
            return []
        } catch {
            return [error.message]
        }
    }

    /// Posts in-process, after the lock is released, so an observer may call the controller.
    private func post(_ events: [LoginEvent]) {
        let continuations = subscribers.withLock { Array($0.continuations.values) }
        for event in events {
            for observer in observers { observer.observe(event, from: self) }
            for continuation in continuations { continuation.yield(event) }
        }
    }
}

/// What a change did: its events, and warnings worth telling the user.
public struct ChangeOutcome: Equatable, Sendable {
    /// The events emitted, in order (empty when the status did not change).
    public var events: [LoginEvent]
    /// One-line notes: nobody was signed in, an upgrade could not be stored, listeners were
    /// not notified, a corrupt settings file was replaced.
    public var warnings: [String]
}

/// An account with a stored hash.
public struct Account: Equatable, Sendable {
    public var id: AccountID
    /// Whether it is the signed-in account.
    public var isCurrent: Bool

    public init(id: AccountID, isCurrent: Bool) {
        self.id = id
        self.isCurrent = isCurrent
    }
}

/// The login status of a service.
public struct LoginStatus: Equatable, Sendable {
    public var service: ServiceName
    /// The signed-in account, or `nil` when signed out.
    public var user: AccountID?
    public var name: String?
    public var signedInAt: String?
    /// The number of the last event (0 if none).
    public var sequence: UInt64
    /// Whether the keyring's default collection is locked.
    public var keyringLocked: Bool
    /// The token server the service is bound to, `nil` for a local service.
    public var server: ServerURL?
    /// When the signed-in account's access token expires (µs, local clock); `nil` when unknown.
    public var accessTokenExpiresAt: UInt64?
    /// When its refresh token expires, likewise.
    public var refreshTokenExpiresAt: UInt64?

    public init(service: ServiceName, user: AccountID? = nil, name: String? = nil, signedInAt: String? = nil,
                sequence: UInt64, keyringLocked: Bool) {
        self.service = service
        self.user = user
        self.name = name
        self.signedInAt = signedInAt
        self.sequence = sequence
        self.keyringLocked = keyringLocked
    }

    public var isSignedIn: Bool { user != nil }

    /// The Gravatar URL of the signed-in account id: MD5 of the trimmed, lower-cased id.
    public var avatarURL: String? {
        guard let user else { return nil }
        // Unicode's White_Space property is the set Foundation's `.whitespacesAndNewlines` trims.
        let scalars = user.rawValue.unicodeScalars
        let start = scalars.firstIndex { !$0.properties.isWhitespace } ?? scalars.endIndex
        let end = scalars.lastIndex { !$0.properties.isWhitespace }.map(scalars.index(after:)) ?? start
        let normalized = String(scalars[start..<end]).lowercased()
        return "https://www.gravatar.com/avatar/" + GLibText.md5Hex(normalized)
    }
}
