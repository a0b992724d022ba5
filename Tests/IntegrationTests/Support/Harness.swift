// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import DesktopSandbox
import Foundation
import Subprocess
import Synchronization
import SystemPackage
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One throwaway desktop session (private bus + unlocked gnome-keyring) shared by the tests
/// that do not disturb it. Tests keep out of each other's way with their own service name and
/// settings folder. A missing daemon fails the tests: they never skip.
enum SharedSandbox {
    private static let instance = Task { () async throws -> DesktopSandbox in
        let sandbox = try await DesktopSandbox.started()
        // In-process library tests use this sandbox's keyring: the Secret Service is the one
        // on the process's session bus, as libsecret finds it (it cannot be handed another bus).
        // Set before any test reaches the session bus: every in-process test awaits this first.
        setenv("DBUS_SESSION_BUS_ADDRESS", sandbox.busAddress, 1)
        // No tear-down is needed (Swift Testing has none): when the test process exits, the
        // sandbox's supervisor stops the daemons and removes the directory.
        return sandbox
    }

    static func get() async throws -> DesktopSandbox {
        try await instance.value
    }
}

extension DesktopSandbox {
    /// Starts a sandbox with this process's `TMPDIR` and `PATH`. A test's own sandbox is set-up,
    /// not what it tests: on a 2-core machine a dozen start at once, beside the OpenID tests' Python
    /// providers, so they get 45 s.
    static func started(keyring: Bool = true, startupTimeout: Double = 45, serviceDirectories: [String] = []) async throws -> DesktopSandbox {
        let variables = ProcessInfo.processInfo.environment
        return try await DesktopSandbox.start(keyring: keyring, startupTimeout: startupTimeout,
                                              temporaryDirectory: variables["TMPDIR"], searchPath: variables["PATH"],
                                              serviceDirectories: serviceDirectories)
    }

    /// ``stop()`` for a test's `defer`, which cannot wait: the sandbox stops in the background.
    func stop() {
        Task { await self.stop() as Void }
    }
}

