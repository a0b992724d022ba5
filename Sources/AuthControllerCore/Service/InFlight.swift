// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// The work under way in `serve`: method calls being answered and background refreshes.
///
/// Stopping waits for the work that changes something — a sign-out, a refresh whose rotated
/// tokens must be stored before the process ends — and gives the reads a moment: those still
/// waiting after it (for a keyring that does not answer, say) are answered with an error.
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
        var drainWaiters: [UInt64: (continuation: CheckedContinuation<Void, Never>, includingReads: Bool)] = [:]
        /// Waits whose deadline came before they began to wait.
        var expiredWaits: Set<UInt64> = []
    }

    private let state = Mutex(State())

    private static func isDrained(_ state: State, includingReads: Bool) -> Bool {
        state.changes == 0 && (!includingReads || state.reads.isEmpty)
    }

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
            let done = state.drainWaiters.filter { Self.isDrained(state, includingReads: $0.value.includingReads) }
            for id in done.keys { state.drainWaiters[id] = nil }
            return done.values.map(\.continuation)
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

    /// Returns once no change is under way (and, `includingReads`, no read either), or after
    /// `limit`.
    func drained(within limit: Duration, includingReads: Bool = false) async {
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
                guard !Self.isDrained(state, includingReads: includingReads), state.expiredWaits.remove(id) == nil else { return true }
                state.drainWaiters[id] = (continuation, includingReads)
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
            return waiter.continuation
        }?.resume()
    }
}
