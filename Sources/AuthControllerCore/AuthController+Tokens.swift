/// Accounts of a service bound to a token server (SPEC §10): the password goes to the server,
/// the tokens to the keyring, and `token` hands out a fresh access token, refreshing it at most
/// once per call and, across every process and task, one refresh at a time.
///
/// No network call ever happens under the settings lock: the server is asked first, and the
/// answer is stored under the lock afterwards.
extension AuthController {
    /// An access token ready for use.
    public struct AccessToken: Equatable, Sendable {
        public var user: AccountID
        public var token: String
        public var tokenType: String
        /// When it expires, µs since the epoch by the local clock; `nil` when unknown.
        public var expiresAt: UInt64?
        /// Notes for the user: e.g. the server could not be reached, so a still-valid token is
        /// handed out unrefreshed.
        public var warnings: [String]
    }

    // MARK: - Binding

    /// The service's binding, `nil` when it has none. Never prompts.
    public func binding() throws(AuthError) -> ServerBinding? {
        try intactRecord().binding
    }

    /// Binds the service to a token server, or (with `nil`) removes the binding. Refused with
    /// ``AuthError/invalidInput(_:)`` (65, "sign out first") while someone is signed in.
    public func setBinding(_ binding: ServerBinding?) throws(AuthError) {
        _ = try change { (read, record) throws(AuthError) -> Change in
            if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
            if let user = record.user {
                throw .invalidInput("\(user) is signed in to \(service); \(hint: .signOutFirst), then change the server")
            }
            var updated = record
            updated.binding = binding
            return Change(record: updated)
        }
    }

    // MARK: - Commands that may talk to the server

    /// Signs `account` in: against the token server when the service is bound (or `binding` is
    /// given, which then binds it — only when nobody is signed in or the binding is the same),
    /// else locally as ``signIn(account:name:password:)``. The password grant happens before
    /// the settings lock is taken. Events as for a local sign-in.
    @discardableResult
    public func signIn(account: AccountID, name: String, password: Password, register: Bool = false,
                       binding newBinding: ServerBinding? = nil) async throws(AuthError) -> ChangeOutcome {
        let read = try settings.read(service: service)
        guard let binding = newBinding ?? read.record.binding else {
            if register { throw .usage("\(hint: .registration) needs a service bound to a token server of protocol json\(hint: .bindRegistrationServer)") }
            return try signInLocally(account: account, name: name, password: password)
        }
        try refuseRebinding(read.record, to: newBinding)
        // Any unlock prompt comes now, before the server is asked and before the settings lock.
        try keyring.unlock()
        let grant = try await tokenClients(binding).signIn(account: account, password: password, register: register)
        return try change { (read, record) throws(AuthError) -> Change in
            try refuseRebinding(record, to: newBinding)
            var change = Change()
            let key = ItemKey(service: service, account: account, server: binding.server)
            let previous = record.user
            let old = try keyring.secret(key)
            if previous != account || read.corruption != nil {
                let now = clock()
                if let previous {
                    change.events.append(try event(.signedOut, previous, .switch, name: record.name ?? "", at: now, after: record.sequence))
                }
                change.events.append(try event(.signedIn, account, previous == nil ? .signIn : .switch, name: name, at: now,
                                               after: record.sequence, skipping: change.events.count, previousUser: previous))
            }
            let sequence = change.events.last?.sequence ?? record.sequence
            change.record = SessionRecord(user: account, name: previous == account ? record.name : name,
                                          signedInAt: previous == account ? record.signedInAt : Timestamp.rfc3339(microseconds: clock()),
                                          sequence: sequence, binding: binding, tokenTimes: grant.times())
            try keyring.store(grant.tokens, service: service, account: account, server: binding.server, label: tokenLabel(account, binding))
            change.undo = { self.restore(old, at: key, label: self.tokenLabel(account, binding)) }
            return change
        }
    }

    /// Signs the current account out. For a bound service the tokens are deleted and the refresh
    /// token revoked at the binding's revoke URL (best effort: a failure is a warning), unless
    /// `keepingCredentials`. Otherwise as ``signOut(keepingCredentials:)``.
    @discardableResult
    public func signOut(keepingCredentials: Bool) async throws(AuthError) -> ChangeOutcome {
        let record = try settings.read(service: service).record
        guard let binding = record.binding, let user = record.user, !keepingCredentials else {
            return try signOutLocally(keepingCredentials: keepingCredentials)
        }
        let tokens = try? keyring.value(TokenSet.self, service: service, account: user, server: binding.server)
        var outcome = try signOutLocally(keepingCredentials: false)
        if outcome.events.contains(where: { $0.reason == .signOut }), let tokens {
            outcome.warnings += await revoke(tokens, binding: binding)
        }
        return outcome
    }

