// SPDX-License-Identifier: Apache-2.0
/// The settings lock and the refresh locks: `flock`s polled with back-off until a deadline.
extension KeyFileSettingsStore {
    /// Waits for the lock up to `lockTimeout` by blocking the calling thread (a lock held by
    /// another process can only be polled): async code reaches it through a blocking context
    /// of its own (`offload`), never on the cooperative pool.
    public func withExclusiveLock<T>(_ body: () throws(AuthError) -> T) throws(AuthError) -> T {
        let descriptor = try openLock(lockPath)
        // Closing the descriptor releases the lock.
        defer { Posix.close(descriptor) }
        var wait = LockWait(timeout: lockTimeout)
        while let milliseconds = try poll(descriptor, lockPath, &wait, timedOut:
                .temporaryFailure("another authctl held the settings lock \(lockPath) for more than \(formatSeconds(lockTimeout)) s; try again")) {
            Posix.pause(milliseconds: milliseconds)
        }
        return try body()
    }

    /// An `flock` on `DIRECTORY/refresh-MD5.lock`, one file per service (named by the MD5 of the
    /// service name), so the refreshes of one service in any process take turns. Waiting polls the
    /// lock and suspends the task between tries, blocking no thread.
    public func withRefreshLock<T: Sendable>(service: ServiceName, timeout: Duration,
                                             _ body: () async throws(AuthError) -> T) async throws(AuthError) -> T {
        // One file per service, named by a digest: a service name may be 255 bytes, too long
        // for a file name with a prefix.
        try await withLockFile("\(directory)/refresh-\(GLibText.md5Hex(service.rawValue)).lock", timeout: timeout, timedOut:
                .temporaryFailure("another authctl has been refreshing the token of \(service) for more than \(formatSeconds(timeout.seconds)) s; try again"),
            body)
    }

    /// An `flock` on `DIRECTORY/credentials-MD5.lock`, one file per service and subject (named
    /// by the MD5 of the two), waited for as ``withRefreshLock(service:timeout:_:)`` waits.
    public func withCredentialLock<T: Sendable>(service: ServiceName, subject: String, timeout: Duration,
                                                _ body: () async throws(AuthError) -> T) async throws(AuthError) -> T {
        try await withLockFile("\(directory)/credentials-\(GLibText.md5Hex(service.rawValue + "\n" + subject)).lock", timeout: timeout, timedOut:
                .temporaryFailure("another authctl has been asking for the credentials of \(subject) (\(service)) for more than \(formatSeconds(timeout.seconds)) s; try again"),
            body)
    }

    private func withLockFile<T: Sendable>(_ path: String, timeout: Duration, timedOut: @autoclosure () -> AuthError,
                                           _ body: () async throws(AuthError) -> T) async throws(AuthError) -> T {
        let descriptor = try openLock(path)
        defer { Posix.close(descriptor) }
        var wait = LockWait(timeout: timeout.seconds)
        while let milliseconds = try poll(descriptor, path, &wait, timedOut: timedOut()) {
            // Waiting suspends the task, not a thread.
            try? await Task.sleep(for: .milliseconds(milliseconds))
        }
        return try await body()
    }

    /// Opens (creating) a lock file in the settings directory.
    private func openLock(_ path: String) throws(AuthError) -> Int32 {
        try createDirectory()
        return try io("open the lock \(path)") { () throws(Posix.Failure) in try Posix.openLockFile(path) }
    }

    /// One try at the lock: `nil` once it is taken, else the milliseconds to wait before the next
    /// try (the caller waits as it can: blocking, or suspended); `timedOut` once `wait` is over.
    private func poll(_ descriptor: Int32, _ path: String, _ wait: inout LockWait,
                      timedOut: @autoclosure () -> AuthError) throws(AuthError) -> Int? {
        guard try !io("lock \(path)", { () throws(Posix.Failure) in try Posix.tryLockExclusive(descriptor) }) else { return nil }
        guard let milliseconds = wait.next() else { throw timedOut() }
        return milliseconds
    }

    /// Back-off while waiting for a lock: 1, 2, 4 … 20 ms, until `timeout` seconds have passed.
    private struct LockWait {
        let giveUp: Double
        var backoff = 1

        init(timeout: Double) { giveUp = Posix.monotonicSeconds() + timeout }

        /// Milliseconds to wait before trying again, `nil` once the time is up.
        mutating func next() -> Int? {
            guard Posix.monotonicSeconds() < giveUp else { return nil }
            defer { backoff = min(backoff * 2, 20) }
            return backoff
        }
    }
}
