@testable import AuthController
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One throwaway desktop session (private bus + unlocked gnome-keyring) shared by the tests
/// that do not disturb it. Tests keep out of each other's way with their own service name and
/// settings folder. A missing daemon fails the tests: they never skip.
enum SharedSandbox {
    static let instance: Result<DesktopSandbox, AuthError> = Result { () throws(AuthError) in
        let sandbox = try DesktopSandbox(startupTimeout: 20)
        // In-process library tests reach the keyring through the session bus of this process.
        setenv("DBUS_SESSION_BUS_ADDRESS", sandbox.busAddress, 1)
        // Swift Testing has no global tear-down: stop the daemons when the test process exits.
        atexit { if case .success(let sandbox) = SharedSandbox.instance { sandbox.stop() } }
        return sandbox
    }

    static func get() throws -> DesktopSandbox {
        try instance.get()
    }
}

/// What a finished `authctl` process left behind.
struct Run: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var seconds: Double

    var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
    /// stdout without its final newline.
    var output: String { stdout.hasSuffix("\n") ? String(stdout.dropLast()) : stdout }
}

/// A test's own corner of a sandbox: a unique service and settings folder.
struct Scenario {
    let sandbox: DesktopSandbox
    let service: String
    let configHome: String
    var extraEnvironment: [String: String] = [:]

    init(sandbox: DesktopSandbox? = nil, service: String? = nil) throws {
        self.sandbox = try sandbox ?? SharedSandbox.get()
        self.service = service ?? "test-" + UUID().uuidString.lowercased()
        configHome = self.sandbox.directory + "/config-" + UUID().uuidString.lowercased()
    }

    var serviceName: ServiceName { ServiceName(rawValue: service)! }
    var settingsDirectory: String { configHome + "/authctl" }
    var settingsFile: String { settingsDirectory + "/settings.ini" }

    var environment: [String: String] {
        var variables = ProcessInfo.processInfo.environment
        for key in ["DISPLAY", "WAYLAND_DISPLAY", "AUTHCTL_SERVICE", "AUTHCTL_DEBUG"] { variables.removeValue(forKey: key) }
        for (key, value) in sandbox.environment { variables[key] = value }
        variables["XDG_CONFIG_HOME"] = configHome
        variables["AUTHCTL_SERVICE"] = service
        for (key, value) in extraEnvironment { variables[key] = value }
        return variables
    }

    /// Runs the built `authctl` with `arguments`, feeding `input` on stdin (or /dev/null).
    @discardableResult
    func authctl(_ arguments: [String], input: [UInt8]? = nil, timeout: Double = 60) throws -> Run {
        try runProcess(Self.binary, arguments, input: input, environment: environment, timeout: timeout)
    }

    @discardableResult
    func authctl(_ arguments: String..., stdin: String? = nil) throws -> Run {
        try authctl(arguments, input: stdin.map { Array($0.utf8) })
    }

    /// Locks the sandbox's default collection through the Secret Service API (no prompt needed).
    func lockKeyring() throws {
        let run = try gdbus("call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                            "--method", "org.freedesktop.Secret.Service.Lock", "['/org/freedesktop/secrets/collection/login']")
        #expect(run.status == 0, "\(run)")
    }

    /// Points the bus address, and GLib's `$XDG_RUNTIME_DIR/bus` fallback, at nothing.
    mutating func cutOffFromTheBus() {
        extraEnvironment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/bus"
        extraEnvironment["XDG_RUNTIME_DIR"] = "/nonexistent"
    }

    /// Starts `authctl` without waiting for it.
    func start(_ arguments: [String], input: [UInt8]? = nil) throws -> Spawned {
        try Spawned(Self.binary, arguments, input: input, environment: environment)
    }

    /// `secret-tool` (libsecret-tools) against the same keyring.
    func secretTool(_ arguments: String..., stdin: String? = nil) throws -> Run {
        try runProcess(try which("secret-tool", package: "libsecret-tools"), arguments, input: stdin.map { Array($0.utf8) },
                       environment: environment, timeout: 30)
    }

    /// `gdbus` (libglib2.0-bin) on the sandbox bus.
    func gdbus(_ arguments: String...) throws -> Run {
        try runProcess(try which("gdbus", package: "libglib2.0-bin"), arguments, input: nil, environment: environment, timeout: 30)
    }

    /// The controller of the library, wired to the real keyring and this scenario's settings.
    func controller(settings: (any SettingsStore)? = nil) -> AuthController {
        AuthController(service: serviceName, keyring: SecretServiceStore(promptAllowed: false, busAddress: sandbox.busAddress),
                       settings: settings ?? KeyFileSettingsStore(directory: settingsDirectory),
                       hasher: Argon2idHasher(), broadcaster: DBusBroadcaster(busAddress: sandbox.busAddress))
    }

    /// A listener on the sandbox bus for this scenario's service.
    func listener() throws -> LoginEventListener {
        try LoginEventListener(service: serviceName, busAddress: sandbox.busAddress)
    }

    static let binary: String = {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var folder = URL(fileURLWithPath: executable).deletingLastPathComponent()
        // The test binary sits in `.build/<triple>/debug`, possibly inside an `.xctest` bundle.
        while !FileManager.default.isExecutableFile(atPath: folder.appendingPathComponent("authctl").path), folder.path != "/" {
            folder.deleteLastPathComponent()
        }
        return folder.appendingPathComponent("authctl").path
    }()
}

func which(_ name: String, package: String) throws -> String {
    for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let candidate = "\(folder)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    Issue.record("\(name) is not installed: install the Debian package \(package)")
    throw AuthError.unavailable("\(name) missing")
}

/// A program started the way a shell starts one, with an empty signal mask (Foundation's
/// `Process` passes on the mask of the thread that starts it), its output in temporary files
/// so no pipe can fill up.
final class Spawned: @unchecked Sendable {
    let pid: pid_t
    private let child: ChildProcess
    private let outputs: URL
    private let started = Date()

