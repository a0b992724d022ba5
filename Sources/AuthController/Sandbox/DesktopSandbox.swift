import Foundation

/// Passes signals on to a child once it runs; remembers one that came before.
private final class SignalRelay: @unchecked Sendable {
    private let lock = NSLock()
    private var child: ChildProcess?
    private var early: Int32?

    func deliver(_ signalNumber: Int32) {
        lock.withLock {
            if let child { child.send(signalNumber) } else if early == nil { early = signalNumber }
        }
    }

    /// Starts the child unless a signal came first; waits for it.
    func run(_ start: () throws(AuthError) -> ChildProcess) throws(AuthError) -> Int32 {
        lock.lock()
        if let early {
            lock.unlock()
            return 128 + early
        }
        let started: ChildProcess
        do {
            started = try start()
        } catch {
            lock.unlock()
            throw error
        }
        child = started
        lock.unlock()
        return started.wait()
    }
}

/// A throwaway desktop session: a private session bus and an unlocked gnome-keyring with a
/// fresh default collection, under a new temporary directory that holds `XDG_DATA_HOME`,
/// `XDG_CONFIG_HOME` and `XDG_RUNTIME_DIR`. The caller's own keyring and settings are never
/// touched. ``stop(keepingDirectory:)`` stops the daemons and removes the directory.
///
/// The bus has no service directories, so nothing is auto-started on it: a Secret Service
/// that dies stays gone instead of being replaced by one this sandbox does not control.
public final class DesktopSandbox: @unchecked Sendable {
    /// The temporary directory.
    public let directory: String
    /// The private bus's address (`unix:path=…`).
    public let busAddress: String
    private let bus: ChildProcess
    private var keyring: ChildProcess?
    private let lock = NSLock()
    private var stopped = false

    /// The variables a command in the sandbox needs: `DBUS_SESSION_BUS_ADDRESS` and the XDG folders.
    public var environment: [String: String] {
        [
            "DBUS_SESSION_BUS_ADDRESS": busAddress,
            "XDG_CONFIG_HOME": directory + "/config",
            "XDG_DATA_HOME": directory + "/data",
            "XDG_RUNTIME_DIR": directory + "/runtime",
        ]
    }

    /// The keyring daemon's process id, while it runs.
    public var keyringProcessID: Int32? { lock.withLock { keyring?.processID } }

