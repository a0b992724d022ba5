// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// Whether the refreshes of a task (and of the tasks it starts) may still send a request to a
/// token server. A stopping `serve` closes its gate: a refresh that has not sent its request yet
/// — still reading the keyring, or waiting for another process's refresh — then gives up
/// instead of starting one, while a refresh whose request is under way still waits for the
/// answer and stores it (the server may have retired the old refresh token already).
///
/// The gate is a task-local value, so it reaches the refresh through the work it shares with
/// other callers; a refresh outside `serve` has none and is never held back.
final class RefreshGate: Sendable {
    /// The gate of the current task; `nil` outside `serve`.
    @TaskLocal static var current: RefreshGate?

    private let closed = Atomic(false)

    /// From now on no refresh under this gate sends a new request.
    func close() {
        closed.store(true, ordering: .sequentiallyConsistent)
    }

    /// Runs `work` with this gate as the current one.
    func guarding<T: Sendable>(_ work: () async throws(AuthError) -> T) async throws(AuthError) -> T {
        let result: Result<T, AuthError> = await Self.$current.withValue(self) {
            do throws(AuthError) { return .success(try await work()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Throws ``AuthError/unavailable(_:detail:)-enum.case`` when the current task's gate is
    /// closed: the refresh is then a failed one (a token that has not expired is still handed
    /// out, with a warning).
    static func checkOpen() throws(AuthError) {
        guard let current, current.closed.load(ordering: .sequentiallyConsistent) else { return }
        throw .unavailable("\(hint: .loginService) is stopping, so it sends no new request to the token server")
    }
}
