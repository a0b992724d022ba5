// SPDX-License-Identifier: Apache-2.0
internal import Subprocess
import Synchronization
internal import SystemPackage

/// A shell command run once per event, as `watch --exec` does. The event reaches the command
/// only through environment variables, never through its text, so an account id that holds
/// `$(…)` or a backtick is data, never shell code.
package final class EventHook: Sendable {
    /// The command text, run with `/bin/sh -c`.
    package let command: String

    private enum State {
        case idle
        case running(Task<Int32, any Error>)
        case terminated
    }

    private let state = Mutex<State>(.idle)

    /// How long a command asked to stop (SIGTERM) may take before it is killed (SIGKILL).
    static let stopGrace: Duration = .seconds(2)

    /// A hook that runs `command` with `/bin/sh -c` for each event; nothing runs until
    /// ``run(for:environment:)``.
    package init(command: String) {
        self.command = command
    }

    /// The variables describing `event`: `AUTHCTL_SERVICE`, `AUTHCTL_SIGNED_IN` (`1`/`0`),
    /// `AUTHCTL_USER` (empty when nobody), `AUTHCTL_REASON`, `AUTHCTL_SEQUENCE`.
    package static func variables(for event: LoginEvent) -> [String: String] {
        [
            "AUTHCTL_SERVICE": event.service.rawValue,
            "AUTHCTL_SIGNED_IN": event.isSignedIn ? "1" : "0",
            "AUTHCTL_USER": event.account?.rawValue ?? "",
            "AUTHCTL_REASON": event.reason.rawValue,
            "AUTHCTL_SEQUENCE": String(event.sequence),
        ]
    }

    /// Runs the command for `event` with exactly `environment` plus the event's variables,
    /// standard input from `/dev/null`, sharing this process's standard output and error, and
    /// waits for it. Returns its exit status, or 128 + the signal that ended it.
    ///
    /// The command leads a process group of its own, so that ``terminate()`` (or cancelling the
    /// calling task) stops whatever it started too. swift-subprocess starts it with an empty
    /// signal mask and every signal at its default action, whatever this process blocks or
    /// ignores. After ``terminate()`` no command starts any more: the result is then 143.
    package func run(for event: LoginEvent, environment: [String: String]) async throws(AuthError) -> Int32 {
        var variables = environment
        for (key, value) in Self.variables(for: event) { variables[key] = value }
        var options = PlatformOptions()
        options.processGroupID = 0
        options.teardownSequence = [.gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: Self.stopGrace)]
        let configuration = Configuration(
            executable: .path("/bin/sh"), arguments: ["-c", command],
            environment: .custom(Dictionary(uniqueKeysWithValues: variables.map { (Environment.Key(stringLiteral: $0.key), $0.value) })),
            platformOptions: options)
        let task = Task { () async throws -> Int32 in
            let result = try await Subprocess.run(configuration, input: .none, output: .currentStandardOutput,
                                                  error: .currentStandardError)
            return result.terminationStatus.exitStatus
        }
        let started = state.withLock { state -> Bool in
            guard case .idle = state else { return false }
            state = .running(task)
            return true
        }
        guard started else {
            task.cancel()
            _ = await task.result
            return 128 + 15
        }
        defer { state.withLock { state in if case .running = state { state = .idle } } }
        // Cancelling the caller stops the command (swift-subprocess's teardown sequence).
        let result = await withTaskCancellationHandler { await task.result } onCancel: { task.cancel() }
        switch result {
        case .success(let status): return status
        case .failure(let error): throw .unavailable("cannot run /bin/sh for \(hint: .eventCommand): \(error)")
        }
    }

    /// Stops the command that is running, if any, and keeps any further one from starting:
    /// SIGTERM to its process group, SIGKILL after two seconds. ``run(for:environment:)``
    /// returns once it has ended. Does not wait.
    package func terminate() {
        let running = state.withLock { state -> Task<Int32, any Error>? in
            defer { state = .terminated }
            if case .running(let task) = state { return task }
            return nil
        }
        running?.cancel()
    }
}

extension TerminationStatus {
    /// The status a shell reports: the exit code, or 128 + the signal that ended the process.
    var exitStatus: Int32 {
        switch self {
        case .exited(let code): return code
        case .signaled(let signal): return 128 + signal
        }
    }
}
