// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// The services' states as the last re-read found them, for answering `GetStatus` without the
/// keyring: a keyring that does not answer then delays the re-read, not every caller.
///
/// A state is used only while nothing may have changed it since it was read: every trigger of a
/// re-read (a signal, the settings file's watch) forgets them all at once, and a change `serve`
/// makes itself forgets its service's, before the next call is dispatched; the caller also checks the service's
/// settings record, read again, against the one the state was made from, and a state is not used
/// past its session's end.
final class KnownStates: Sendable {
    /// One service's state and what it was made from.
    struct Entry: Sendable {
        let status: LoginStatus
        let record: SessionRecord
        /// When the session ends by itself (µs, wall clock), if it does.
        let endsAt: UInt64?
    }

    private struct State {
        var generation: UInt64 = 0
        /// The generation of the last ``forget()`` of every service.
        var allForgottenAt: UInt64 = 0
        /// The generation at which each service was last forgotten on its own.
        var forgottenAt: [ServiceName: UInt64] = [:]
        var entries: [ServiceName: Entry] = [:]
    }

    private let state = Mutex(State())

    /// The moment of a re-read's start, to hand back to ``store(_:readAt:)``.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Something may have changed any service (a signal, the settings file, the keyring): no
    /// state is used until the next re-read stores new ones.
    func forget() {
        state.withLock { state in
            state.generation += 1
            state.allForgottenAt = state.generation
            state.forgottenAt = [:]
            state.entries = [:]
        }
    }

    /// A call of `serve`'s own may change `service` (a refresh, a sign-out): its state is not
    /// used until a re-read that began after now, while the others' states stay in use, so that
    /// a keyring that does not answer does not hold up their `GetStatus`.
    func forget(_ service: ServiceName) {
        state.withLock { state in
            state.generation += 1
            state.forgottenAt[service] = state.generation
            state.entries[service] = nil
        }
    }

    /// Keeps a re-read's states, but none that something may have changed since it began. The
    /// states of the services in `unknown`, which the re-read could not read (a keyring that does
    /// not answer), stay as they were: nothing said they changed, and a re-read that waited for
    /// the keyring must not leave `GetStatus` waiting for it too.
    func store(_ entries: [ServiceName: Entry], keeping unknown: Set<ServiceName> = [], readAt generation: UInt64) {
        state.withLock { state in
            guard state.allForgottenAt <= generation else { return }
            var kept = state.entries.filter { service, _ in unknown.contains(service) }
            kept.merge(entries) { _, new in new }
            state.entries = kept.filter { service, _ in state.forgottenAt[service, default: 0] <= generation }
        }
    }

    /// The state of `service` if it is known, was made from `record`, and its session has not
    /// ended by `now`.
    func status(of service: ServiceName, record: SessionRecord, now: UInt64) -> LoginStatus? {
        guard let entry = state.withLock({ $0.entries[service] }), entry.record == record else { return nil }
        if let endsAt = entry.endsAt, now >= endsAt { return nil }
        return entry.status
    }
}