    init(_ path: String, _ arguments: [String], input: [UInt8]?, environment: [String: String]) throws {
        outputs = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-run-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: outputs, withIntermediateDirectories: true)
        let stdoutFD = open(outputs.appendingPathComponent("stdout").path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        let stderrFD = open(outputs.appendingPathComponent("stderr").path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        let ends = try Posix.pipe()
        defer { close(stdoutFD); close(stderrFD); close(ends.read) }
        child = try ChildProcess(path, arguments: arguments, environment: environment,
                                 standardInput: input == nil ? nil : ends.read, standardOutput: stdoutFD, standardError: stderrFD)
        pid = child.processID
        if let input {
            // Fed from another thread: a child that exits early must not block the test.
            let writer = ends.write
            DispatchQueue.global().async {
                Glibc.signal(SIGPIPE, SIG_IGN)
                try? Posix.writeAll(writer, input)
                close(writer)
            }
        } else {
            close(ends.write)
        }
    }

    deinit { try? FileManager.default.removeItem(at: outputs) }

    var stdout: String { (try? String(contentsOf: outputs.appendingPathComponent("stdout"), encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOf: outputs.appendingPathComponent("stderr"), encoding: .utf8)) ?? "" }

    func signal(_ number: Int32) { kill(pid, number) }

    /// Waits for the program, killing it after `timeout` seconds.
    func wait(timeout: Double = 60) -> Run {
        let killer = DispatchWorkItem { [pid] in kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
        let status = child.wait()
        killer.cancel()
        return Run(status: status, stdout: stdout, stderr: stderr, seconds: Date().timeIntervalSince(started))
    }

    /// Waits until stdout holds `count` lines (or the program ends), at most `timeout` seconds.
    func waitForLines(_ count: Int, timeout: Double = 30) -> [String] {
        let giveUp = Date().addingTimeInterval(timeout)
        while Date() < giveUp {
            let lines = stdout.split(separator: "\n").map(String.init)
            if lines.count >= count || !child.isRunning { return stdout.split(separator: "\n").map(String.init) }
            usleep(5_000)  // polling a file for a condition, with a deadline
        }
        return stdout.split(separator: "\n").map(String.init)
    }
}

/// Runs a program to completion.
func runProcess(_ path: String, _ arguments: [String], input: [UInt8]?, environment: [String: String], timeout: Double) throws -> Run {
    try Spawned(path, arguments, input: input, environment: environment).wait(timeout: timeout)
}

/// Collects `count` events from a listener, failing after `timeout` seconds.
func collect(_ count: Int, from listener: LoginEventListener, timeout: Double = 30) async throws -> [LoginEvent] {
    try await withThrowingTaskGroup(of: [LoginEvent]?.self) { group in
        group.addTask {
            var events: [LoginEvent] = []
            for await event in listener.events {
                events.append(event)
                if events.count == count { break }
            }
            return events
        }
        group.addTask {
            try await Task.sleep(for: .seconds(timeout))
            return nil
        }
        let first = try await group.next()!
        group.cancelAll()
        listener.stop()
        guard let events = first else {
            Issue.record("timed out waiting for \(count) events")
            return []
        }
        return events
    }
}

func password(_ text: String) -> Password { try! Password(text) }
