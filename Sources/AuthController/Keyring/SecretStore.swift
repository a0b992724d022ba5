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

extension AuthError {
    /// The keyring is locked and no unlock prompt may be shown (exit 69).
    public static let keyringLocked = AuthError.unavailable(
        "the keyring is locked and no unlock prompt can be shown; unlock the login keyring (e.g. in Seahorse), or run in a desktop session without --no-prompt")
    /// Account ids cannot be listed from a locked keyring (exit 69).
    public static let keyringLockedForListing = AuthError.unavailable(
        "the keyring is locked, so account ids cannot be listed; unlock the login keyring (e.g. in Seahorse) and try again")
    /// The unlock prompt was shown and dismissed (exit 77).
    public static let unlockDismissed = AuthError.denied("the keyring unlock prompt was dismissed; the keyring stays locked")
}
