// SPDX-License-Identifier: Apache-2.0
public import AuthControllerCore
import Synchronization

/// A ``/AuthControllerCore/SecretStore`` in memory, for tests. It keeps the real store's contract (the contract
/// suite runs against both): reads that need no secret work while locked; a read of a secret,
/// a store or a delete unlocks first — through the "prompt", when prompts are allowed, which
/// unlocks or is dismissed as the test says; listing a locked store fails. It can also be told
/// to fail every call.
public final class InMemorySecretStore: SecretStore {
    /// What the unlock prompt does, when the store is locked and may prompt.
    public enum PromptAnswer: Sendable {
        /// `unlock` unlocks the store; `dismiss` leaves it locked, and the call throws
        /// ``/AuthControllerCore/AuthError/unlockDismissed``.
        case unlock, dismiss
    }

    private struct State {
        var secrets: [ItemKey: [UInt8]] = [:]
        var locked = false
        var failure: AuthError?
        var storeFailure: AuthError?
        var prompts = 0
    }

    private let state = Mutex(State())
    /// Whether the unlock prompt may be shown (as `SecretServiceStore.promptAllowed`).
    public let promptAllowed: Bool
    /// What the prompt does when shown.
    public let promptAnswer: PromptAnswer

    /// An empty, unlocked store; `promptAllowed` and `promptAnswer` decide what a call that needs
    /// it unlocked does once ``setLocked(_:)`` locks it.
    public init(promptAllowed: Bool = false, promptAnswer: PromptAnswer = .unlock) {
        self.promptAllowed = promptAllowed
        self.promptAnswer = promptAnswer
    }

    /// Locks or unlocks the store.
    public func setLocked(_ locked: Bool) { state.withLock { $0.locked = locked } }

    /// Makes every later call throw `failure` (or work again with `nil`).
    public func failCalls(with failure: AuthError?) { state.withLock { $0.failure = failure } }

    /// Makes every later store (only) throw `failure`, or work again with `nil`.
    public func failStores(with failure: AuthError?) { state.withLock { $0.storeFailure = failure } }

    /// How many times the unlock prompt was shown.
    public var promptCount: Int { state.withLock { $0.prompts } }

    /// Runs `body` on the state; `unlocking` first unlocks as the real store would.
    private func access<T>(unlocking: Bool, _ body: (inout State) throws(AuthError) -> T) throws(AuthError) -> T {
        try state.withLock { (state) throws(AuthError) -> T in
            if let failure = state.failure { throw failure }
            if unlocking && state.locked {
                guard promptAllowed else { throw .keyringLocked }
                state.prompts += 1
                guard promptAnswer == .unlock else { throw .unlockDismissed }
                state.locked = false
            }
            return try body(&state)
        }
    }

    /// The in-memory twin of `Service.SearchItems`: answers while locked, and a password key finds
    /// the account's token items and AWS credentials too.
    public func containsItem(_ key: ItemKey) throws(AuthError) -> Bool {
        try access(unlocking: false) { state in
            state.secrets.keys.contains { $0 == key || (!key.searchIsExact && $0.service == key.service && $0.account == key.account) }
        }
    }

    /// Whether the store is locked: from ``setLocked(_:)`` until a call unlocks it.
    public func isLocked() throws(AuthError) -> Bool {
        try access(unlocking: false) { $0.locked }
    }

    /// Unlocks a locked store through the "prompt": counts in ``promptCount`` and answers with
    /// ``promptAnswer``; without ``promptAllowed`` it throws ``/AuthControllerCore/AuthError/keyringLocked``.
    public func unlock() throws(AuthError) {
        try access(unlocking: true) { _ in }
    }

    /// The stored bytes; like the keyring, unlocks (through the "prompt") only when the item exists.
    public func secret(_ key: ItemKey) throws(AuthError) -> [UInt8]? {
        // Like the real store: no item needs no unlock.
        guard try access(unlocking: false, { $0.secrets[key] != nil }) else { return nil }
        return try access(unlocking: true) { $0.secrets[key] }
    }

    /// Keeps `secret` under `key`, unlocking first; the content type and label are not kept.
    public func store(_ secret: [UInt8], contentType: String, for key: ItemKey, label: String) throws(AuthError) {
        try access(unlocking: true) { (state) throws(AuthError) in
            if let failure = state.storeFailure { throw failure }
            state.secrets[key] = secret
        }
    }

    /// Removes the item; like the keyring, unlocks (through the "prompt") only when there is one.
    public func deleteItem(_ key: ItemKey) throws(AuthError) -> Bool {
        // Like the real store: nothing to delete needs no unlock.
        guard try access(unlocking: false, { $0.secrets[key] != nil }) else { return false }
        return try access(unlocking: true) { $0.secrets.removeValue(forKey: key) != nil }
    }

    /// The in-memory twin of the keyring's listing: the accounts with an item of exactly this
    /// service and server; ``/AuthControllerCore/AuthError/keyringLockedForListing`` while locked.
    public func accounts(service: ServiceName, server: ServerURL?) throws(AuthError) -> [AccountID] {
        try access(unlocking: false) { (state) throws(AuthError) -> [AccountID] in
            if state.locked { throw .keyringLockedForListing }
            return state.secrets.keys.filter { $0.service == service && $0.server == server && $0.awsRole == nil }.map(\.account)
        }
    }

    /// The in-memory twin of the keyring's listing of an account's AWS roles;
    /// ``/AuthControllerCore/AuthError/keyringLockedForListing`` while locked.
    public func awsRoles(service: ServiceName, account: AccountID) throws(AuthError) -> [String] {
        try access(unlocking: false) { (state) throws(AuthError) -> [String] in
            if state.locked { throw .keyringLockedForListing }
            return state.secrets.keys.filter { $0.service == service && $0.account == account }.compactMap(\.awsRole)
        }
    }
}
