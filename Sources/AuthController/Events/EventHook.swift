import Synchronization

/// A shell command run once per event, as `watch --exec` does. The event reaches the command
/// only through environment variables, never through its text, so account ids such as
/// ``evil$(touch x)`@x.org`` are data.
public final class EventHook: Sendable {
    /// The command text, run with `/bin/sh -c`.
    public let command: String
    private let running = Mutex<ChildProcess?>(nil)

    public init(command: String) {
        self.command = command
    }

    /// The variables describing `event`: `AUTHCTL_SERVICE`, `AUTHCTL_SIGNED_IN` (`1`/`0`),
    /// `AUTHCTL_USER` (empty when nobody), `AUTHCTL_REASON`, `AUTHCTL_SEQUENCE`.
    public static func variables(for event: LoginEvent) -> [String: String] {
        [
            "AUTHCTL_SERVICE": event.service.rawValue,
            "AUTHCTL_SIGNED_IN": event.isSignedIn ? "1" : "0",
            "AUTHCTL_USER": event.user?.rawValue ?? "",
            "AUTHCTL_REASON": event.reason.rawValue,
            "AUTHCTL_SEQUENCE": String(event.sequence),
        ]
    }

    /// Runs the command for `event` with `environment` plus the event's variables, sharing this
    /// process's standard streams, and waits for it. Returns its exit status.
    public func run(for event: LoginEvent, environment: [String: String]) throws(AuthError) -> Int32 {
        var variables = environment
        for (key, value) in Self.variables(for: event) { variables[key] = value }
        let child: ChildProcess
        do {
            child = try ChildProcess("/bin/sh", arguments: ["-c", command], environment: variables,
                                     standardInput: nil, standardOutput: 1, standardError: 2)
        } catch {
            throw .unavailable("cannot run /bin/sh for --exec: \(error.message)")
        }
        running.withLock { $0 = child }
        defer { running.withLock { $0 = nil } }
        return child.wait()
    }

    /// Asks the command that is running, if any, to stop (SIGTERM), e.g. when watching ends.
    public func terminate() {
        running.withLock { $0?.send(SIGTERM) }
    }
}

#if canImport(Glibc)
import Glibc
#endif
