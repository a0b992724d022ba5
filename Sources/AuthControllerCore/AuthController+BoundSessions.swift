// SPDX-License-Identifier: Apache-2.0
public import FoundationEssentials

/// Sessions of a service bound to a token server: the password goes to the server, the tokens
/// to the keyring, and ``accessToken(minValid:forceRefresh:checkingIDToken:)`` hands out a fresh access token,
/// refreshing it at most once per call and, across every process and task, one refresh at a
/// time.
///
/// No network call ever happens under the settings lock: the server is asked first, and the
/// answer is stored under the lock afterwards. The blocking steps around each request run
/// through `offload(_:)`.
extension AuthController {
    /// An access token ready for use, as ``accessToken(minValid:forceRefresh:checkingIDToken:)`` and the D-Bus
    /// method `GetToken` of `serve` hand it out.
    public struct AccessToken: Equatable, Sendable {
        /// The signed-in account the token belongs to.
        public var account: AccountID
        /// The token itself, for an `Authorization` header.
        public var token: String
        /// Its type, as the server named it (usually `Bearer`).
        public var tokenType: String
        /// When it expires, by the local clock; `nil` when unknown.
        public var expiresAt: Date?
        /// Notes for the user: e.g. the server could not be reached, so a still-valid token is
        /// handed out unrefreshed.
        public var warnings: [AuthError.Message]
        /// The ID token an OpenID provider issued with it, verified when it was stored; `nil`
        /// from other servers.
        public var idToken: String?
        /// When the ID token expires, by the local clock: its `exp` less the provider's clock
        /// offset; `nil` when there is none or its expiry is unknown.
        public var idTokenExpiresAt: Date?

        init(account: AccountID, tokens: TokenSet, times: TokenTimes?, warnings: [AuthError.Message] = []) {
            self.account = account
            token = tokens.accessToken
            idToken = tokens.idToken
            tokenType = tokens.tokenType
            expiresAt = times?.accessExpiresAt.map(Timestamp.date(microseconds:))
            // The provider's clock says when its token expires; the offset says what that is here.
            idTokenExpiresAt = tokens.idToken.flatMap(JWT.expiry(of:)).map { expiry in
                Timestamp.date(microseconds: expiry.subtractingClamped((times?.clockOffset ?? 0) * 1_000_000))
            }
            self.warnings = warnings
        }
    }

    /// The signed-in account's access token, refreshed first when it expires in less than
    /// `minValid`, counted in whole seconds (capped at half the lifetime the server granted) or when
    /// `forceRefresh`. One refresh at a time per service, across processes and tasks; the
    /// settings lock is never held while the server is asked. A session the server ended (or
    /// whose refresh token expired) is signed out — one `signed-out` event, reason `expired` —
    /// and reported as ``AuthError/denied(_:)-enum.case``. Never prompts; the keyring and settings
    /// run off the cooperative pool. The D-Bus method `GetToken` of `serve` calls it.
    ///
    /// When the server issued no refresh token, the access token is handed out as it is for as
    /// long as it lives (with a warning when `forceRefresh` asked for a new one), and the
    /// session ends when it expires. When another refresher holds the refresh lock beyond the
    /// wait (it is stopped or hung), that counts as a failed refresh: a token that has not
    /// expired is handed out with a warning.
    ///
    /// With `checkingIDToken`, the tokens are also refreshed when the ID token (OpenID
    /// providers) expires within the threshold.
    public func accessToken(minValid: Duration = .seconds(60), forceRefresh: Bool = false,
                            checkingIDToken: Bool = false) async throws(AuthError) -> AccessToken {
        let minValid = minValid.wholeSeconds
        let session = try await offload { () throws(AuthError) in try self.currentSession() }
        guard session.tokens.refreshToken != nil else { return unrenewable(session, forced: forceRefresh) }
        // An ID token about to expire is renewed as a forced refresh would renew it.
        let forceRefresh = forceRefresh || (checkingIDToken && idTokenIsDue(session, minValid: minValid))
        guard forceRefresh || isDue(session.times, minValid: minValid) else {
            return AccessToken(account: session.user, tokens: session.tokens, times: session.times)
        }
        return try await refreshes.run { () async throws(AuthError) -> AccessToken in
            var locked = false
            do throws(AuthError) {
                return try await self.settings.withRefreshLock(service: self.service, timeout: self.serverTimeout + .seconds(5)) { () async throws(AuthError) -> AccessToken in
                    locked = true
                    return try await self.refresh(session, minValid: minValid, forced: forceRefresh)
                }
            } catch {
                guard !locked, case .temporaryFailure = error else { throw error }
                return try await offload { () throws(AuthError) in try self.refreshLockNotHad(error, seen: session, minValid: minValid) }
            }
        }
    }