/// What a finished `authctl` process left behind.
struct Run: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    /// How long the program ran, from its spawning to its reaping.
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
    /// How many times more a `secret-tool lookup` or `search` that found nothing is run: on
    /// KWallet, libsecret's key exchange fails about one session in a hundred, and secret-tool
    /// then reports the item it could not decode as not found. Reads change nothing, so a second
    /// look is safe, and one that finds nothing three times did find nothing.
    var secretToolLookAgain = 0
    /// What authctl is started through (`unshare` into a mount namespace, say), its own path and
    /// arguments then following; none by default.
    var launcher: [String] = []

    init(sandbox: DesktopSandbox? = nil, service: String? = nil) async throws {
        if let sandbox { self.sandbox = sandbox } else { self.sandbox = try await SharedSandbox.get() }
        self.service = service ?? "test-" + UUID().uuidString.lowercased()
        configHome = self.sandbox.directory + "/config-" + UUID().uuidString.lowercased()
    }

    var serviceName: ServiceName { ServiceName(rawValue: service)! }
    /// The settings folder the scenario's commands use: its own, or the one another
    /// `XDG_CONFIG_HOME` in ``extraEnvironment`` names (serve's tests share serve's).
    var settingsDirectory: String { (extraEnvironment["XDG_CONFIG_HOME"] ?? configHome) + "/authctl" }
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
    func authctl(_ arguments: [String], input: [UInt8]? = nil, timeout: Double = 60) async throws -> Run {
        try await runProcess(launched.path, launched.arguments + arguments, input: input, environment: environment, timeout: timeout)
    }

    /// The program that starts authctl, and the arguments before authctl's own.
    private var launched: (path: String, arguments: [String]) {
        guard let first = launcher.first else { return (Self.binary, []) }
        return (first, Array(launcher.dropFirst()) + [Self.binary])
    }

    @discardableResult
    func authctl(_ arguments: String..., stdin: String? = nil) async throws -> Run {
        try await authctl(arguments, input: stdin.map { Array($0.utf8) })
    }

    /// Locks the sandbox's default collection through the Secret Service API (no prompt needed).
    func lockKeyring() async throws {
        let run = try await gdbus("call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                            "--method", "org.freedesktop.Secret.Service.Lock", "['/org/freedesktop/secrets/collection/login']")
        #expect(run.status == 0, "\(run)")
    }

    /// Writes the access token's expiry into the settings file (µs since the epoch), under the
    /// settings lock as authctl writes it: the test makes the state it needs — a token that is
    /// due, or one that has expired — by the clock authctl reads from its store, instead of
    /// waiting for the wall clock to reach it, which a loaded machine makes late. The token
    /// server still takes the token: only authctl's view of its life changes.
    /// `service` is another service sharing this scenario's settings folder, when given.
    func setAccessExpiry(_ microseconds: UInt64, service: String? = nil) throws {
        let name = try #require(ServiceName(rawValue: service ?? self.service))
        let store = KeyFileSettingsStore(directory: settingsDirectory)
        try store.withExclusiveLock { () throws(AuthError) in
            var record = try store.read(service: name).record
            #expect(record.user != nil && record.tokenTimes != nil, "nobody with tokens is signed in to \(name)")
            record.tokenTimes?.accessExpiresAt = microseconds
            _ = try store.save(record, service: name)
        }
    }

    /// Makes the access token expired a second ago, as ``setAccessExpiry(_:service:)`` does.
    func expireAccessToken(service: String? = nil) throws {
        try setAccessExpiry(AuthController.systemClock() - 1_000_000, service: service)
    }

    /// Points the bus address, and GLib's `$XDG_RUNTIME_DIR/bus` fallback, at nothing.
    mutating func cutOffFromTheBus() {
        extraEnvironment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/bus"
        extraEnvironment["XDG_RUNTIME_DIR"] = "/nonexistent"
    }

    /// Runs `authctl` at once, not behind the suite's limit on processes running together: for
    /// a command whose moment the test chose (just before or after a token expires), which a
    /// wait for a slot behind slow sign-ins could push past that moment.
    @discardableResult
    func authctlNow(_ arguments: String..., stdin: String? = nil) async throws -> Run {
        await (try start(arguments, input: stdin.map { Array($0.utf8) })).wait()
    }

    /// Starts `authctl` without waiting for it.
    func start(_ arguments: [String], input: [UInt8]? = nil) async throws -> Spawned {
        try await Spawned(launched.path, launched.arguments + arguments, input: input, environment: environment)
    }

    /// `secret-tool` (libsecret-tools) against the same keyring.
    func secretTool(_ arguments: String..., stdin: String? = nil) async throws -> Run {
        try await secretTool(arguments, stdin: stdin)
    }

    func secretTool(_ arguments: [String], stdin: String? = nil) async throws -> Run {
        let secretTool = try which("secret-tool", package: "libsecret-tools")
        var run = try await runProcess(secretTool, arguments, input: stdin.map { Array($0.utf8) }, environment: environment, timeout: 30)
        var looks = 0
        while ["lookup", "search"].contains(arguments.first), run.stdout.isEmpty, looks < secretToolLookAgain {
            looks += 1
            run = try await runProcess(secretTool, arguments, input: stdin.map { Array($0.utf8) }, environment: environment, timeout: 30)
        }
        return run
    }

    /// `gdbus` (libglib2.0-bin) on the sandbox bus.
    func gdbus(_ arguments: String...) async throws -> Run {
        try await runProcess(try which("gdbus", package: "libglib2.0-bin"), arguments, input: nil, environment: environment, timeout: 30)
    }

    /// The controller of the library, wired to the real keyring and this scenario's settings.
    /// The keyring is the process's session bus's: only the shared sandbox's scenarios have one.
    func controller(settings: (any SettingsStore)? = nil) async throws -> AuthController {
        #expect(sandbox.busAddress == (try await SharedSandbox.get()).busAddress,
                "an in-process controller's keyring is the process's session bus: the shared sandbox's")
        return AuthController(service: serviceName, keyring: SecretServiceStore(promptAllowed: false),
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

/// A program started through swift-subprocess, which gives it an empty signal mask and
/// default signal actions (as a shell does), with its output in temporary files so no pipe
/// can fill up, or in pipes read as they arrive. Only the program itself is waited for: a
/// helper it leaves behind, holding its output open, keeps nobody waiting.
final class Spawned: Sendable {
    let pid: pid_t
    /// Whether the program leads a process group of its own, whose pgid is its pid.
    let leadsProcessGroup: Bool
    private let task: Task<Int32, Never>
    private let outputs: URL
    /// What the program wrote to its pipes, when its output goes to pipes.
    private let piped: Piped?
    /// The end of the program's stdin pipe that this side holds open, until ``closeInput()``.
    private let heldInput: Mutex<FileDescriptor?>
    private let started = Date()
    /// Set once swift-subprocess has reaped the program: its pid may then be another process's
    /// (pids wrap at 32768, and a suite starts thousands), which a late signal must not hit.
    private let reaped = ReapedFlag()

    private final class ReapedFlag: Sendable {
        let value = Atomic<Bool>(false)
        /// The program's life on the monotonic clock (ns): from the moment it was spawned to the
        /// moment it was reaped. A test's bound on how long a command runs is the command's own
        /// time, not also the time a loaded machine takes to start the test's tasks again.
        let spawnedAt = Atomic<UInt64>(0)
        let reapedAt = Atomic<UInt64>(0)

        static func now() -> UInt64 {
            var time = timespec()
            clock_gettime(CLOCK_MONOTONIC, &time)
            return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
        }
    }

    private final class Piped: Sendable {
        let bytes = Mutex<(stdout: [UInt8], stderr: [UInt8])>(([], []))
    }

    /// Starts `path`; `input` is fed on stdin (or /dev/null when `nil`). With `terminal`, that
    /// descriptor (a pseudo-terminal) is stdin, stdout and stderr instead. With
    /// `leadsProcessGroup`, the program starts a process group of its own, which a timeout kills
    /// whole. With `holdsInputOpen`, stdin is a pipe that stays open until ``closeInput()`` or
    /// ``stop()`` (the test servers end when it closes). With `pipesOutput`, stdout and stderr
    /// are pipes, as under a pipeline or a systemd unit, which are read as they arrive.
    init(_ path: String, _ arguments: [String], input: [UInt8]?, environment: [String: String], terminal: Int32? = nil,
         leadsProcessGroup: Bool = false, holdsInputOpen: Bool = false, pipesOutput: Bool = false) async throws {
        outputs = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-run-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: outputs, withIntermediateDirectories: true)
        self.leadsProcessGroup = leadsProcessGroup
        var configuration = Configuration(
            executable: .path(FilePath(path)), arguments: Arguments(arguments),
            environment: .custom(Dictionary(uniqueKeysWithValues: environment.map { (Environment.Key(stringLiteral: $0.key), $0.value) })))
        if leadsProcessGroup { configuration.platformOptions.processGroupID = 0 }
        // The child's ends: a terminal stays open here, every other end is the child's alone.
        let childInput: FileDescriptor?, childOutput: FileDescriptor, childError: FileDescriptor
        var ownEnds: (input: FileDescriptor?, output: FileDescriptor?, error: FileDescriptor?) = (nil, nil, nil)
        if let terminal {
            (childInput, childOutput, childError) = (FileDescriptor(rawValue: terminal), FileDescriptor(rawValue: terminal),
                                                     FileDescriptor(rawValue: terminal))
        } else {
            if input != nil || holdsInputOpen {
                let ends = try FileDescriptor.pipe(options: .closeOnExec)
                (childInput, ownEnds.input) = (ends.readEnd, ends.writeEnd)
            } else {
                childInput = nil
            }
            if pipesOutput {
                let output = try FileDescriptor.pipe(options: .closeOnExec)
                let error = try FileDescriptor.pipe(options: .closeOnExec)
                (childOutput, ownEnds.output, childError, ownEnds.error) = (output.writeEnd, output.readEnd, error.writeEnd, error.readEnd)
            } else {
                childOutput = try FileDescriptor.open(FilePath(outputs.appendingPathComponent("stdout").path), .writeOnly,
                                                      options: [.create, .closeOnExec], permissions: .ownerReadWrite)
                childError = try FileDescriptor.open(FilePath(outputs.appendingPathComponent("stderr").path), .writeOnly,
                                                     options: [.create, .closeOnExec], permissions: .ownerReadWrite)
            }
        }
        let closeAfterSpawning = terminal == nil
        do {
            if let childInput {
                (pid, task) = try await Self.launch(configuration, reaped: reaped,
                                                    input: FileDescriptorInput.fileDescriptor(childInput, closeAfterSpawningProcess: closeAfterSpawning),
                                                    output: .fileDescriptor(childOutput, closeAfterSpawningProcess: closeAfterSpawning),
                                                    error: .fileDescriptor(childError, closeAfterSpawningProcess: closeAfterSpawning))
            } else {
                (pid, task) = try await Self.launch(configuration, reaped: reaped, input: NoInput.none,
                                                    output: .fileDescriptor(childOutput, closeAfterSpawningProcess: closeAfterSpawning),
                                                    error: .fileDescriptor(childError, closeAfterSpawningProcess: closeAfterSpawning))
            }
        } catch {
            for end in [ownEnds.input, ownEnds.output, ownEnds.error] { try? end?.close() }
            throw error
        }
        if let output = ownEnds.output, let error = ownEnds.error {
            let piped = Piped()
            Self.read(output, into: piped, isError: false)
            Self.read(error, into: piped, isError: true)
            self.piped = piped
        } else {
            piped = nil
        }
        if holdsInputOpen {
            heldInput = Mutex(ownEnds.input)
        } else {
            heldInput = Mutex(nil)
            if let writer = ownEnds.input, let input {
                // Fed from another thread: a child that exits early must not block the test.
                DispatchQueue.global().async {
                    Glibc.signal(SIGPIPE, SIG_IGN)
                    _ = try? writer.writeAll(input)
                    try? writer.close()
                }
            }
        }
    }

    /// Appends what `descriptor` delivers to `piped` on a thread of its own, which closes it at
    /// its end: the end of the last writer, the program or a helper it left behind.
    private static func read(_ descriptor: FileDescriptor, into piped: Piped, isError: Bool) {
        Thread.detachNewThread {
            defer { try? descriptor.close() }
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = (try? chunk.withUnsafeMutableBytes { try descriptor.read(into: $0) }) ?? 0
                if count == 0 { return }
                piped.bytes.withLock { if isError { $0.stderr += chunk[..<count] } else { $0.stdout += chunk[..<count] } }
            }
        }
    }

    private final class FailureBox: Sendable {
        let value = Mutex<(any Error)?>(nil)
    }

    /// Starts the program in a task of its own and returns its pid once it runs, and the task,
    /// which ends with the exit status (or 128 + signal) once swift-subprocess has reaped it.
    private static func launch(_ configuration: Configuration, reaped: ReapedFlag, input: some InputProtocol & Sendable,
                               output: FileDescriptorOutput, error: FileDescriptorOutput) async throws -> (pid_t, Task<Int32, Never>) {
        let (started, announce) = AsyncStream.makeStream(of: pid_t.self)
        let failure = FailureBox()
        let task = Task { () -> Int32 in
            do {
                let result = try await Subprocess.run(configuration, input: input, output: output, error: error) { execution in
                    reaped.spawnedAt.store(ReapedFlag.now(), ordering: .relaxed)
                    announce.yield(execution.processIdentifier.value)
                    announce.finish()
                }
                reaped.reapedAt.store(ReapedFlag.now(), ordering: .relaxed)
                reaped.value.store(true, ordering: .releasing)
                switch result.terminationStatus {
                case .exited(let code): return code
                case .signaled(let signal): return 128 + signal
                }
            } catch {
                failure.value.withLock { $0 = error }
                announce.finish()
                return 127
            }
        }
        for await pid in started { return (pid, task) }
        _ = await task.value
        throw failure.value.withLock { $0 } ?? AuthError.unavailable("\(configuration.executable) did not start")
    }

    /// A program its test no longer holds is ended: left running, a `serve` or a refresh would
    /// go on knocking on its test server's port after the test, which a later test's server may
    /// by then be listening on.
    deinit {
        closeInput()
        try? FileManager.default.removeItem(at: outputs)
        guard !reaped.value.load(ordering: .acquiring) else { return }
        let (target, reaped) = (leadsProcessGroup ? -pid : pid, reaped)
        kill(target, SIGTERM)
        Task.detached {
            try? await Task.sleep(for: .seconds(5))
            // Not reaped yet, so the pid is still the program's.
            if !reaped.value.load(ordering: .acquiring) { kill(target, SIGKILL) }
        }
    }

    var stdout: String {
        if let piped { return String(decoding: piped.bytes.withLock { $0.stdout }, as: UTF8.self) }
        return (try? String(contentsOf: outputs.appendingPathComponent("stdout"), encoding: .utf8)) ?? ""
    }

    var stderr: String {
        if let piped { return String(decoding: piped.bytes.withLock { $0.stderr }, as: UTF8.self) }
        return (try? String(contentsOf: outputs.appendingPathComponent("stderr"), encoding: .utf8)) ?? ""
    }

    /// Closes the end of stdin held open (see `holdsInputOpen`), if it still is.
    func closeInput() {
        let end = heldInput.withLock { end -> FileDescriptor? in
            defer { end = nil }
            return end
        }
        try? end?.close()
    }

    /// Writes `bytes` to the stdin held open (see `holdsInputOpen`); throws once it is closed.
    func write(_ bytes: [UInt8]) throws {
        try heldInput.withLock { end in
            guard let end else { throw Errno.badFileDescriptor }
            // The program may be gone: a write to its closed pipe is an error here, not a SIGPIPE.
            Glibc.signal(SIGPIPE, SIG_IGN)
            _ = try end.writeAll(bytes)
        }
    }

    /// Closes stdin, which ends a program that reads it to its end (the test servers), and sends
    /// SIGTERM to one that does not. Returns at once.
    func stop() {
        closeInput()
        signal(SIGTERM)
    }

    /// Whether the program has ended and been reaped.
    var hasEnded: Bool { reaped.value.load(ordering: .acquiring) }

    /// Sends `number` to the program, unless it has ended and been reaped (a test's `defer` often
    /// signals a program that is long gone).
    func signal(_ number: Int32) {
        guard !reaped.value.load(ordering: .acquiring) else { return }
        kill(pid, number)
    }

    /// Waits for the program, killing it (and its process group, if it leads one) after
    /// `timeout` seconds.
    func wait(timeout: Double = 60) async -> Run {
        let killer = Task { [pid, leadsProcessGroup] in
            try await Task.sleep(for: .seconds(timeout))
            // Not reaped yet (this task is cancelled first), so the pid is still the program's.
            kill(leadsProcessGroup ? -pid : pid, SIGKILL)
        }
        let status = await task.value
        killer.cancel()
        let (spawnedAt, reapedAt) = (reaped.spawnedAt.load(ordering: .relaxed), reaped.reapedAt.load(ordering: .relaxed))
        let seconds = spawnedAt > 0 && reapedAt >= spawnedAt ? Double(reapedAt - spawnedAt) / 1e9 : Date().timeIntervalSince(started)
        return Run(status: status, stdout: stdout, stderr: stderr, seconds: seconds)
    }

    /// Waits until stdout holds `count` lines (or the program ends), at most `timeout` seconds.
    func waitForLines(_ count: Int, timeout: Double = 30) async -> [String] {
        _ = await waitForOutput(timeout: timeout) { $0.split(separator: "\n").count >= count }
        return stdout.split(separator: "\n").map(String.init)
    }

    /// Waits until stdout satisfies `condition`, at most `timeout` seconds; returns whether it did.
    func waitForOutput(timeout: Double, _ condition: (String) -> Bool) async -> Bool {
        await eventually(within: .seconds(timeout), pollingEvery: .milliseconds(5)) { condition(stdout) }
    }
}

