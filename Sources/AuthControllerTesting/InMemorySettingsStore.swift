// SPDX-License-Identifier: Apache-2.0
public import AuthControllerCore
import Synchronization

/// A ``/AuthControllerCore/SettingsStore`` in memory, for tests; can be made corrupt or failing.
public final class InMemorySettingsStore: SettingsStore {
    private struct State {
        var records: [ServiceName: SessionRecord] = [:]
        var corruption: String?
        var saveFailure: AuthError?
        var saves = 0
    }

    private let state = Mutex(State())
    private let lock = Mutex(())

    /// An empty store: nobody signed in to any service.
    public init() {}

    /// Makes the store read as corrupt until the next save.
    public func makeCorrupt(_ reason: String) { state.withLock { $0.corruption = reason } }

    /// Makes every later save throw `failure` (or succeed again with `nil`).
    public func failSaves(with failure: AuthError?) { state.withLock { $0.saveFailure = failure } }

    /// How many saves succeeded.
    public var saveCount: Int { state.withLock { $0.saves } }

    /// The record saved for `service`, or an empty one; while ``makeCorrupt(_:)`` holds, an empty
    /// record with the corruption, as a corrupt file reads.
    public func read(service: ServiceName) throws(AuthError) -> SettingsRead {
        state.withLock { state in
            if let corruption = state.corruption { return SettingsRead(record: SessionRecord(), corruption: corruption) }
            return SettingsRead(record: state.records[service] ?? SessionRecord())
        }
    }

    /// Every saved record; while ``makeCorrupt(_:)`` holds, ``/AuthControllerCore/AuthError/settingsUnsafe(_:)-enum.case``,
    /// as a file that does not parse.
    public func readAll() throws(AuthError) -> [ServiceName: SettingsRead] {
        try state.withLock { (state) throws(AuthError) -> [ServiceName: SettingsRead] in
            if let corruption = state.corruption { throw .settingsUnsafe(corruption) }
            return state.records.mapValues { SettingsRead(record: $0) }
        }
    }

    /// Keeps `record` for `service`. After ``makeCorrupt(_:)`` it drops every other record, as a
    /// new file would, and returns `memory:settings.ini.corrupt` as the path of the kept copy.
    public func save(_ record: SessionRecord, service: ServiceName) throws(AuthError) -> String? {
        try state.withLock { (state) throws(AuthError) -> String? in
            if let failure = state.saveFailure { throw failure }
            var copy: String?
            if state.corruption != nil {
                state.records = [:]
                state.corruption = nil
                copy = "memory:settings.ini.corrupt"
            }
            state.records[service] = record
            state.saves += 1
            return copy
        }
    }

    /// Runs `body` holding a lock of this store's own, in this process only; waits as long as it
    /// takes (no deadline).
    public func withExclusiveLock<T>(_ body: () throws(AuthError) -> T) throws(AuthError) -> T {
        try lock.withLock { (_) throws(AuthError) -> T in try body() }
    }

    /// Runs `body` holding this store's refresh lock of `service`; the tasks waiting for it take it
    /// in turn, suspended, without a deadline: `timeout` is not used.
    public func withRefreshLock<T: Sendable>(service: ServiceName, timeout: Duration,
                                             _ body: () async throws(AuthError) -> T) async throws(AuthError) -> T {
        await locks.lock("refresh\n" + service.rawValue)
        defer { Task { await locks.unlock("refresh\n" + service.rawValue) } }
        return try await body()
    }

    /// Runs `body` holding this store's lock of `service`'s credentials for `subject`, waited for
    /// as the refresh lock is.
    public func withCredentialLock<T: Sendable>(service: ServiceName, subject: String, timeout: Duration,
                                                _ body: () async throws(AuthError) -> T) async throws(AuthError) -> T {
        let name = "credentials\n" + service.rawValue + "\n" + subject
        await locks.lock(name)
        defer { Task { await locks.unlock(name) } }
        return try await body()
    }

    private let locks = AsyncLocks()
}

/// Locks by name for tasks, waited for in turn.
private actor AsyncLocks {
    private var held: Set<String> = []
    private var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]

    func lock(_ name: String) async {
        if held.insert(name).inserted { return }
        await withCheckedContinuation { waiters[name, default: []].append($0) }
    }

    func unlock(_ name: String) {
        if var queue = waiters[name], !queue.isEmpty {
            let next = queue.removeFirst()
            waiters[name] = queue
            next.resume()  // the lock passes to the next waiter
        } else {
            held.remove(name)
        }
    }
}
