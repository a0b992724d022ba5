// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
internal import Subprocess
import Synchronization
#if canImport(System)
internal import System
#else
internal import SystemPackage
#endif

/// A child process that runs until it is stopped, started through swift-subprocess: the child
/// gets an empty signal mask, every signal at its default action and no descriptor but 0-2,
/// whatever this process does. It leads a process group of its own, so a terminal's Ctrl-C
/// reaches the sandbox's command, not the daemons behind it.
final class Daemon: Sendable {
    let name: String
    let processID: Int32
    private let task: Task<Void, Never>
    private let exit: ExitBox

    private final class ExitBox: Sendable {
        let status = Mutex<Int32?>(nil)
    }

    private init(name: String, processID: Int32, task: Task<Void, Never>, exit: ExitBox) {
        self.name = name
        self.processID = processID
        self.task = task
        self.exit = exit
    }

    /// Starts `path` and returns once it runs (its process id known), with `input` on its
    /// standard input and its output discarded. ``stop()`` asks it to end (SIGTERM to its
    /// group), and kills it (SIGKILL) after `grace`.
    static func start(_ name: String, path: String, arguments: [String], environment: Environment,
                      input: some InputProtocol, grace: Duration = .seconds(1)) async throws(AuthError) -> Daemon {
        var options = PlatformOptions()
        options.processGroupID = 0
        options.teardownSequence = [.gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: grace)]
        let configuration = Configuration(executable: .path(FilePath(path)), arguments: Arguments(arguments), environment: environment,
                                          platformOptions: options)
        let (started, announce) = AsyncStream.makeStream(of: Int32.self)
        let exit = ExitBox()
        let failure = Mutex<String?>(nil)
        let task = Task {
            do {
                let result = try await Subprocess.run(configuration, input: input, output: .discarded, error: .discarded) { execution in
                    announce.yield(execution.processIdentifier.value)
                    announce.finish()
                }
                exit.status.withLock { $0 = result.terminationStatus.exitStatus }
            } catch {
                failure.withLock { $0 = "\(error)" }
                exit.status.withLock { $0 = 127 }
                announce.finish()
            }
        }
        for await processID in started { return Daemon(name: name, processID: processID, task: task, exit: exit) }
        await task.value
        throw .unavailable("cannot start \(name): \(failure.withLock { $0 } ?? "it did not start")")
    }

    /// The exit status (or 128 + signal) once the process has ended and been reaped.
    var exitStatus: Int32? { exit.status.withLock { $0 } }

    /// Waits until the process has ended on its own and been reaped.
    func waitForExit() async {
        await task.value
    }

    /// Stops the process (SIGTERM to its group, SIGKILL after the grace period) and waits
    /// until it has been reaped.
    func stop() async {
        task.cancel()
        await task.value
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
