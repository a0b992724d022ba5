// SPDX-License-Identifier: Apache-2.0
/// The operations that change who is signed in, one name each. Every one of them serves local
/// accounts and services bound to a token server alike; each is `async` because a bound service
/// asks its server, and each runs its blocking keyring, settings and Argon2 steps through
/// `offload(_:)`, so a keyring that hangs or a settings lock that another process holds never
/// blocks a thread of the cooperative pool. No token server is asked under the settings lock.
extension AuthController {
    /// What a sign-in asks its password provider for.
    public struct PasswordRequest: Equatable, Sendable {
        /// The account signing in.
        public var account: AccountID
        /// Whether the password is a new one: a local account without a stored hash (enrolment),
        /// or a registration at the token server. A prompt asks for a new password twice.
        public var isNew: Bool

        /// A request for the password of `account`, new or known.
        public init(account: AccountID, isNew: Bool) {
            self.account = account
            self.isNew = isNew
        }
    }

    /// Signs `account` in, asking `password` for the password once it is known whether the
    /// password is new (``PasswordRequest/isNew``) — so a command line or a dialog asks once, and
    /// asks twice only for a new password. Otherwise as
    /// ``signIn(account:name:password:register:binding:)``.
    ///
    /// `password` is called once, before the keyring's unlock prompt, the server or the settings
    /// lock; whatever it throws ends the sign-in, and nothing changes. It runs on the caller's
    /// task: a provider that blocks (a terminal prompt) blocks that task's thread.
    @discardableResult
    public func signIn(account: AccountID, name: String, register: Bool = false, binding: ServerBinding? = nil,
                       password: (PasswordRequest) async throws(AuthError) -> Password) async throws(AuthError) -> ChangeOutcome {
        try await signIn(account: account, name: name, register: register, newBinding: binding, asking: true, password: password)
    }

    /// Signs `account` in, with display name `name`.
    ///
    /// - A local account with a stored hash must give the password that matches it (else
    ///   ``AuthError/denied(_:)-enum.case``); one without is enrolled: its hash is stored. A hash
    ///   weaker than the defaults is upgraded.
    /// - When the service is bound to a token server (or `binding` is given, which then binds
    ///   it — only while nobody is signed in or the binding is the same), the password goes to
    ///   the server in a password grant, before the settings lock is taken, and the tokens it
    ///   answers with go to the keyring. `register` creates the account there first (protocol
    ///   `json` only).
    ///
    /// Emits `signed-in` (reason `sign-in`), or `signed-out` + `signed-in` (reason `switch`) when
    /// another account was signed in, or nothing when `account` already was. May show the
    /// keyring's unlock prompt; Argon2 and the keyring run off the cooperative pool. The D-Bus
    /// signal `LoginStatusChanged` carries each event.
    @discardableResult
    public func signIn(account: AccountID, name: String, password: Password, register: Bool = false,
                       binding: ServerBinding? = nil) async throws(AuthError) -> ChangeOutcome {
        try await signIn(account: account, name: name, register: register, newBinding: binding, asking: false) { _ throws(AuthError) in
            password
        }
    }

    /// The sign-in itself; only when `asking` does it find out whether a local password is new
    /// (one keyring search), since a password given up front needs no request.
    private func signIn(account: AccountID, name: String, register: Bool, newBinding: ServerBinding?, asking: Bool,
                        password provider: (PasswordRequest) async throws(AuthError) -> Password) async throws(AuthError) -> ChangeOutcome {
        // Settings problems (78, 74) are reported before anything else.
        let record = try await offload { () throws(AuthError) in try self.settings.read(service: self.service).record }
        guard let binding = newBinding ?? record.binding else {
            if register { throw .usage("\(hint: .registration) needs a service bound to a token server of protocol json\(hint: .bindRegistrationServer)") }
            // Unlocked first (any prompt comes now): a locked keyring may hide the account's hash, or
            // hold the search behind its own unlock dialog.
            let isNew = asking
                ? try await offload { () throws(AuthError) in
                    try self.keyring.unlock()
                    return try !self.keyring.containsItem(service: self.service, account: account)
                }
                : false
            let password = try await provider(PasswordRequest(account: account, isNew: isNew))
            return try await offload { () throws(AuthError) in try self.signInLocally(account: account, name: name, password: password) }
        }
        try refuseRebinding(record, to: newBinding)
        let password = try await provider(PasswordRequest(account: account, isNew: register))
        return try await signInAtServer(account: account, name: name, password: password, register: register,
                                        binding: binding, newBinding: newBinding)
    }