    /// Ends a session that is over though no command ended it: the signed-in account's keyring
    /// item was removed behind authctl's back (one `signed-out` event, reason `removed`), or its
    /// refresh token's known expiry has passed (reason `expired`; the tokens are deleted).
    /// Otherwise nothing happens, and nothing is written. `serve` calls it when the keyring or
    /// the clock says a session may have ended. Blocks on the settings and the keyring; never
    /// prompts and never asks a server.
    @discardableResult
    package func endSessionIfOver() throws(AuthError) -> ChangeOutcome {
        let record = try intactRecord()
        // Most calls find nothing to do: look before taking the settings lock.
        guard record.user != nil, try signedInAccount(in: record) == nil || sessionHasEnded(record) else {
            return ChangeOutcome(events: [], warnings: [])
        }
        return try change { (read, record) throws(AuthError) -> Change in
            if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
            guard let user = record.user, sessionHasEnded(record) else { return Change() }
            return try endingSession(of: user, in: record, reason: .expired)
        }
    }

    // MARK: - Signing in and out at the server

    /// Signs `account` in at `binding`'s server with a password grant, then stores the tokens.
    func signInAtServer(account: AccountID, name: String, password: Password, register: Bool, binding: ServerBinding,
                        newBinding: ServerBinding?) async throws(AuthError) -> ChangeOutcome {
        try await offload { () throws(AuthError) in
            // Kept tokens that a new server would strand refuse the sign-in before the server
            // issues tokens that could not be stored (a corrupt file names no binding).
            let read = try self.settings.read(service: self.service)
            if read.corruption == nil {
                try self.refuseStrandingKeptTokens(read.record, to: newBinding ?? binding, then: "sign in with the new binding")
            }
            // Any unlock prompt comes now, before the server is asked and before the settings lock.
            try self.keyring.unlock()
        }
        let grant = try await tokenClients(binding).signIn(account: account, password: password, register: register)
        return try await storeSignIn(grant, account: account, name: name, binding: binding, newBinding: newBinding)
    }

    /// Stores the tokens of a sign-in of `account` at `binding`'s server and records the
    /// session (with the `email` an OpenID provider vouched for): the events of a sign-in, or
    /// none when `account` already was signed in.
    func storeSignIn(_ grant: TokenGrant, account: AccountID, name: String, binding: ServerBinding, newBinding: ServerBinding?,
                     email: String? = nil) async throws(AuthError) -> ChangeOutcome {
        // The tokens this sign-in replaces (signing in again, or after `keepingCredentials`):
        // their refresh token is revoked once the new ones are stored, so none is left live.
        let (outcome, replaced) = try await offload { () throws(AuthError) -> (ChangeOutcome, Revocation?) in
            var replaced: Revocation?
            let outcome = try self.change { (read, record) throws(AuthError) -> Change in
                try self.refuseRebinding(record, to: newBinding)
                // The binding this sign-in started from was changed or removed while the server
                // (or the person, at an OpenID provider) was asked: that change stands.
                if newBinding == nil, read.corruption == nil, record.binding != binding {
                    throw .temporaryFailure("the binding of \(self.service) changed during the sign-in, so nothing was stored; sign in again")
                }
                if read.corruption == nil {
                    try self.refuseStrandingKeptTokens(record, to: newBinding ?? binding, then: "sign in with the new binding")
                }
                let key = ItemKey(service: self.service, account: account, server: binding.server)
                let old = try self.keyring.secret(key)
                replaced = old.flatMap { self.replacedRevocation(of: $0, by: grant.tokens, binding: binding) }
                var change: Change
                if record.user != account || read.corruption != nil {
                    change = try self.signingIn(account, name: name, over: record, binding: binding, tokenTimes: grant.times())
                    change.record?.email = email
                } else {
                    var renewed = record
                    renewed.binding = binding
                    renewed.tokenTimes = grant.times()
                    renewed.email = email
                    change = Change(record: renewed)
                }
                try self.keyring.store(grant.tokens, service: self.service, account: account, server: binding.server,
                                       label: self.tokenLabel(account, binding))
                change.undo = { self.restore(old, at: key, label: self.tokenLabel(account, binding)) }
                return change
            }
            return (outcome, replaced)
        }
        return await revoking(replaced, after: outcome)
    }

