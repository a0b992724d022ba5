import Synchronization

/// The work under way in `serve`: method calls being answered and background refreshes.
///
/// Stopping waits for the work that changes something — a sign-out, a refresh whose rotated
/// tokens must be stored before the process ends — and answers the reads still waiting (for a
/// keyring that does not answer, say) with an error instead of waiting for them.
final class InFlight: Sendable {
    /// One piece of work, from ``begin(_:answering:)`` to ``end(_:)``.
    struct Ticket: Sendable {
        fileprivate let id: UInt64
        fileprivate let mustFinish: Bool
    }

    /// What stopping does with a piece of work.
    enum Kind: Sendable {
        /// Changes the state: stopping waits for it.
        case change
        /// Only reads: stopping answers it with an error and does not wait.
        case read
    }

    private struct State {
        var nextID: UInt64 = 0
        var changes = 0
        var reads: [UInt64: BusObjects.Invocation?] = [:]
        var drainWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// Waits whose deadline came before they began to wait.
        var expiredWaits: Set<UInt64> = []
    }

    private let state = Mutex(State())

    /// How many pieces of work are under way.
    var count: Int { state.withLock { $0.changes + $0.reads.count } }

    /// Counts a piece of work as under way; `invocation` is the call it answers, if any.
    func begin(_ kind: Kind, answering invocation: BusObjects.Invocation? = nil) -> Ticket {
        state.withLock { state in
            state.nextID += 1
            switch kind {
            case .change: state.changes += 1
            case .read: state.reads[state.nextID] = invocation
            }
            return Ticket(id: state.nextID, mustFinish: kind == .change)
        }
    }

    /// The piece of work is over.
    func end(_ ticket: Ticket) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if ticket.mustFinish { state.changes -= 1 } else { state.reads[ticket.id] = nil }
            guard state.changes == 0 else { return [] }
            defer { state.drainWaiters = [:] }
            return Array(state.drainWaiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The calls that only read and are still waiting for their answer; they are no longer
    /// counted.
    func takeReads() -> [BusObjects.Invocation] {
        state.withLock { state in
            defer { state.reads = [:] }
            return state.reads.values.compactMap { $0 }
        }
    }

    /// Returns once no change is under way, or after `limit`.
    func drained(within limit: Duration) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        // The deadline: a wait of its own, cancelled as soon as the work is done.
        let deadline = Task {
            try? await Task.sleep(for: limit)
            self.resumeWaiter(id)
        }
        defer { deadline.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                guard state.changes > 0, state.expiredWaits.remove(id) == nil else { return true }
                state.drainWaiters[id] = continuation
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func resumeWaiter(_ id: UInt64) {
        state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.drainWaiters.removeValue(forKey: id) else {
                state.expiredWaits.insert(id)
                return nil
            }
            return waiter
        }?.resume()
    }
}