/// Runs a program to completion.
/// Runs a program to completion, at most ``ProcessSlots/width`` at once across the suite.
func runProcess(_ path: String, _ arguments: [String], input: [UInt8]?, environment: [String: String], timeout: Double) async throws -> Run {
    await ProcessSlots.shared.acquire()
    let spawned: Spawned
    do {
        spawned = try await Spawned(path, arguments, input: input, environment: environment)
    } catch {
        await ProcessSlots.shared.release()
        throw error
    }
    let run = Task { await spawned.wait(timeout: timeout) }
    // A slot is for a process's busy start. One still running after two seconds is waiting — for
    // a browser, a server, a deadline — and gives its slot back: held for a minute, two such
    // sign-ins stalled every other test's commands past the token lifetimes they were timing.
    _ = await eventually(within: .seconds(2)) { spawned.hasEnded }
    await ProcessSlots.shared.release()
    return await run.value
}

/// Async tests suspend instead of blocking a thread, so Swift Testing runs them all at once;
/// on a two-core machine dozens of `authctl` processes at a time would make the deadlines
/// the tests check (5 s) measure the machine's load. As many run-to-completion processes run
/// at once as there are cores, as when each test held a thread while its process ran. (One more
/// made the main pass faster, but serve's 200 ms bound on a 600-service file then failed on an
/// unloaded run.)
actor ProcessSlots {
    static let shared = ProcessSlots()
    static let width = max(2, ProcessInfo.processInfo.activeProcessorCount)
    private var busy = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        if busy < Self.width {
            busy += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty { busy -= 1 } else { waiting.removeFirst().resume() }
    }
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

/// A TCP socket bound to 127.0.0.1 on a port the system chose, listening (it accepts, and never
/// answers) or not (connections to it are refused), and its port; the port stays this test's
/// until the descriptor is closed.
func loopbackSocket(listening: Bool) -> (descriptor: Int32, port: UInt16) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) } }
    if listening { listen(descriptor, 16) }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
    return (descriptor, UInt16(bigEndian: address.sin_port))
}
