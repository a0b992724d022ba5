// SPDX-License-Identifier: Apache-2.0
/// What `serve` tells the person on the desktop about sessions that ended without their asking,
/// decided from what it sees — its own events, signals from other processes, its re-reads of the
/// settings, and the notification server's signals — with no I/O of its own: the run loop
/// carries out the ``Step``s.
///
/// A signal alone proves nothing (any peer on the bus can send one): an end another process
/// announces is told only when serve knew the account as signed in and a re-read then shows
/// the service signed out with the signal's sequence, for the signal's reason. One notice per ended session, closed by a later sign-in; the sign-in it
/// offers starts only at the word of the notification server itself, once per notice.
struct SessionEndNotices {
    /// A notice to post.
    struct Notice: Equatable, Sendable {
        let service: ServiceName
        let account: AccountID
        /// `expired` or `removed`.
        let reason: LoginEvent.Reason
        /// The sequence of the `signed-out` event.
        let sequence: UInt64
        /// Whether it offers to sign in again (a service bound to an OpenID provider, whose
        /// browser sign-in needs nobody at a terminal).
        let offersSignIn: Bool
    }

    /// What the run loop does.
    enum Step: Equatable, Sendable {
        case post(Notice)
        /// Withdraws a posted notice (`CloseNotification`).
        case close(id: UInt32)
        /// Starts the browser sign-in of `account` (the person chose the notice's action).
        case signIn(ServiceName, AccountID)
    }

    /// A notice posted, or being posted.
    private struct Open {
        let notice: Notice
        /// The notification server's id, once `Notify` has answered.
        var id: UInt32?
        /// A later sign-in came while `Notify` was under way: withdraw it once it has an id.
        var withdrawn = false
        /// Its action was taken: a second `ActionInvoked` for it starts nothing.
        var acted = false
    }

    /// The last signed-in state each service's re-read showed.
    private var lastSignedIn: [ServiceName: (account: AccountID, sequence: UInt64)] = [:]
    /// Ends other processes announced, awaiting a re-read that confirms them.
    private var claims: [ServiceName: [LoginEvent]] = [:]
    private var open: [ServiceName: Open] = [:]
    /// The sequence of the last end each service was told of: never twice.
    private var told: [ServiceName: UInt64] = [:]
    /// The services bound to an OpenID provider, as the last re-read found them.
    private var openIDServices: Set<ServiceName> = []
    /// At most this many claims wait per service: a flood of forged signals costs nothing more.
    static let claimLimit = 16

    /// An event of serve's own (its refresh, its timer, its watch of the keyring ended a session).
    mutating func ownEvent(_ event: LoginEvent) -> [Step] {
        guard let account = Self.endedUnasked(event) else { return [] }
        return tell(Notice(service: event.service, account: account, reason: event.reason, sequence: event.sequence,
                           offersSignIn: openIDServices.contains(event.service)))
    }

    /// The account whose session `event` ended without the person asking (the server ended it, or
    /// its keyring item was removed): the ends a notice tells of.
    private static func endedUnasked(_ event: LoginEvent) -> AccountID? {
        guard event.status == .signedOut, event.reason == .expired || event.reason == .removed else { return nil }
        return event.account
    }

    /// A `LoginStatusChanged` signal from anyone: an end it claims waits for a re-read.
    mutating func signal(_ event: LoginEvent) {
        // Only an account serve knew as signed in can have ended: a signal about any other is
        // not kept (a flood of them about made-up services costs nothing).
        guard let account = Self.endedUnasked(event), lastSignedIn[event.service]?.account == account else { return }
        var waiting = claims[event.service, default: []]
        guard !waiting.contains(event) else { return }
        waiting.append(event)
        claims[event.service] = waiting.suffix(Self.claimLimit)
    }

    /// What a re-read found: each readable service's record.
    mutating func reread(_ records: [ServiceName: SessionRecord]) -> [Step] {
        var steps: [Step] = []
        for (service, record) in records {
            if record.binding?.tokenProtocol == .oidc { openIDServices.insert(service) } else { openIDServices.remove(service) }
            if let waiting = claims[service] {
                for claim in waiting where record.user == nil && record.sequence == claim.sequence
                    && record.endedBecause == claim.reason
                    && lastSignedIn[service].map({ $0.account == claim.account && $0.sequence < claim.sequence }) == true {
                    steps += tell(Notice(service: service, account: claim.account!, reason: claim.reason, sequence: claim.sequence,
                                         offersSignIn: record.binding?.tokenProtocol == .oidc))
                }
                // A claim the settings have gone past is decided; one ahead of them waits for a
                // re-read that began after its change.
                let ahead = waiting.filter { $0.sequence > record.sequence }
                claims[service] = ahead.isEmpty ? nil : ahead
            }
            guard let user = record.user else { continue }
            lastSignedIn[service] = (user, record.sequence)
            if let notice = open[service], record.sequence > notice.notice.sequence {
                steps += withdraw(service)
            }
        }
        return steps
    }

    /// `Notify` answered `id` for `notice`; a sign-in that came meanwhile withdraws it at once.
    mutating func posted(_ notice: Notice, id: UInt32) -> [Step] {
        guard var entry = open[notice.service], entry.notice == notice else { return [.close(id: id)] }
        entry.id = id
        if entry.withdrawn {
            open[notice.service] = nil
            return [.close(id: id)]
        }
        open[notice.service] = entry
        return []
    }

    /// `Notify` failed (no server, or one that did not answer): nothing is open.
    mutating func notPosted(_ notice: Notice) {
        if open[notice.service]?.notice == notice { open[notice.service] = nil }
    }

    /// `ActionInvoked(id, action)` from `sender`, while `owner` owns the notification server's
    /// name: the sign-in starts for the server's word about a notice of serve's, once.
    mutating func actionInvoked(id: UInt32, action: String, sender: String, owner: String?) -> [Step] {
        guard action == "default", let owner, sender == owner,
              let (service, entry) = open.first(where: { $0.value.id == id }), entry.notice.offersSignIn, !entry.acted else { return [] }
        open[service]?.acted = true
        return [.signIn(service, entry.notice.account)]
    }

    /// `NotificationClosed(id, …)` from `sender`: the server has it closed, so it is not
    /// withdrawn again.
    mutating func closed(id: UInt32, sender: String, owner: String?) {
        guard let owner, sender == owner, let service = open.first(where: { $0.value.id == id })?.key else { return }
        open[service] = nil
    }

    /// Another notification server (or none) owns the name now: the ids of the last one mean
    /// nothing there.
    mutating func serverChanged() {
        open = open.filter { $0.value.id == nil }
    }

    private mutating func tell(_ notice: Notice) -> [Step] {
        guard told[notice.service].map({ $0 < notice.sequence }) ?? true else { return [] }
        told[notice.service] = notice.sequence
        var steps: [Step] = []
        // A session ends once: an older notice of the service is withdrawn for the new one.
        if open[notice.service] != nil { steps += withdraw(notice.service) }
        open[notice.service] = Open(notice: notice)
        return steps + [.post(notice)]
    }

    private mutating func withdraw(_ service: ServiceName) -> [Step] {
        guard let entry = open[service] else { return [] }
        guard let id = entry.id else {
            open[service]?.withdrawn = true
            return []
        }
        open[service] = nil
        return [.close(id: id)]
    }
}
