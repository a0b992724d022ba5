import Foundation
import Synchronization
import TestSupport
import Testing

/// The first line `process` prints on `stdout` (without its newline), once printed, at most
/// `limit` later; what it printed so far when it ends or the time runs out first. The output is
/// read on a thread of its own, which ends with it. The test servers print `listening PORT` there
/// once they accept connections.
func firstLine(of process: Process, printedTo stdout: Pipe, within limit: Duration) async -> String {
    let printed = Printed()
    let reader = stdout.fileHandleForReading
    Thread.detachNewThread {
        while true {
            let chunk = reader.availableData
            if chunk.isEmpty { return }
            printed.data.withLock { $0 += chunk }
        }
    }
    _ = await eventually(within: limit) { printed.data.withLock { $0.contains(UInt8(ascii: "\n")) } || !process.isRunning }
    return String(decoding: printed.data.withLock { $0.prefix { $0 != UInt8(ascii: "\n") } }, as: UTF8.self)
}

/// What a process printed so far, filled by the thread that reads it.
private final class Printed: Sendable {
    let data = Mutex(Data())
}

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
final class ServerProcess: @unchecked Sendable {
    // Sendable: every property is set in init and never changes; `Process` is thread-safe
    // for `terminate` and the pipe is only closed in `stop`.
    let port: Int
    private let process: Process
    private let stdin: Pipe

    /// Starts `executable` with `arguments` and returns once it said its port, at most `limit`
    /// later; `name` names it in the failure, with `diagnostics()` (its stderr, say). With
    /// `slow`, it starts in one of ``ServerStarts``'s slots.
    init(_ name: String, executable: String, arguments: [String], standardError: FileHandle? = nil, within limit: Duration,
         slow: Bool = false, diagnostics: () -> String = { "" }) async throws {
        let process = Process()
        self.process = process
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        if let standardError { process.standardError = standardError }
        let start = { @Sendable () async throws -> String in
            try process.run()
            return await firstLine(of: process, printedTo: stdout, within: limit)
        }
        let text = slow ? try await ServerStarts.shared.one(start) : try await start()
        guard text.hasPrefix("listening "), let port = Int(text.dropFirst("listening ".count)) else {
            if process.isRunning { process.terminate() }
            let said = diagnostics()
            Issue.record("the \(name) did not start within \(limit.components.seconds) s: \(text)\(said.isEmpty ? "" : "\n" + said)")
            throw CocoaError(.fileReadUnknown)
        }
        self.port = port
    }

    deinit { stop() }

    /// Closes the server's standard input, which ends it, and stops it if it still runs.
    func stop() {
        try? stdin.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
    }
}