    /// Starts `dbus-daemon`, then (with `keyring`) `gnome-keyring-daemon --unlock`, and returns
    /// once the Secret Service answers on the bus and its `default` alias resolves.
    /// - Throws: ``AuthError/unavailable(_:detail:)`` when a daemon is missing or does not come
    ///   up within `startupTimeout` seconds.
    public init(keyring startKeyring: Bool = true, startupTimeout: Double = 5) throws(AuthError) {
        let giveUp = Posix.monotonicSeconds() + startupTimeout
        let dbusDaemon = try Self.executable("dbus-daemon", package: "dbus-daemon")
        let keyringDaemon = startKeyring ? try Self.executable("gnome-keyring-daemon", package: "gnome-keyring") : nil
        let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        do {
            directory = try Posix.makeTemporaryDirectory(base + "/authctl-sandbox.XXXXXX")
            for folder in ["config", "data", "runtime"] { try Posix.makeDirectory(directory + "/" + folder, mode: 0o700) }
        } catch {
            throw .unavailable("cannot create the sandbox directory in \(base): \(error.message)")
        }
        busAddress = "unix:path=\(directory)/runtime/bus"
        let configuration = directory + "/bus.conf"
        do {
            try Self.busConfiguration(socket: directory + "/runtime/bus")
                .write(toFile: configuration, atomically: true, encoding: .utf8)
        } catch {
            throw .unavailable("cannot write the sandbox bus configuration: \(error.localizedDescription)")
        }
        do {
            bus = try ChildProcess(dbusDaemon, arguments: ["--config-file=\(configuration)", "--nofork", "--nopidfile"],
                                   environment: Self.inheritedEnvironment, ownProcessGroup: true)
        } catch {
            throw .unavailable("cannot start dbus-daemon: \(error.message)")
        }
        do throws(AuthError) {
            let connection = try waitForBus(until: giveUp)
            if let keyringDaemon {
                try launchKeyring(keyringDaemon)
                try waitForSecretService(connection, until: giveUp)
            }
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Stops the daemons (SIGTERM, then waits) and removes the directory unless kept.
    public func stop(keepingDirectory: Bool = false) {
        let (keyring, alreadyStopped) = lock.withLock { () -> (ChildProcess?, Bool) in
            defer { stopped = true }
            return (self.keyring, stopped)
        }
        guard !alreadyStopped else { return }
        keyring?.terminate()
        bus.terminate()
        if !keepingDirectory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Starts a sandbox, runs `program` in it, waits for it, and stops the sandbox (keeping
    /// the directory when asked). SIGINT, SIGTERM and SIGHUP are passed on to the program; one
    /// that arrives while the daemons start stops them and ends the run instead.
    /// - Parameter directoryKept: called with the directory's path when it is kept.
    /// - Returns: the program's exit status, or 128 + the signal that ended it (or the run).
    public static func run(_ path: String, arguments: [String], keepingDirectory: Bool = false,
                           directoryKept: (String) -> Void = { _ in }) throws(AuthError) -> Int32 {
        let relay = SignalRelay()
        let forwarded = [SIGINT, SIGTERM, SIGHUP]
        // From here on these signals are events to relay, not the end of this process.
        for signalNumber in forwarded { signal(signalNumber, SIG_IGN) }
        let sources = forwarded.map { signalNumber in
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { relay.deliver(signalNumber) }
            source.resume()
            return source
        }
        defer {
            for source in sources { source.cancel() }
            for signalNumber in forwarded { signal(signalNumber, SIG_DFL) }
        }
        let sandbox = try DesktopSandbox()
        defer {
            sandbox.stop(keepingDirectory: keepingDirectory)
            if keepingDirectory { directoryKept(sandbox.directory) }
        }
        var variables = inheritedEnvironment
        for (key, value) in sandbox.environment { variables[key] = value }
        return try relay.run { () throws(AuthError) -> ChildProcess in
            do throws(Posix.Failure) {
                return try ChildProcess(path, arguments: arguments, environment: variables, standardInput: STDIN_FILENO,
                                        standardOutput: STDOUT_FILENO, standardError: STDERR_FILENO)
            } catch {
                throw .unavailable("cannot run \(path): \(error.message)")
            }
        }
    }

    /// The full path of `command`: as given when it holds a `/`, else the first executable
    /// of that name on `PATH`; `nil` when there is none.
    public static func resolve(_ command: String) -> String? {
        if command.contains("/") { return command }
        return try? executable(command, package: nil)
    }

    // MARK: - Steps
    // MARK: - Steps

    private static func executable(_ name: String, package: String?) throws(AuthError) -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for folder in path.split(separator: ":") where folder.hasPrefix("/") {
            let candidate = "\(folder)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        guard let package else { throw .unavailable("\(name): command not found on PATH") }
        throw .unavailable("\(name) is not on PATH; install the Debian package \(package) (`apt-get install \(package)`)")
    }

    private static func busConfiguration(socket: String) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:path=\(socket)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>

        """
    }

    /// This process's environment, for the children.
    private static var inheritedEnvironment: [String: String] { ProcessInfo.processInfo.environment }

    private func launchKeyring(_ path: String) throws(AuthError) {
        var variables = Self.inheritedEnvironment
        for (key, value) in environment { variables[key] = value }
        variables.removeValue(forKey: "DISPLAY")
        variables.removeValue(forKey: "WAYLAND_DISPLAY")
        do {
            let input = try Posix.pipe()
            defer { Posix.close(input.read) }
            let process = try ChildProcess(path, arguments: ["--foreground", "--unlock", "--components=secrets"],
                                           environment: variables, standardInput: input.read, ownProcessGroup: true)
            lock.withLock { keyring = process }
            // The unlock password of the throwaway login keyring, read up to end of file.
            let password = Posix.randomBytes(16).map { String($0, radix: 16) }.joined()
            defer { Posix.close(input.write) }
            try Posix.writeAll(input.write, Array(password.utf8))
        } catch {
            throw .unavailable("cannot start gnome-keyring-daemon: \(error.message)")
        }
    }

    private func waitForBus(until giveUp: Double) throws(AuthError) -> GDBus.Connection {
        while true {
            if !bus.isRunning { throw .unavailable("dbus-daemon exited at start-up (status \(bus.wait()))") }
            if let connection = try? GDBus.connectionNewForAddress(busAddress, Deadline(seconds: 1)) { return connection }
            guard Posix.monotonicSeconds() < giveUp else { throw .unavailable("dbus-daemon did not come up within the start-up deadline") }
            Posix.pause(milliseconds: 10)
        }
    }

    private func waitForSecretService(_ connection: GDBus.Connection, until giveUp: Double) throws(AuthError) {
        while true {
            if let keyring = lock.withLock({ keyring }), !keyring.isRunning {
                throw .unavailable("gnome-keyring-daemon exited at start-up (status \(keyring.wait()))")
            }
            let deadline = Deadline(seconds: 1)
            let owned = try? GDBus.connectionCall(connection, destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                  interface: "org.freedesktop.DBus", method: "NameHasOwner",
                                                  strings: ["org.freedesktop.secrets"], deadline)
            if owned == "true" {
                let alias = try? GDBus.connectionCall(connection, destination: "org.freedesktop.secrets",
                                                      path: "/org/freedesktop/secrets", interface: "org.freedesktop.Secret.Service",
                                                      method: "ReadAlias", strings: ["default"], deadline)
                if let alias, alias != "/" { return }
            }
            guard Posix.monotonicSeconds() < giveUp else {
                throw .unavailable("gnome-keyring-daemon did not offer a default collection within the start-up deadline")
            }
            Posix.pause(milliseconds: 10)
        }
    }
}
