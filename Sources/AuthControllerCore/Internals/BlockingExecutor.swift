// SPDX-License-Identifier: Apache-2.0
import Dispatch

/// Runs async work whose steps block between its suspensions — a token refresh reads the
/// keyring and waits for the settings lock around its request to the server — on a thread of
/// its own, as ``offload(_:)`` does for a single blocking step: every part of `work` that is
/// not isolated to an actor runs there, never on the cooperative pool.
func offload<T: Sendable>(async work: () async throws(AuthError) -> T) async throws(AuthError) -> T {
    try await withTaskExecutorPreference(BlockingExecutor()) { () async throws(AuthError) -> T in try await work() }
}

/// A task executor whose jobs run, one at a time, on a serial queue of its own, which
/// targets libdispatch's overcommitting root queue (a new thread whenever the others block).
private final class BlockingExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "io.github.authctl.blocking")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
