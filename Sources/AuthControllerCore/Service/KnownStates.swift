import Synchronization

/// The services' states as the last re-read found them, for answering `GetStatus` without the
/// keyring: a keyring that does not answer then delays the re-read, not every caller.
///
/// A state is used only while nothing may have changed it since it was read: every trigger of a
/// re-read (a signal, the settings file's watch) and every change `serve` makes itself forgets
/// them all at once, before the next call is dispatched; the caller also checks the service's
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
        var entries: [ServiceName: Entry] = [:]
    }

    private let state = Mutex(State())

    /// The moment of a re-read's start, to hand back to ``store(_:readAt:)``.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Something may have changed: no state is used until the next re-read stores new ones.
    func forget() {
        state.withLock { state in
            state.generation += 1
            state.entries = [:]
        }
    }

    /// Keeps a re-read's states, unless something may have changed since it began.
    func store(_ entries: [ServiceName: Entry], readAt generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            state.entries = entries
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
