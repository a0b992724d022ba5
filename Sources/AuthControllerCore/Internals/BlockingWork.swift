// SPDX-License-Identifier: Apache-2.0
import Dispatch

/// Runs blocking work — a Secret Service call that waits for its reply, Argon2, a wait for a
/// file lock — on a thread of its own, never on one of the cooperative pool's threads (one per
/// core) that every task of the process shares: blocked there, it would keep `serve` from
/// answering anything else, and stop SIGTERM from being heard.
///
/// A serial queue of its own per call targets libdispatch's overcommitting root queue, which
/// starts another thread whenever the ones it has are blocked.
func offload<T: Sendable>(_ work: @escaping @Sendable () throws(AuthError) -> T) async throws(AuthError) -> T {
    let result: Result<T, AuthError> = await withCheckedContinuation { continuation in
        DispatchQueue(label: "io.github.authctl.blocking").async {
            continuation.resume(returning: Result { () throws(AuthError) in try work() })
        }
    }
    return try result.get()
}