    /// Deletes `account`'s item (its tokens, for a bound service, revoking the refresh token as
    /// sign-out does); signs it out if it is signed in. Idempotent.
    @discardableResult
    public func forget(_ account: AccountID) async throws(AuthError) -> ChangeOutcome {
        let record = try intactRecord()
        guard let binding = record.binding else { return try forgetLocally(account) }
        let tokens = try? keyring.value(TokenSet.self, service: service, account: account, server: binding.server)
        var outcome = try forgetLocally(account)
        if let tokens { outcome.warnings += await revoke(tokens, binding: binding) }
        return outcome
    }

    /// Re-authenticates the signed-in account: locally, or with a password grant whose new
    /// tokens replace the old ones (no event).
    @discardableResult
    public func verify(_ password: Password) async throws(AuthError) -> ChangeOutcome {
        let record = try intactRecord()
        guard let binding = record.binding else { return try verifyLocally(password) }
        guard let user = try signedInAccount(in: record), !sessionHasEnded(record) else {
            throw .notSignedIn("nobody is signed in to \(service)")
        }
        try keyring.unlock()
        let grant = try await tokenClients(binding).signIn(account: user, password: password, register: false)
        return try storeRefreshed(grant, of: user, binding: binding)
    }

    /// The signed-in account's access token, refreshed first when it expires in less than
    /// `minValid` seconds (capped at half the lifetime the server granted) or when
    /// `forceRefresh`. One refresh at a time per service, across processes and tasks; the
    /// settings lock is never held while the server is asked. A session the server ended (or
    /// whose refresh token expired) is signed out — one `signed-out` event, reason `expired` —
    /// and reported as ``AuthError/denied(_:)`` (77).
    public func accessToken(minValid: UInt64 = 60, forceRefresh: Bool = false) async throws(AuthError) -> AccessToken {
        let (user, binding, tokens, times) = try currentSession()
        guard forceRefresh || isDue(times, minValid: minValid) else {
            return AccessToken(user: user, token: tokens.accessToken, tokenType: tokens.tokenType,
                               expiresAt: times.accessExpiresAt, warnings: [])
        }
        return try await refreshes.run { () async throws(AuthError) -> AccessToken in
            try await self.settings.withRefreshLock(service: self.service, timeout: self.serverTimeout + 5) { () async throws(AuthError) -> AccessToken in
                try await self.refresh(user: user, binding: binding, seen: tokens, minValid: minValid, forced: forceRefresh)
            }
        }
    }

    // MARK: - Steps

    /// The signed-in session of a bound service: ends it first when its refresh token expired.
    private func currentSession() throws(AuthError) -> (AccountID, ServerBinding, TokenSet, TokenTimes) {
        let record = try intactRecord()
        guard let binding = record.binding else {
            throw .invalidInput("\(service) is not bound to a token server; \(hint: .bindServer)")
        }
        guard let user = record.user else { throw .notSignedIn("nobody is signed in to \(service)") }
        if sessionHasEnded(record) { throw try endSession(of: user, reason: .expired) }
        guard let tokens = try keyring.value(TokenSet.self, service: service, account: user, server: binding.server) else {
            throw try endSession(of: user, reason: .removed)
        }
        return (user, binding, tokens, record.tokenTimes ?? TokenTimes())
    }

    /// Whether the refresh token's known expiry has passed.
    func sessionHasEnded(_ record: SessionRecord) -> Bool {
        guard record.binding != nil, let expiry = record.tokenTimes?.refreshExpiresAt else { return false }
        return expiry <= clock()
    }

    /// Whether the access token expires within the threshold: `minValid`, capped at half the
    /// granted lifetime. A token whose expiry is unknown is never due.
    private func isDue(_ times: TokenTimes, minValid: UInt64) -> Bool {
        guard let expiresAt = times.accessExpiresAt else { return false }
        let threshold = min(minValid, times.accessLifetime.map { $0 / 2 } ?? minValid)
        let now = clock()
        return expiresAt <= now || expiresAt < now.addingClamped(threshold.multipliedClamped(by: 1_000_000))
    }

