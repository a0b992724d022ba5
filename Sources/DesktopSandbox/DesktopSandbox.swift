// SPDX-License-Identifier: Apache-2.0
public import AuthControllerCore
import Dispatch
internal import Subprocess
import Synchronization
#if canImport(System)
internal import System
#else
internal import SystemPackage
#endif

/// A throwaway desktop session: a private session bus and an unlocked gnome-keyring with a
/// fresh default collection, under a new temporary directory that holds `XDG_DATA_HOME`,
/// `XDG_CONFIG_HOME` and `XDG_RUNTIME_DIR`. The caller's own keyring and settings are never
/// touched. ``stop()`` stops the daemons and removes the directory.
///
/// The daemons' sockets live in `XDG_RUNTIME_DIR`, and a Unix socket's path is short (libdbus
/// takes 99 bytes at most). When the directory's path leaves no room for them (a long `TMPDIR`),
/// `XDG_RUNTIME_DIR` is a private directory of its own under `/tmp` instead
/// (`/tmp/authctl-sandbox-sockets.XXXXXX`), removed with the rest, even with `keepingDirectory`:
/// it holds nothing but the sockets of daemons that are gone.
///
/// Nothing is left behind even when the process that started the sandbox dies without
/// running ``stop()`` (SIGKILL included): a supervisor process (see `Supervisor`) then stops
/// the daemons, sends the command SIGTERM and removes the directory, within about a second.
///
/// The bus has no service directories, so nothing is auto-started on it: a Secret Service
/// that dies stays gone instead of being replaced by one this sandbox does not control.
public final class DesktopSandbox: Sendable {
    /// The temporary directory.
    public let directory: String
    /// `XDG_RUNTIME_DIR`, where the daemons' sockets are: `directory/runtime`, or a private
    /// directory under `/tmp` when that path would be too long for a socket's.
    public let runtimeDirectory: String
    /// The private bus's address (`unix:path=…`).
    public let busAddress: String
    private let supervisor: Supervisor
    private let bus: Daemon
    private let keyring: Daemon?
    private let stopped = Mutex(false)

    /// The variables a command in the sandbox needs: `DBUS_SESSION_BUS_ADDRESS` and the XDG folders.
    public var environment: [String: String] {
        [
            "DBUS_SESSION_BUS_ADDRESS": busAddress,
            "XDG_CONFIG_HOME": directory + "/config",
            "XDG_DATA_HOME": directory + "/data",
            "XDG_RUNTIME_DIR": runtimeDirectory,
        ]
    }

    /// The keyring daemon's process id.
    public var keyringProcessID: Int32? { keyring?.processID }

    private init(directory: String, runtimeDirectory: String, supervisor: Supervisor, bus: Daemon, keyring: Daemon?) {
        self.directory = directory
        self.runtimeDirectory = runtimeDirectory
        self.busAddress = Self.busAddress(runtimeDirectory: runtimeDirectory)
        self.supervisor = supervisor
        self.bus = bus
        self.keyring = keyring
    }

