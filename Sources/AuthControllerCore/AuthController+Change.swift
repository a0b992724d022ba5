// SPDX-License-Identifier: Apache-2.0
/// The change transaction every operation shares, and the two changes several of them make:
/// a session that ends, and an account that signs in. Everything here blocks (the settings
/// lock, the keyring); the `async` operations call it through `offload(_:)`.
extension AuthController {
    /// What a change under the settings lock does: the record to save (`nil`: nothing to
    /// save), its events, warnings, and how to put the keyring back should the save fail.
    struct Change {
        var record: SessionRecord?
        var events: [LoginEvent] = []
        var warnings: [AuthError.Message] = []
        var undo: () -> Void = {}
        /// Said after the note that a corrupt settings file was replaced.
        var whenReplaced: String?
    }

    /// The transaction every change shares: under the settings lock, read the record, end a
    /// stale session (the settings name a user whose item is gone from an unlocked keyring: one
    /// `signed-out` event, reason `removed`; a locked keyring proves nothing), let `body` make its change to the keyring, save the record — undoing
    /// the keyring change if that fails, so a failed command changes nothing — and broadcast
    /// the events; after the lock, post them in-process.
    func change(_ body: (SettingsRead, SessionRecord) throws(AuthError) -> Change) throws(AuthError) -> ChangeOutcome {
        var warnings: [AuthError.Message] = []
        let events = try settings.withExclusiveLock { () throws(AuthError) -> [LoginEvent] in
            let read = try settings.read(service: service)
            var record = read.record
            var stale = Change()
            if let user = record.user, try keyring.itemIsGone(itemKey(user, in: record)) {
                stale = try endingSession(of: user, in: record, reason: .removed, deletingItem: false)
                record = stale.record ?? record
            }
            var change = try body(read, record)
            if change.record == nil { change.record = stale.record }
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
            let events = stale.events + change.events
            warnings += change.warnings + broadcast(events)
            return events
        }
        post(events)
        return ChangeOutcome(events: events, warnings: warnings)
    }

    /// The change that ends `user`'s session, whatever ends it (a sign-out, `forget`, a server
    /// that no longer accepts it, an item removed behind authctl's back): one `signed-out`
    /// event with `reason`, the record signed out (its binding stays), and — when
    /// `deletingItem` — the user's keyring item deleted, to be put back should the save fail.
    func endingSession(of user: AccountID, in record: SessionRecord, reason: LoginEvent.Reason,
                       deletingItem: Bool = true) throws(AuthError) -> Change {
        var change = Change()
        change.events = [try event(.signedOut, user, reason, name: record.name ?? "", at: clock(), after: record.sequence)]
        change.record = record.signedOut(sequence: change.events[0].sequence, because: reason)
        if deletingItem {
            let key = itemKey(user, in: record)
            let removed = try keyring.secret(key)
            try keyring.deleteItem(key)
            let label = record.binding.map { tokenLabel(user, $0) } ?? label(for: user)
            change.undo = { self.restore(removed, at: key, label: label) }
        }
        deleteAWSCredentials(of: user, in: record)
        return change
    }

    /// Deletes the AWS credentials kept for `account`'s sessions of an OpenID service: they end
    /// with the session. Not put back should the change fail (they are asked for again), and
    /// best effort: a keyring that cannot list them now keeps them only until they expire.
    func deleteAWSCredentials(of account: AccountID, in record: SessionRecord) {
        guard record.binding?.tokenProtocol == .oidc else { return }
        for role in (try? keyring.awsRoles(service: service, account: account)) ?? [] {
            _ = try? keyring.deleteItem(ItemKey(service: service, account: account, awsRole: role))
        }
    }

    /// A change to the lists a record keeps across sign-outs (git hosts, registries): `update`
    /// edits a copy of the record and says whether it changed anything, which is returned. A
    /// corrupt settings file is refused, and so is a service not bound to a token server when
    /// `unbound` says how; nothing is saved when nothing changed.
    func changeKeptLists(unbound: AuthError.Message? = nil,
                         _ update: (inout SessionRecord) throws(AuthError) -> Bool) throws(AuthError) -> Bool {
        var changed = false
        _ = try change { (read, record) throws(AuthError) -> Change in
            if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
            if let unbound, record.binding == nil { throw .invalidInput(unbound) }
            var updated = record
            guard try update(&updated) else { return Change() }
            changed = true
            return Change(record: updated)
        }
        return changed
    }

    /// The change that signs `account` in over `record` (which names someone else, or nobody):
    /// `signed-in` with reason `sign-in`, or for a switch `signed-out` of the previous account
    /// and then `signed-in`, both with reason `switch`; and the record of the new session.
    /// The keyring is the caller's to change.
    func signingIn(_ account: AccountID, name: String, over record: SessionRecord, binding: ServerBinding?,
                   tokenTimes: TokenTimes? = nil) throws(AuthError) -> Change {
        var change = Change()
        let now = clock()
        let previous = record.user
        if let previous {
            change.events.append(try event(.signedOut, previous, .switch, name: record.name ?? "", at: now, after: record.sequence))
            if previous != account { deleteAWSCredentials(of: previous, in: record) }
        }
        change.events.append(try event(.signedIn, account, previous == nil ? .signIn : .switch, name: name, at: now,
                                       after: record.sequence, skipping: change.events.count, previousUser: previous))
        change.record = SessionRecord(user: account, name: name, signedInAt: Timestamp.rfc3339(microseconds: now),
                                      sequence: change.events.last!.sequence, binding: binding, tokenTimes: tokenTimes)
        change.record?.keepLists(of: record)
        return change
    }

    /// Where `account`'s item is: its password hash, or its tokens at the bound server.
    func itemKey(_ account: AccountID, in record: SessionRecord) -> ItemKey {
        ItemKey(service: service, account: account, server: record.binding?.server)
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
        return LoginEvent(service: service, status: status, account: user, reason: reason, name: name,
                          timestamp: Timestamp.date(microseconds: time),
                          sequence: number, previousAccount: previousUser)
    }

    /// Broadcasts under the lock, so processes' events go out in the order of their changes.
    /// A bus that went away after the change was stored is a warning: the change stands.
    private func broadcast(_ events: [LoginEvent]) -> [AuthError.Message] {
        do {
            try broadcaster.broadcast(events)
            return []
        } catch {
            return [error.explanation]
        }
    }

    /// Puts an item back as it was, or removes it when there was none. Best effort: it runs
    /// while another failure is being reported.
    func restore(_ secret: [UInt8]?, at key: ItemKey, label: String) {
        if let secret {
            try? keyring.store(secret, contentType: key.holdsJSON ? "application/json" : "text/plain", for: key, label: label)
        } else {
            _ = try? keyring.deleteItem(key)
        }
    }
}

/// What a change did: its events, and warnings worth telling the user.
public struct ChangeOutcome: Equatable, Sendable {
    /// The events emitted, in order (empty when the status did not change).
    public var events: [LoginEvent]
    /// One-line notes: nobody was signed in, an upgrade could not be stored, listeners were
    /// not notified, a corrupt settings file was replaced.
    public var warnings: [AuthError.Message]
}
