import Synchronization

/// Where the password hashes live: one secret per (service, account).
public protocol SecretStore: Sendable {
    /// Whether an item for `account` exists. Never unlocks, never prompts, loads no secret:
    /// works while the collection is locked.
    func containsItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool

    /// Whether the default collection is locked. Never prompts.
    func isLocked() throws(AuthError) -> Bool

    /// Unlocks the default collection if it is locked: may prompt (if the store allows
    /// prompts), or throws "locked". Lets a caller prompt before it takes the settings lock.
    func unlock() throws(AuthError)

    /// The stored secret for `account`, or `nil`. May unlock the collection (and so prompt,
    /// if the store allows prompts).
    func secret(service: ServiceName, account: AccountID) throws(AuthError) -> String?

    /// Stores `secret` for `account`, replacing an existing secret in place. May unlock.
    func store(_ secret: String, service: ServiceName, account: AccountID, label: String) throws(AuthError)

    /// Deletes the secret of `account`; returns whether there was one. May unlock.
    @discardableResult
    func deleteItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool

    /// The account ids with a stored secret, in any order. Never unlocks; throws
    /// ``AuthError/unavailable(_:detail:)`` when the collection is locked, because a locked
    /// collection may expose only hashed attribute values.
    func accounts(service: ServiceName) throws(AuthError) -> [AccountID]
}

/// A ``SecretStore`` in memory, for tests: lockable, and able to fail on demand.
public final class InMemorySecretStore: SecretStore {
    private struct State {
        var secrets: [ServiceName: [AccountID: String]] = [:]
        var locked = false
        var failure: AuthError?
    }

    private let state = Mutex(State())

    public init() {}

    /// Locks or unlocks the store. While locked, reads that may unlock fail with "locked".
    public func setLocked(_ locked: Bool) { state.withLock { $0.locked = locked } }

    /// Makes every later call throw `failure` (or work again with `nil`).
    public func failCalls(with failure: AuthError?) { state.withLock { $0.failure = failure } }

    private func access<T>(needsUnlock: Bool, _ body: (inout State) throws(AuthError) -> T) throws(AuthError) -> T {
        try state.withLock { (state) throws(AuthError) -> T in
            if let failure = state.failure { throw failure }
            if needsUnlock && state.locked { throw .unavailable("the keyring is locked") }
            return try body(&state)
        }
    }

    public func containsItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool {
        try access(needsUnlock: false) { $0.secrets[service]?[account] != nil }
    }

    public func isLocked() throws(AuthError) -> Bool {
        try access(needsUnlock: false) { $0.locked }
    }

    public func unlock() throws(AuthError) {
        try access(needsUnlock: true) { _ in }
    }

    public func secret(service: ServiceName, account: AccountID) throws(AuthError) -> String? {
        try access(needsUnlock: true) { $0.secrets[service]?[account] }
    }

    public func store(_ secret: String, service: ServiceName, account: AccountID, label: String) throws(AuthError) {
        try access(needsUnlock: true) { $0.secrets[service, default: [:]][account] = secret }
    }

    public func deleteItem(service: ServiceName, account: AccountID) throws(AuthError) -> Bool {
        try access(needsUnlock: true) { $0.secrets[service]?.removeValue(forKey: account) != nil }
    }

    public func accounts(service: ServiceName) throws(AuthError) -> [AccountID] {
        try access(needsUnlock: true) { Array(($0.secrets[service] ?? [:]).keys) }
    }
}