    /// Starts a sandbox: `dbus-daemon`, then (with `keyring`) `gnome-keyring-daemon --unlock`,
    /// and returns once the Secret Service answers on the bus and its `default` alias resolves.
    /// The daemons inherit this process's environment, plus the sandbox's variables.
    /// - Parameters:
    ///   - temporaryDirectory: where the sandbox's directory is made (the caller's `TMPDIR`,
    ///     or `/tmp`), of any length.
    ///   - searchPath: the folders to find the daemons in (the caller's `PATH`).
    ///   - keepingDirectory: keep the directory when the sandbox stops (or its process dies).
    ///   - serviceDirectories: folders of D-Bus activation files (`…/share/dbus-1/services`)
    ///     whose services the bus starts on demand; none by default, so nothing outside the
    ///     sandbox is ever started.
    /// - Throws: ``AuthError/unavailable(_:detail:)-enum.case`` when a daemon is missing, the directory
    ///   cannot be made, or a daemon does not come up within `startupTimeout` seconds. A
    ///   sandbox that fails to start leaves nothing behind.
    public static func start(keyring startKeyring: Bool = true, startupTimeout: Double = 5,
                             temporaryDirectory: String? = nil, searchPath: String? = nil,
                             keepingDirectory: Bool = false, serviceDirectories: [String] = []) async throws(AuthError) -> DesktopSandbox {
        let giveUp = ContinuousClock.now + .milliseconds(Int(startupTimeout * 1000))
        let folders = searchPath ?? "/usr/local/bin:/usr/bin:/bin"
        let dbusDaemon = try executable("dbus-daemon", package: "dbus-daemon", searchPath: folders)
        let keyringDaemon = startKeyring ? try executable("gnome-keyring-daemon", package: "gnome-keyring", searchPath: folders) : nil
        let base = temporaryDirectory.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        guard !base.contains("\n") else { throw .unavailable("TMPDIR contains a line break; set it to a plain directory path") }

        let supervisor = try await Supervisor.start()
        if keepingDirectory { supervisor.keepDirectory() }
        var started: [Daemon] = []
        do throws(AuthError) {
            let directory: String
            do throws(Posix.Failure) {
                directory = try Posix.makeTemporaryDirectory(base + "/authctl-sandbox.XXXXXX")
                supervisor.remove(directory: directory)
                for folder in ["config", "data"] { try Posix.makeDirectory(directory + "/" + folder, mode: 0o700) }
            } catch {
                throw .unavailable("cannot create the sandbox directory in \(base): \(error.description)")
            }
            let runtime = try makeRuntimeDirectory(in: directory, supervisor: supervisor)
            let configuration = directory + "/bus.conf"
            do {
                let file = try FileDescriptor.open(FilePath(configuration), .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                                                   permissions: [.ownerReadWrite])
                try file.closeAfter { _ = try file.writeAll(Array(busConfiguration(runtimeDirectory: runtime, serviceDirectories: serviceDirectories).utf8)) }
            } catch {
                throw .unavailable("cannot write the sandbox bus configuration in \(directory): \(error)")
            }
            // The services the bus starts on demand inherit its environment: the sandbox's folders,
            // never the caller's settings or keyring.
            var busVariables: [Environment.Key: String?] = ["DISPLAY": nil, "WAYLAND_DISPLAY": nil]
            for (key, value) in variables(directory: directory, runtimeDirectory: runtime) { busVariables[Environment.Key(stringLiteral: key)] = value }
            let bus = try await Daemon.start("dbus-daemon", path: dbusDaemon,
                                             arguments: ["--config-file=\(configuration)", "--nofork", "--nopidfile"],
                                             environment: .inherit.updating(busVariables), input: .none)
            supervisor.stop(daemon: bus.processID)
            started.append(bus)
            let address = busAddress(runtimeDirectory: runtime)
            try await waitUntil(giveUp, for: [bus], "dbus-daemon did not come up within the start-up deadline") {
                SecretServiceProbe.state(ofBusAt: address) != .noBus
            }
            var keyring: Daemon?
            if let keyringDaemon {
                // The unlock password of the throwaway login keyring, read up to end of file.
                var generator = SystemRandomNumberGenerator()
                let password = (0..<16).map { _ in String(UInt8.random(in: .min ... .max, using: &generator), radix: 16) }.joined()
                let daemon = try await Daemon.start("gnome-keyring-daemon", path: keyringDaemon,
                                                    arguments: ["--foreground", "--unlock", "--components=secrets"],
                                                    environment: .inherit.updating(busVariables), input: .string(password))
                supervisor.stop(daemon: daemon.processID)
                started.append(daemon)
                keyring = daemon
                try await waitUntil(giveUp, for: started,
                                    "gnome-keyring-daemon did not offer a default collection within the start-up deadline") {
                    SecretServiceProbe.state(ofBusAt: address) == .ready
                }
            }
            return DesktopSandbox(directory: directory, runtimeDirectory: runtime, supervisor: supervisor, bus: bus, keyring: keyring)
        } catch {
            for daemon in started.reversed() { await daemon.stop() }
            await supervisor.finish()
            throw error
        }
    }

    /// Adds a process the caller started in the sandbox (a keyring daemon of another kind, say):
    /// it is stopped with the daemons — its process group gets SIGTERM, then SIGKILL — even when
    /// this process dies. Start it as the leader of a process group of its own.
    public func supervise(processID: Int32) {
        supervisor.stop(daemon: processID)
    }

    /// Stops the daemons (SIGTERM, SIGKILL after a second), waits for them, and removes the
    /// directory unless it was to be kept. Calling it again does nothing.
    public func stop() async {
        guard stopped.withLock({ stopped in defer { stopped = true }; return !stopped }) else { return }
        if let keyring { await keyring.stop() }
        await bus.stop()
        await supervisor.finish()
    }

