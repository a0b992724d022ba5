// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore
import Synchronization

/// The first of `signals` to arrive while it listens; while it does, they do not end the process.
struct FirstSignal: Sendable {
    private final class Seen: Sendable {
        let signal = Mutex<ProcessSignal?>(nil)
    }

    private let seen = Seen()
    private let listener: Task<Void, Never>

    init(listeningTo signals: [ProcessSignal]) {
        let deliveries = ProcessSignal.deliveries(of: signals)
        listener = Task { [seen] in
            for await signal in deliveries {
                seen.signal.withLock { $0 = $0 ?? signal }
            }
        }
    }

    /// The outcome of `call`, during which SIGINT, SIGTERM and SIGHUP wait: a refresh the server
    /// has answered has rotated the refresh token there, and ending the process before the new
    /// one is stored would end the session. So a signal waits for the call, whose every step has
    /// a deadline, and ends the process after it (the command then prints nothing).
    static func deferred<T>(_ call: () async throws(AuthError) -> T) async throws -> T {
        let signalled = FirstSignal(listeningTo: [.interrupt, .terminate, .hangUp])
        let result: Result<T, AuthError>
        do {
            result = .success(try await call())
        } catch {
            result = .failure(error)
        }
        if let signal = signalled.stop() {
            signal.raiseWithDefaultAction()
            throw ExitCode(128 + signal.rawValue)
        }
        return try result.get()
    }

    /// Stops listening and returns the first signal that arrived, if any.
    func stop() -> ProcessSignal? {
        listener.cancel()
        return seen.signal.withLock { $0 }
    }
}