    /// Signs the current account out, deleting its keyring item (its password hash, or its
    /// tokens at a token server) unless `keepingCredentials`. For a bound service the refresh
    /// token is also revoked at the binding's revoke URL, after the change is stored (best
    /// effort: a failure is a warning, and the sign-out stands).
    ///
    /// Nobody signed in is not an error: no event, and a note in the outcome. A corrupt
    /// settings file is replaced (a copy is kept) and nothing else happens. Emits one
    /// `signed-out` event (reason `sign-out`). May show the keyring's unlock prompt, before the
    /// settings lock is taken. The D-Bus method `SignOut` of `serve` calls it.
    ///
    /// A bound service's sign-out first waits for a token refresh under way (the refresh
    /// lock, as ``accessToken(minValid:forceRefresh:checkingIDToken:)`` takes it), so the refresh token it
    /// revokes is the newest one.
    @discardableResult
    public func signOut(keepingCredentials: Bool) async throws(AuthError) -> ChangeOutcome {
        let (outcome, revocation) = try await afterRefreshUnderWay { () async throws(AuthError) -> (ChangeOutcome, Revocation?) in
            try await offload { () throws(AuthError) -> (ChangeOutcome, Revocation?) in
                let record = try self.settings.read(service: self.service).record
                let revocation = keepingCredentials ? nil : self.revocation(of: record.user, in: record)
                let outcome = try self.signingOut(keepingCredentials: keepingCredentials)
                return (outcome, outcome.events.contains { $0.reason == .signOut } ? revocation : nil)
            }
        }
        return await revoking(revocation, after: outcome)
    }

    /// Deletes the keyring item of `account` — its password hash, or for a bound service its
    /// tokens, whose refresh token is revoked at the server as ``signOut(keepingCredentials:)``
    /// does. If `account` is signed in, it is signed out: one `signed-out` event, reason
    /// `forget`. Idempotent: an account without an item is a note in the outcome. May show the
    /// keyring's unlock prompt, before the settings lock is taken. As a sign-out, it first waits
    /// for a token refresh under way.
    @discardableResult
    public func forget(_ account: AccountID) async throws(AuthError) -> ChangeOutcome {
        let (outcome, revocation) = try await afterRefreshUnderWay { () async throws(AuthError) -> (ChangeOutcome, Revocation?) in
            try await offload { () throws(AuthError) -> (ChangeOutcome, Revocation?) in
                let revocation = self.revocation(of: account, in: try self.intactRecord())
                return (try self.forgetting(account), revocation)
            }
        }
        return await revoking(revocation, after: outcome)
    }