    /// The revocation of the refresh token in `stored` (an item's JSON) that `tokens` replace,
    /// when it has one they do not carry again.
    func replacedRevocation(of stored: [UInt8], by tokens: TokenSet, binding: ServerBinding) -> Revocation? {
        guard let old = try? JSONDecoder().decode(TokenSet.self, from: Data(stored)), let refreshToken = old.refreshToken,
              refreshToken != tokens.refreshToken else { return nil }
        return Revocation(tokens: old, binding: binding)
    }

    /// The tokens a sign-out or `forget` of `account` revokes at the server once its change is
    /// stored; `nil` for a local service, nobody, or tokens that cannot be read.
    struct Revocation: Sendable {
        var tokens: TokenSet
        var binding: ServerBinding
    }

    /// What ending `account`'s session in `record` will revoke. Blocks on the keyring.
    func revocation(of account: AccountID?, in record: SessionRecord) -> Revocation? {
        guard let account, let binding = record.binding,
              let tokens = try? keyring.value(TokenSet.self, service: service, account: account, server: binding.server)
        else { return nil }
        return Revocation(tokens: tokens, binding: binding)
    }

    /// `outcome`, with a warning added when `revocation` fails. Best effort: the change stands.
    func revoking(_ revocation: Revocation?, after outcome: ChangeOutcome) async -> ChangeOutcome {
        guard let revocation else { return outcome }
        var outcome = outcome
        do throws(AuthError) {
            try await tokenClients(revocation.binding).revoke(revocation.tokens)
        } catch {
            outcome.warnings.append("the refresh token was not revoked (\(error.explanation)); it stays valid at the server until it expires")
        }
        return outcome
    }

    // MARK: - Refreshing

    /// The signed-in session of a bound service.
    struct Session: Sendable {
        var user: AccountID
        var binding: ServerBinding
        var tokens: TokenSet
        var times: TokenTimes
    }

    /// The signed-in session of a bound service: ends it first when its refresh token expired
    /// or its tokens are gone. A session signed out meanwhile by another process is nobody
    /// signed in; one signed in again meanwhile is read once more. Blocks.
    private func currentSession(readingAgain: Bool = true) throws(AuthError) -> Session {
        let record = try intactRecord()
        guard let binding = record.binding else {
            throw .invalidInput("\(service) is not bound to a token server; \(hint: .bindServer)")
        }
        guard let user = record.user else { throw .notSignedIn("nobody is signed in to \(service)") }
        if sessionHasEnded(record), let ended = try endSession(of: user, reason: .expired) { throw ended }
        guard let tokens = try keyring.value(TokenSet.self, service: service, account: user, server: binding.server) else {
            if let ended = try endSession(of: user, reason: .removed) { throw ended }
            // Signed out and in again between this one's reads: the new session.
            guard readingAgain else { throw .notSignedIn("\(user) was signed out of \(service) meanwhile") }
            return try currentSession(readingAgain: false)
        }
        let times = record.tokenTimes ?? TokenTimes()
        // Without a refresh token the session lives as long as its access token; the settings
        // of an earlier version may not say so, the tokens do.
        if tokens.refreshToken == nil, let expiresAt = times.accessExpiresAt, expiresAt <= clock() {
            if let ended = try endSession(of: user, reason: .expired) { throw ended }
            guard readingAgain else { throw .notSignedIn("\(user) was signed out of \(service) meanwhile") }
            return try currentSession(readingAgain: false)
        }
        return Session(user: user, binding: binding, tokens: tokens, times: times)
    }

    /// The access token of a session whose server issued no refresh token, as it is: it cannot
    /// be renewed, so a forced refresh says so in a warning and asks no server.
    private func unrenewable(_ session: Session, forced: Bool) -> AccessToken {
        let warning: AuthError.Message = "the token server \(session.binding.server) issued no refresh token, so the access token cannot be renewed; it is used as it is until it expires"
        return AccessToken(account: session.user, tokens: session.tokens, times: session.times,
                           warnings: forced ? [warning] : [])
    }