    /// The refresh itself, holding the service's refresh lock: whoever waited for the lock
    /// first looks again — another process may have refreshed meanwhile, or ended the session.
    private func refresh(user: AccountID, binding: ServerBinding, seen: TokenSet, minValid: UInt64,
                         forced: Bool) async throws(AuthError) -> AccessToken {
        let ended = AuthError.denied("the session of \(user) at \(binding.server) (\(service)) has ended; sign in again")
        let session: (AccountID, ServerBinding, TokenSet, TokenTimes)
        do {
            session = try currentSession()
        } catch {
            // Whoever held the lock before ended the session (or it expired meanwhile).
            if case .notSignedIn = error { throw ended }
            throw error
        }
        let (current, currentBinding, tokens, times) = session
        guard current == user, currentBinding == binding else { throw ended }
        // Another process may have refreshed while this one waited: its token is used as it is.
        if forced ? tokens != seen : !isDue(times, minValid: minValid) {
            return AccessToken(user: user, token: tokens.accessToken, tokenType: tokens.tokenType, expiresAt: times.accessExpiresAt, warnings: [])
        }
        let grant: TokenGrant
        do {
            grant = try await tokenClients(binding).refresh(tokens)
        } catch {
            return try await refreshFailed(error, user: user, binding: binding, tokens: tokens, times: times)
        }
        let outcome = try storeRefreshed(grant, of: user, binding: binding, previous: (tokens, times))
        let stored = grant.times(previous: (tokens, times))
        return AccessToken(user: user, token: grant.tokens.accessToken, tokenType: grant.tokens.tokenType,
                           expiresAt: stored.accessExpiresAt, warnings: outcome.warnings)
    }

    /// A refused refresh token ends the session — unless another process rotated it meanwhile;
    /// any other failure still hands out a token that has not expired yet, with a warning.
    private func refreshFailed(_ error: AuthError, user: AccountID, binding: ServerBinding, tokens: TokenSet,
                               times: TokenTimes) async throws(AuthError) -> AccessToken {
        if case .denied = error {
            let again = try keyring.value(TokenSet.self, service: service, account: user, server: binding.server)
            if let again, again.refreshToken != tokens.refreshToken {
                let record = try intactRecord()
                return AccessToken(user: user, token: again.accessToken, tokenType: again.tokenType,
                                   expiresAt: record.tokenTimes?.accessExpiresAt, warnings: [])
            }
            throw try endSession(of: user, reason: .expired)
        }
        if let expiresAt = times.accessExpiresAt, expiresAt <= clock() { throw error }
        return AccessToken(user: user, token: tokens.accessToken, tokenType: tokens.tokenType, expiresAt: times.accessExpiresAt,
                           warnings: ["could not refresh the access token (\(error.message)); it is still valid, so it is used as it is"])
    }

    /// Stores new tokens of the signed-in `user` and their times: the rotated refresh token is
    /// in the keyring before anything uses the new access token. No event.
    private func storeRefreshed(_ grant: TokenGrant, of user: AccountID, binding: ServerBinding,
                                previous: (TokenSet, TokenTimes)? = nil) throws(AuthError) -> ChangeOutcome {
        do {
            return try change { (read, record) throws(AuthError) -> Change in
                if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
                guard record.user == user, record.binding == binding else {
                    throw .denied("\(user) was signed out of \(service) meanwhile; sign in again")
                }
                try keyring.store(grant.tokens, service: service, account: user, server: binding.server, label: tokenLabel(user, binding))
                var updated = record
                updated.tokenTimes = grant.times(previous: previous.map { (tokens: $0.0, times: $0.1) })
                return Change(record: updated)
            }
        } catch {
            switch error {
            case .settingsIO, .temporaryFailure, .unavailable:
                throw error.adding("; the new tokens may be lost, so the session may have to be signed in again")
            default:
                throw error
            }
        }
    }

    /// Signs `user` out because the server ended the session (`expired`) or its item is gone
    /// (`removed`): the item is deleted, the user cleared, one event. Returns the error to report.
    private func endSession(of user: AccountID, reason: LoginEvent.Reason) throws(AuthError) -> AuthError {
        var server = ""
        var endedMeanwhile = false
        _ = try change { (read, record) throws(AuthError) -> Change in
            server = record.binding.map { " at \($0.server)" } ?? ""
            // The transaction itself ends a session whose item is gone (reason `removed`), and
            // another process may have ended it between this one's reads: then it has ended.
            guard record.user == user, let binding = record.binding else {
                endedMeanwhile = read.record.user != user
                return Change()
            }
            return try ending(user, binding: binding, in: record, reason: reason)
        }
        if endedMeanwhile {
            return .denied("the session of \(user)\(server) (\(service)) has ended; sign in again")
        }
        return reason == .removed
            ? .notSignedIn("\(user) is no longer signed in to \(service): its tokens are gone from the keyring; sign in again")
            : .denied("the session of \(user)\(server) (\(service)) has ended: the server no longer accepts it; sign in again")
    }

    /// The change that signs `user` out of a bound service and deletes its tokens: one
    /// `signed-out` event with `reason`.
    private func ending(_ user: AccountID, binding: ServerBinding, in record: SessionRecord,
                        reason: LoginEvent.Reason) throws(AuthError) -> Change {
        var change = Change()
        change.events = [try event(.signedOut, user, reason, name: record.name ?? "", at: clock(), after: record.sequence)]
        change.record = record.signedOut(sequence: change.events[0].sequence)
        let key = ItemKey(service: service, account: user, server: binding.server)
        let old = try keyring.secret(key)
        try keyring.deleteItem(key)
        change.undo = { self.restore(old, at: key, label: self.tokenLabel(user, binding)) }
        return change
    }

