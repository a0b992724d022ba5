import AuthController
import Foundation
import Testing

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
        AuthController(service: serviceName, keyring: SecretServiceStore(promptAllowed: false),
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

/// Runs a program to completion with output in temporary files (no pipe can fill up), killing
/// it if it outlives `timeout`.
func runProcess(_ path: String, _ arguments: [String], input: [UInt8]?, environment: [String: String], timeout: Double) throws -> Run {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.environment = environment
    let outputs = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-run-" + UUID().uuidString)
    try FileManager.default.createDirectory(at: outputs, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: outputs) }
    let stdoutURL = outputs.appendingPathComponent("stdout"), stderrURL = outputs.appendingPathComponent("stderr")
    FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
    FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
    let stdoutHandle = try FileHandle(forWritingTo: stdoutURL), stderrHandle = try FileHandle(forWritingTo: stderrURL)
    process.standardOutput = stdoutHandle
    process.standardError = stderrHandle
    let inputPipe = Pipe()
    process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
    let started = Date()
    try process.run()
    if let input {
        inputPipe.fileHandleForWriting.write(Data(input))
        try? inputPipe.fileHandleForWriting.close()
    }
    let killer = DispatchWorkItem { if process.isRunning { process.interrupt(); kill(process.processIdentifier, SIGKILL) } }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
    process.waitUntilExit()
    killer.cancel()
    try? stdoutHandle.close()
    try? stderrHandle.close()
    return Run(status: process.terminationStatus,
               stdout: (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "",
               stderr: (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "",
               seconds: Date().timeIntervalSince(started))
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