    /// The refresh lock was not had within the wait: whoever holds it is stopped or hung. That
    /// is a failed refresh — a token that has not expired is handed out with a warning — unless
    /// the stored token, read again, is fresh after all. Blocks.
    private func refreshLockNotHad(_ error: AuthError, seen: Session, minValid: UInt64) throws(AuthError) -> AccessToken {
        let session = try currentSession()
        if session.tokens != seen.tokens, !isDue(session.times, minValid: minValid) {
            return AccessToken(account: session.user, tokens: session.tokens, times: session.times)
        }
        if let expiresAt = session.times.accessExpiresAt, expiresAt <= clock() { throw error }
        return AccessToken(account: session.user, tokens: session.tokens, times: session.times,
                           warnings: ["could not refresh the access token (\(error.explanation)); it is still valid, so it is used as it is"])
    }

    /// Whether the access token expires within the threshold: `minValid`, capped at half the
    /// granted lifetime. A token whose expiry is unknown is never due.
    private func isDue(_ times: TokenTimes, minValid: UInt64) -> Bool {
        guard let expiresAt = times.accessExpiresAt else { return false }
        let threshold = min(minValid, times.accessLifetime.map { $0 / 2 } ?? minValid)
        let now = clock()
        return expiresAt <= now || expiresAt < now.addingClamped(threshold.multipliedClamped(by: 1_000_000))
    }

    /// Whether the session's ID token expires within the threshold, by the server's clock:
    /// `minValid` seconds, capped at half its lifetime (`exp` − `iat`), as for the access token.
    private func idTokenIsDue(_ session: Session, minValid: UInt64) -> Bool {
        guard let idToken = session.tokens.idToken, let expiry = JWT.expiry(of: idToken) else { return false }
        var threshold = minValid.multipliedClamped(by: 1_000_000)
        if let issuedAt = JWT.issuedAt(of: idToken), expiry > issuedAt { threshold = min(threshold, (expiry - issuedAt) / 2) }
        let serverNow = clock().subtractingClamped(-session.times.clockOffset * 1_000_000)
        return expiry < serverNow.addingClamped(threshold)
    }

    /// The refresh itself, holding the service's refresh lock: whoever waited for the lock
    /// first looks again — another process may have refreshed meanwhile, or ended the session.
    private func refresh(_ seen: Session, minValid: UInt64, forced: Bool) async throws(AuthError) -> AccessToken {
        let (user, binding) = (seen.user, seen.binding)
        let ended = AuthError.denied("the session of \(user) at \(binding.server) (\(service)) has ended; sign in again")
        let session: Session
        do {
            session = try await offload { () throws(AuthError) in try self.currentSession() }
        } catch {
            // Whoever held the lock before ended the session: the server (or its expiry), which
            // is this refresh's end too, or a sign-out or `forget`, after which nobody is signed in.
            if case .notSignedIn = error,
               try await offload({ () throws(AuthError) in try self.intactRecord().endedBecause }) == .expired { throw ended }
            throw error
        }
        // Another account signed in meanwhile: this one was signed out.
        guard session.user == user, session.binding == binding else {
            throw .notSignedIn("\(user) was signed out of \(service) meanwhile")
        }
        // A sign-in meanwhile at a server that issues no refresh token.
        guard session.tokens.refreshToken != nil else { return unrenewable(session, forced: forced) }
        // Another process may have refreshed while this one waited: its token is used as it is.
        if forced ? session.tokens != seen.tokens : !isDue(session.times, minValid: minValid) {
            return AccessToken(account: user, tokens: session.tokens, times: session.times)
        }
        let grant: TokenGrant
        do {
            // A stopping `serve` sends no new request; one already sent is awaited and stored.
            try RefreshGate.checkOpen()
            grant = try await tokenClients(binding).refresh(session.tokens)
        } catch {
            return try await offload { () throws(AuthError) in try self.refreshFailed(error, session) }
        }
        let previous = (tokens: session.tokens, times: session.times)
        let outcome: ChangeOutcome
        do {
            outcome = try await offload { () throws(AuthError) in
                try self.storeRefreshed(grant, of: user, binding: binding, previous: previous)
            }
        } catch {
            // Signed out, or another account signed in, while the server answered: the tokens it
            // issued have nowhere to go, so their refresh token is revoked, not left live.
            if case .notSignedIn = error, grant.tokens.refreshToken != nil {
                _ = await revoking(Revocation(tokens: grant.tokens, binding: binding), after: ChangeOutcome(events: [], warnings: []))
            }
            throw error
        }
        return AccessToken(account: user, tokens: grant.tokens, times: grant.times(previous: previous),
                           warnings: outcome.warnings)
    }

