// SPDX-License-Identifier: Apache-2.0
import Foundation
import TestSupport
import Testing

/// The Python test servers that import Django or `cryptography` take a second or two of CPU to
/// start; a dozen tests starting theirs at once on two cores made each wait half a minute. At
/// most two start at a time (the wait for a slot is not counted in their start-up deadline).
actor ServerStarts {
    static let shared = ServerStarts()
    private var starting = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Runs `start` (launch, then wait for the first line) in one of the two slots.
    func one<T: Sendable>(_ start: @Sendable () async throws -> T) async rethrows -> T {
        if starting >= 2 {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            starting += 1
        }
        defer {
            if waiting.isEmpty { starting -= 1 } else { waiting.removeFirst().resume() }
        }
        return try await start()
    }
}

/// A test server in a process of its own, as the test servers beside this file run: it prints
/// `listening PORT` once it accepts connections and ends when its standard input closes, so a
/// test that dies leaves nothing behind.
final class ServerProcess: Sendable {
    let port: Int
    private let process: Spawned

    /// Starts `executable` with `arguments` (in this process's environment, in a process group of
    /// its own) and returns once it said its port, at most `limit` later; `name` names it in the
    /// failure, with its stderr and `diagnostics()` (a log of its own, say). With `slow`, it
    /// starts in one of ``ServerStarts``'s slots.
    init(_ name: String, executable: String, arguments: [String], within limit: Duration, slow: Bool = false,
         diagnostics: () -> String = { "" }) async throws {
        let start = { @Sendable () async throws -> Spawned in
            let process = try await Spawned(executable, arguments, input: nil, environment: ProcessInfo.processInfo.environment,
                                            leadsProcessGroup: true, holdsInputOpen: true)
            _ = await eventually(within: limit) { process.stdout.contains("\n") || process.hasEnded }
            return process
        }
        let process = slow ? try await ServerStarts.shared.one(start) : try await start()
        self.process = process
        let line = process.stdout.prefix { $0 != "\n" }
        guard line.hasPrefix("listening "), let port = Int(line.dropFirst("listening ".count)) else {
            let ended = process.hasEnded
            process.stop()
            let run = await process.wait(timeout: 10)
            let said = diagnostics()
            Issue.record("""
                the \(name) \(ended ? "ended (exit \(run.status))" : "did not start within \(limit.components.seconds) s") \
                before it said its port: \(run.stdout)
                \(String(run.stderr.suffix(2000)))\(said.isEmpty ? "" : "\n" + said)
                """)
            throw CocoaError(.fileReadUnknown)
        }
        self.port = port
    }

    deinit { stop() }

    /// Closes the server's standard input, which ends it, and stops it if it still runs.
    func stop() { process.stop() }
}