    /// Runs `body`, which reads the tokens it will revoke and ends their session, holding the
    /// refresh lock of a bound service: a refresh under way in any process stores its rotated
    /// refresh token first, and none starts until `body` is done. The lock is waited for as a
    /// refresh waits for it; a refresher that holds it longer (a stopped process) does not keep
    /// the session from ending: `body` then runs without it, with a warning. The server is never
    /// asked under the lock, and never under the settings lock.
    private func afterRefreshUnderWay<Revoked: Sendable>(
        _ body: @escaping @Sendable () async throws(AuthError) -> (ChangeOutcome, Revoked?)
    ) async throws(AuthError) -> (ChangeOutcome, Revoked?) {
        let bound = try await offload { () throws(AuthError) in try self.settings.read(service: self.service).record.binding != nil }
        guard bound else { return try await body() }
        var ran = false
        do {
            return try await settings.withRefreshLock(service: service, timeout: serverTimeout + .seconds(5)) { () async throws(AuthError) in
                ran = true
                return try await body()
            }
        } catch {
            guard !ran, case .temporaryFailure = error else { throw error }
            var (outcome, revoked) = try await body()
            outcome.warnings.append("another authctl was still refreshing the token of \(service) after \(formatSeconds(serverTimeout.seconds + 5)) s; "
                                    + "its new refresh token, if it gets one, stays valid at the server until it expires")
            return (outcome, revoked)
        }
    }

    /// Checks `password` against the signed-in account (re-authentication): against its stored
    /// hash (a weak one is upgraded), or for a bound service with a password grant at the
    /// server, whose new tokens replace the old ones. No event.
    ///
    /// Throws ``AuthError/notSignedIn(_:)-enum.case`` when nobody is signed in and ``AuthError/denied(_:)-enum.case``
    /// on a wrong password. May show the keyring's unlock prompt; Argon2 and the keyring run off
    /// the cooperative pool.
    @discardableResult
    public func verify(_ password: Password) async throws(AuthError) -> ChangeOutcome {
        let session = try await offload { () throws(AuthError) -> (AccountID, ServerBinding)? in
            let record = try self.intactRecord()
            guard let binding = record.binding else { return nil }
            guard let user = try self.signedInAccount(in: record), !self.sessionHasEnded(record) else {
                throw .notSignedIn("nobody is signed in to \(self.service)")
            }
            try self.keyring.unlock()
            return (user, binding)
        }
        guard let (user, binding) = session else {
            return try await offload { () throws(AuthError) in try self.verifyLocally(password) }
        }
        let grant = try await tokenClients(binding).signIn(account: user, password: password, register: false)
        // The new tokens replace the stored ones, whose refresh token is then revoked: none is
        // left live out of reach.
        let (outcome, replaced) = try await offload { () throws(AuthError) -> (ChangeOutcome, Revocation?) in
            let stored = try self.keyring.secret(ItemKey(service: self.service, account: user, server: binding.server))
            let outcome = try self.storeRefreshed(grant, of: user, binding: binding)
            return (outcome, stored.flatMap { self.replacedRevocation(of: $0, by: grant.tokens, binding: binding) })
        }
        return await revoking(replaced, after: outcome)
    }

    // MARK: - The changes

    /// The change of a sign-out. An unlock prompt may stay up for a minute: it comes before
    /// the settings lock, which every other authctl waits for at most 5 s. Blocks.
    @discardableResult
    func signingOut(keepingCredentials: Bool) throws(AuthError) -> ChangeOutcome {
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
            return try endingSession(of: user, in: record, reason: .signOut, deletingItem: !keepingCredentials)
        }
    }

    /// The change of forgetting `account`; as in ``signingOut(keepingCredentials:)``, any unlock
    /// prompt comes before the settings lock. Blocks.
    func forgetting(_ account: AccountID) throws(AuthError) -> ChangeOutcome {
        _ = try intactRecord()
        // Unlocked first, whether or not a search finds the item: a locked keyring may hide it.
        try keyring.unlock()
        return try change { (read, record) throws(AuthError) -> Change in
            if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
            guard record.user == account else {
                deleteAWSCredentials(of: account, in: record)
                if try !keyring.deleteItem(itemKey(account, in: record)) {
                    return Change(warnings: ["\(account) has no stored \(record.binding == nil ? "password hash" : "tokens") for \(service)"])
                }
                return Change()
            }
            // Signed in, so the item exists (stale state was cleared before this runs).
            return try endingSession(of: account, in: record, reason: .forget)
        }
    }
}