    /// A refused refresh token ends the session — unless another process rotated it meanwhile;
    /// any other failure still hands out a token that has not expired yet, with a warning. Blocks.
    private func refreshFailed(_ error: AuthError, _ session: Session) throws(AuthError) -> AccessToken {
        if case .denied = error {
            let again = try keyring.value(TokenSet.self, service: service, account: session.user, server: session.binding.server)
            if let again, again.refreshToken != session.tokens.refreshToken {
                return AccessToken(account: session.user, tokens: again, times: try intactRecord().tokenTimes)
            }
            throw try endSession(of: session.user, reason: .expired) ?? error
        }
        if let expiresAt = session.times.accessExpiresAt, expiresAt <= clock() { throw error }
        return AccessToken(account: session.user, tokens: session.tokens, times: session.times,
                           warnings: ["could not refresh the access token (\(error.explanation)); it is still valid, so it is used as it is"])
    }

    /// Stores new tokens of the signed-in `user` and their times: the rotated refresh token is
    /// in the keyring before anything uses the new access token. No event. Blocks.
    func storeRefreshed(_ grant: TokenGrant, of user: AccountID, binding: ServerBinding,
                        previous: (tokens: TokenSet, times: TokenTimes)? = nil) throws(AuthError) -> ChangeOutcome {
        do {
            return try change { (read, record) throws(AuthError) -> Change in
                if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
                guard record.user == user, record.binding == binding else {
                    throw .notSignedIn("\(user) was signed out of \(service) meanwhile")
                }
                try keyring.store(grant.tokens, service: service, account: user, server: binding.server, label: tokenLabel(user, binding))
                var updated = record
                updated.tokenTimes = grant.times(previous: previous)
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
    /// (`removed`): the item is deleted, the user cleared, one event. Returns the error to
    /// report; `nil` when, for `removed`, the item is there again (signed out and in again
    /// meanwhile), and nothing was ended. Blocks.
    private func endSession(of user: AccountID, reason: LoginEvent.Reason) throws(AuthError) -> AuthError? {
        var server = ""
        var endedMeanwhile = false
        var serverEndedIt = reason == .expired
        var signedInAgain = false
        _ = try change { (read, record) throws(AuthError) -> Change in
            server = record.binding.map { " at \($0.server)" } ?? ""
            // The transaction itself ends a session whose item is gone (reason `removed`), and
            // another process may have ended it between this one's reads: then it has ended.
            guard record.user == user, record.binding != nil else {
                endedMeanwhile = read.record.user != user
                serverEndedIt = serverEndedIt || read.record.endedBecause == .expired
                return Change()
            }
            // Still signed in after the transaction's own look at the item: it is back.
            if reason == .removed {
                signedInAgain = true
                return Change()
            }
            return try endingSession(of: user, in: record, reason: reason)
        }
        if signedInAgain { return nil }
        if endedMeanwhile {
            // Signed out or forgotten by another process: nobody is signed in. An expiry this
            // process saw itself, or the server's end of it, is the session's end.
            guard serverEndedIt else { return .notSignedIn("nobody is signed in to \(service)") }
            return .denied("the session of \(user)\(server) (\(service)) has ended; sign in again")
        }
        return reason == .removed
            ? .notSignedIn("\(user) is no longer signed in to \(service): its tokens are gone from the keyring; sign in again")
            : .denied("the session of \(user)\(server) (\(service)) has ended: the server no longer accepts it; sign in again")
    }

    /// The keyring label of `account`'s tokens at `binding`'s server.
    func tokenLabel(_ account: AccountID, _ binding: ServerBinding) -> String {
        "authctl tokens for \(account) at \(binding.server) (\(service))"
    }
}