    /// Ends a session that is over though no command ended it: the signed-in account's keyring
    /// item was removed behind authctl's back (one `signed-out` event, reason `removed`), or its
    /// refresh token's known expiry has passed (reason `expired`; the tokens are deleted).
    /// Otherwise nothing happens, and nothing is written. `serve` calls it when the keyring or
    /// the clock says a session may have ended; it never prompts and never asks a server.
    @discardableResult
    public func endSessionIfOver() throws(AuthError) -> ChangeOutcome {
        let record = try intactRecord()
        // Most calls find nothing to do: look before taking the settings lock.
        guard record.user != nil, try signedInAccount(in: record) == nil || sessionHasEnded(record) else {
            return ChangeOutcome(events: [], warnings: [])
        }
        return try change { (read, record) throws(AuthError) -> Change in
            if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
            guard let user = record.user, let binding = record.binding, sessionHasEnded(record) else { return Change() }
            return try ending(user, binding: binding, in: record, reason: .expired)
        }
    }

    private func refuseRebinding(_ record: SessionRecord, to binding: ServerBinding?) throws(AuthError) {
        guard let binding, let user = record.user, record.binding != binding else { return }
        let current = record.binding
        let difference = current == nil ? "with a local password"
            : current?.server != binding.server ? "at \(current!.server)"
            : "with another protocol, client id, scope or revoke URL at \(binding.server)"
        throw .invalidInput("\(user) is signed in to \(service) \(difference); \(hint: .signOutFirst), then sign in with the new binding")
    }

    /// Best effort: a revocation that fails is a warning; the sign-out stands.
    private func revoke(_ tokens: TokenSet, binding: ServerBinding) async -> [String] {
        do throws(AuthError) {
            try await tokenClients(binding).revoke(tokens)
            return []
        } catch {
            return ["the refresh token was not revoked (\(error.message)); it stays valid at the server until it expires"]
        }
    }

    func tokenLabel(_ account: AccountID, _ binding: ServerBinding) -> String {
        "authctl tokens for \(account) at \(binding.server) (\(service))"
    }

    /// Puts an item back as it was, or removes it when there was none. Best effort: it runs
    /// while another failure is being reported.
    func restore(_ secret: [UInt8]?, at key: ItemKey, label: String) {
        if let secret {
            try? keyring.store(secret, contentType: key.server == nil ? "text/plain" : "application/json", for: key, label: label)
        } else {
            _ = try? keyring.deleteItem(key)
        }
    }
}

extension AuthError {
    /// The same failure with `note` added to its message.
    func adding(_ note: String) -> AuthError {
        switch self {
        case .notSignedIn(let message): .notSignedIn(message + note)
        case .usage(let message): .usage(message + note)
        case .invalidInput(let message): .invalidInput(message + note)
        case .unavailable(let message, let detail): .unavailable(message + note, detail: detail)
        case .settingsIO(let message): .settingsIO(message + note)
        case .temporaryFailure(let message, let detail): .temporaryFailure(message + note, detail: detail)
        case .protocolError(let message): .protocolError(message + note)
        case .denied(let message): .denied(message + note)
        case .settingsUnsafe(let message): .settingsUnsafe(message + note)
        }
    }
}

/// The refresh in flight in this process, so that concurrent tasks share one (the refresh lock
/// file does the same across processes).
actor RefreshFlight {
    private var running: Task<Result<AuthController.AccessToken, AuthError>, Never>?

    func run(_ refresh: @escaping @Sendable () async throws(AuthError) -> AuthController.AccessToken) async throws(AuthError) -> AuthController.AccessToken {
        if let running { return try await running.value.get() }
        let task = Task { () async -> Result<AuthController.AccessToken, AuthError> in
            do throws(AuthError) { return .success(try await refresh()) } catch { return .failure(error) }
        }
        running = task
        defer { running = nil }
        return try await task.value.get()
    }
}

/// The token client of a controller made without a transport: every call fails.
struct UnreachableTokenClient: TokenClient {
    private static let failure = AuthError.unavailable("this program cannot reach token servers (no HTTP transport was given)")
    func signIn(account: AccountID, password: Password, register: Bool) async throws(AuthError) -> TokenGrant { throw Self.failure }
    func refresh(_ tokens: TokenSet) async throws(AuthError) -> TokenGrant { throw Self.failure }
    func revoke(_ tokens: TokenSet) async throws(AuthError) { throw Self.failure }
}
