// SPDX-License-Identifier: Apache-2.0
/// Local accounts: a password hash per account in the keyring, made and checked by the
/// controller's ``PasswordHasher``, and upgraded when its parameters are weaker than the
/// defaults. Everything here blocks (Argon2 for the hashing time, the keyring); the `async`
/// operations call it through `offload(_:)`.
extension AuthController {
    /// Signs `account` in locally. Argon2 is slow by design: it runs before the settings lock is
    /// taken, and under the lock the keyring is checked to still hold what was verified.
    @discardableResult
    func signInLocally(account: AccountID, name: String, password: Password) throws(AuthError) -> ChangeOutcome {
        // Settings problems (78, 74) are reported before keyring ones.
        _ = try settings.read(service: service)
        // Any unlock prompt comes now, before the settings lock is taken.
        try keyring.unlock()
        let seen = try keyring.secret(service: service, account: account)
        var plan = try plan(signingIn: account, password: password, stored: seen)
        return try change { (read, record) throws(AuthError) -> Change in
            let stored = try keyring.secret(service: service, account: account)
            if stored != seen { plan = try self.plan(signingIn: account, password: password, stored: stored) }
            if record.user == account && read.corruption == nil {
                // Already signed in: nothing to record, but a weak hash is still upgraded.
                var change = Change()
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
            var change = try signingIn(account, name: name, over: record, binding: record.binding)
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

    /// Checks `password` against the signed-in account's hash, upgrading a weak one.
    func verifyLocally(_ password: Password) throws(AuthError) -> ChangeOutcome {
        let current = try status()
        // Any unlock prompt comes now: a locked keyring answers the status from the settings alone.
        if current.keyringLocked { try keyring.unlock() }
        guard let account = current.account,
              let stored = try keyring.secret(service: service, account: account) else {
            throw .notSignedIn("nobody is signed in to \(service)")
        }
        guard case .match(let upgraded) = try check(password, against: stored, of: account) else {
            throw .denied("wrong password for \(account)")
        }
        var warnings: [AuthError.Message] = []
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

    /// What a local sign-in stores: a new hash (enrolment), an upgraded one, or nothing.
    private struct HashPlan {
        var hashToStore: String?
        var isUpgrade: Bool
    }

    private func plan(signingIn account: AccountID, password: Password, stored: String?) throws(AuthError) -> HashPlan {
        guard let stored else { return HashPlan(hashToStore: try hasher.hash(password), isUpgrade: false) }
        guard case .match(let upgraded) = try check(password, against: stored, of: account) else {
            throw .denied("wrong password for \(account)")
        }
        return HashPlan(hashToStore: upgraded, isUpgrade: true)
    }

    private func check(_ password: Password, against stored: String, of account: AccountID) throws(AuthError) -> PasswordVerification {
        let verification = hasher.verify(password, against: stored)
        switch verification {
        case .unusable(let reason):
            throw .invalidInput("the stored secret of \(account) is not an authctl password hash (\(reason)); \(hint: .forget(account))")
        case .failed(let error):
            throw error
        case .match, .mismatch:
            return verification
        }
    }

    /// The keyring label of `account`'s password hash.
    func label(for account: AccountID) -> String { "authctl password hash for \(account) (\(service))" }

    private func upgradeFailedNote(_ error: AuthError) -> AuthError.Message {
        "could not store the stronger password hash (\(error.explanation)); the old one stays"
    }
}