    /// What running a command in a sandbox came to.
    public enum Outcome: Sendable, Equatable {
        /// The command ran; its exit status, or 128 + the signal that ended it (or the run).
        case finished(Int32)
        /// No such command: a shell's 127.
        case commandNotFound
        /// The command exists but cannot be executed (a directory, no execute permission, not
        /// a program): a shell's 126. The reason says which.
        case commandNotExecutable(reason: String)
    }

    /// Starts a sandbox, runs `command` in it with this process's standard streams and
    /// environment plus the sandbox's variables, waits for it, and stops the sandbox.
    /// SIGINT, SIGTERM and SIGHUP are passed on to the command; one that arrives while the
    /// daemons start ends the run once they are up, without starting the command.
    /// - Parameters:
    ///   - command: a path, or a name looked up in `searchPath` as a shell does.
    ///   - directoryKept: called with the directory's path when it is kept.
    /// - Throws: ``AuthError/unavailable(_:detail:)-enum.case`` as ``start(keyring:startupTimeout:temporaryDirectory:searchPath:keepingDirectory:)``.
    public static func run(_ command: String, arguments: [String], keepingDirectory: Bool = false,
                           temporaryDirectory: String? = nil, searchPath: String? = nil,
                           directoryKept: (String) -> Void = { _ in }) async throws(AuthError) -> Outcome {
        let path: String
        switch locate(command, searchPath: searchPath ?? "/usr/local/bin:/usr/bin:/bin") {
        case .found(let found): path = found
        case .missing: return .commandNotFound
        case .notExecutable(let reason): return .commandNotExecutable(reason: reason)
        }
        let relay = SignalRelay()
        // From here on these signals are events to relay, not the end of this process.
        Posix.ignore(Posix.forwardedSignals)
        let sources = Posix.forwardedSignals.map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { relay.deliver(number) }
            source.resume()
            return source
        }
        defer {
            for source in sources { source.cancel() }
            Posix.restoreDefault(Posix.forwardedSignals)
        }
        let sandbox = try await start(temporaryDirectory: temporaryDirectory, searchPath: searchPath, keepingDirectory: keepingDirectory)
        let outcome = await sandbox.run(path, arguments: arguments, relay: relay)
        await sandbox.stop()
        if keepingDirectory { directoryKept(sandbox.directory) }
        return outcome
    }

    private func run(_ path: String, arguments: [String], relay: SignalRelay) async -> Outcome {
        if let early = relay.early { return .finished(128 + early) }
        var variables: [Environment.Key: String?] = [:]
        for (key, value) in environment { variables[Environment.Key(stringLiteral: key)] = value }
        do {
            let result = try await Subprocess.run(
                .path(FilePath(path)), arguments: Arguments(arguments), environment: .inherit.updating(variables),
                input: .currentStandardInput, output: .currentStandardOutput, error: .currentStandardError
            ) { execution in
                supervisor.terminate(command: execution.processIdentifier.value)
                relay.attach { number in try? execution.send(signal: Signal(rawValue: number)) }
            }
            relay.detach()
            return .finished(result.terminationStatus.exitStatus)
        } catch let error as SubprocessError where error.code == .executableNotFound {
            relay.detach()
            return .commandNotFound
        } catch {
            relay.detach()
            return .commandNotExecutable(reason: "\(error)")
        }
    }

    // MARK: - Steps

    /// Where a command is, as a shell finds it: a name with a `/` is a path; another name is
    /// looked up in each folder of `searchPath` for an executable file.
    enum Location: Equatable {
        case found(String)
        case missing
        case notExecutable(String)
    }

    static func locate(_ command: String, searchPath: String) -> Location {
        if command.contains("/") {
            switch Posix.entry(at: command) {
            case .missing: return .missing
            case .directory: return .notExecutable("is a directory")
            case .notExecutable: return .notExecutable("permission denied (not an executable file)")
            case .executable: return .found(command)
            }
        }
        for folder in searchPath.split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (folder.isEmpty ? "." : String(folder)) + "/" + command
            if Posix.entry(at: candidate) == .executable { return .found(candidate) }
        }
        return .missing
    }

    private static func executable(_ name: String, package: String, searchPath: String) throws(AuthError) -> String {
        guard case .found(let path) = locate(name, searchPath: searchPath) else {
            throw .unavailable("\(name) is not on PATH; install the Debian package \(package) (`apt-get install \(package)`)")
        }
        return path
    }

    private static func busAddress(runtimeDirectory: String) -> String { "unix:path=\(runtimeDirectory)/bus" }

    private static func variables(directory: String, runtimeDirectory: String) -> [String: String] {
        [
            "DBUS_SESSION_BUS_ADDRESS": busAddress(runtimeDirectory: runtimeDirectory),
            "XDG_CONFIG_HOME": directory + "/config",
            "XDG_DATA_HOME": directory + "/data",
            "XDG_RUNTIME_DIR": runtimeDirectory,
        ]
    }

    /// The longest socket name the daemons make under `XDG_RUNTIME_DIR`: gnome-keyring's
    /// control socket (the bus's is `/bus`).
    private static let longestSocketName = "/keyring/control"
    /// The longest socket path libdbus accepts (`_DBUS_MAX_SUN_PATH_LENGTH`), shorter than the
    /// 107 bytes of `sun_path` less its NUL.
    private static let socketPathLimit = 99

    /// Makes `XDG_RUNTIME_DIR`: `directory/runtime` when the daemons' sockets fit under it, else a
    /// private directory under `/tmp` (mode 0700, as `mkdtemp` makes it) that the supervisor
    /// removes at the end.
    private static func makeRuntimeDirectory(in directory: String, supervisor: Supervisor) throws(AuthError) -> String {
        let inside = directory + "/runtime"
        let limit = min(socketPathLimit, Posix.maximumSocketPathLength)
        do throws(Posix.Failure) {
            if (inside + longestSocketName).utf8.count <= limit {
                try Posix.makeDirectory(inside, mode: 0o700)
                return inside
            }
            let sockets = try Posix.makeTemporaryDirectory("/tmp/authctl-sandbox-sockets.XXXXXX")
            supervisor.remove(socketDirectory: sockets)
            return sockets
        } catch {
            throw .unavailable("cannot create the sandbox's runtime directory: \(error.description)")
        }
    }

    private static func busConfiguration(runtimeDirectory: String, serviceDirectories: [String]) -> String {
        let services = serviceDirectories.map { "  <servicedir>\(Markup.escaped($0, quotes: false))</servicedir>\n" }.joined()
        return """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:path=\(Markup.escaped(runtimeDirectory, quotes: false))/bus</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
          <!-- A desktop session bus's limits (Debian's session.conf), not dbus-daemon's built-in
               ones, which let a connection await only 128 replies: a flood of calls must meet what
               it meets on a desktop. -->
          <limit name="max_replies_per_connection">50000</limit>
          <limit name="max_match_rules_per_connection">50000</limit>
          <limit name="max_names_per_connection">50000</limit>
          <limit name="max_connections_per_user">100000</limit>
          <limit name="max_completed_connections">100000</limit>
          <limit name="max_incomplete_connections">10000</limit>
          <limit name="max_pending_service_starts">10000</limit>
        \(services)</busconfig>

        """
    }

    /// Polls `ready` until it holds; fails when a daemon exits or the deadline passes.
    private static func waitUntil(_ giveUp: ContinuousClock.Instant, for daemons: [Daemon], _ lateMessage: String,
                                  _ ready: () -> Bool) async throws(AuthError) {
        while true {
            for daemon in daemons {
                if let status = daemon.exitStatus { throw .unavailable("\(daemon.name) exited at start-up (status \(status))") }
            }
            if ready() { return }
            guard ContinuousClock.now < giveUp else { throw .unavailable(lateMessage) }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Passes signals on to the command once it runs; remembers the first that came before.
private final class SignalRelay: Sendable {
    private enum State {
        case waiting(early: Int32?)
        case running(@Sendable (Int32) -> Void)
        case finished
    }

    private let state = Mutex(State.waiting(early: nil))

    /// A signal that came before the command started.
    var early: Int32? {
        state.withLock { state in
            if case .waiting(let early) = state { return early }
            return nil
        }
    }

    func deliver(_ number: Int32) {
        // `send` goes through the command's pidfd (swift-subprocess's `Execution.send`), which
        // names that process only: a signal that comes after it has been reaped fails (ESRCH,
        // or EBADF once swift-subprocess has closed the pidfd) instead of reaching a process
        // that reused its pid.
        state.withLock { state in
            switch state {
            case .waiting(nil): state = .waiting(early: number)
            case .waiting: break
            case .running(let send): send(number)
            case .finished: break
            }
        }
    }

    /// Routes signals to `send` from now on; one that came between the check of ``early``
    /// and now is sent at once.
    func attach(_ send: @escaping @Sendable (Int32) -> Void) {
        state.withLock { state in
            if case .waiting(let early?) = state { send(early) }
            state = .running(send)
        }
    }

    func detach() {
        state.withLock { $0 = .finished }
    }
}
