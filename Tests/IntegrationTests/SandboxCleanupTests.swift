// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Whether a process with this pid exists (a zombie counts as gone: it runs nothing).
func processExists(_ pid: pid_t) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
    let state = stat.split(separator: ")").last?.split(separator: " ").first
    return state != "Z"
}

/// A fresh, empty directory for a test's own `TMPDIR` or fake `PATH` entries.
func freshDirectory(_ name: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-" + UUID().uuidString.prefix(8)).path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

@Suite("authctl sandbox: nothing left behind, and faults")
struct SandboxCleanupTests {
    @Test("SIGKILL of the sandbox: within 2 s its daemons are gone, the command got SIGTERM, the folder is removed")
    func killed() async throws {
        var scenario = try await Scenario()
        let mark = scenario.sandbox.directory + "/got-term-" + UUID().uuidString
        scenario.extraEnvironment["MARK"] = mark
        let script = #"trap 'echo got-term > "$MARK"; exit 0' TERM; echo "$XDG_RUNTIME_DIR"; while :; do sleep 0.05; done"#
        let sandbox = try await scenario.start(["sandbox", "--", "/bin/sh", "-c", script])
        let lines = await sandbox.waitForLines(1)
        let runtime = try #require(lines.first, "\(sandbox.stderr)")
        let folder = URL(fileURLWithPath: runtime).deletingLastPathComponent().path
        #expect(folder.contains("/authctl-sandbox."))

        // The daemons: the bus daemon knows its own pid and the keyring's.
        var inside = scenario
        inside.extraEnvironment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(runtime)/bus"
        func owner(_ name: String) async throws -> pid_t {
            let run = try await inside.gdbus("call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                                             "--method", "org.freedesktop.DBus.GetConnectionUnixProcessID", name)
            // "(uint32 1234,)"
            let digits = run.stdout.split(separator: " ").last?.filter(\.isNumber)
            return try #require(digits.flatMap { pid_t(String($0)) }, "\(run)")
        }
        let bus = try await owner("org.freedesktop.DBus")
        let keyring = try await owner("org.freedesktop.secrets")
        #expect(processExists(bus))
        #expect(processExists(keyring))

        let killedAt = Date()
        sandbox.signal(SIGKILL)
        #expect(await sandbox.wait(timeout: 10).status == 128 + SIGKILL)
        let clean = await eventually(within: .seconds(2 - Date().timeIntervalSince(killedAt))) {
            // The content, not the file's existence: the shell creates the file before it writes.
            !processExists(bus) && !processExists(keyring) && (try? String(contentsOfFile: mark, encoding: .utf8)) == "got-term\n"
                && !FileManager.default.fileExists(atPath: folder)
        }
        #expect(clean, "bus \(processExists(bus)), keyring \(processExists(keyring)), folder \(FileManager.default.fileExists(atPath: folder))")
        #expect((try? String(contentsOfFile: mark, encoding: .utf8)) == "got-term\n")
    }

    @Test("--keep and SIGKILL: the daemons are gone, the folder stays")
    func killedKeeping() async throws {
        let scenario = try await Scenario()
        // The command outlives the test (it is killed below), and pgrep runs at once, not behind
        // the suite's limit on processes running together: a loaded suite kept it waiting until
        // a 30 s command had ended the sandbox.
        let sandbox = try await scenario.start(["sandbox", "--keep", "--", "/bin/sh", "-c", #"echo "$XDG_RUNTIME_DIR"; exec sleep 600"#])
        let runtime = try #require(await sandbox.waitForLines(1).first)
        let folder = URL(fileURLWithPath: runtime).deletingLastPathComponent().path
        let found = await (try await Spawned("/usr/bin/pgrep", ["-f", folder + "/bus.conf"], input: nil, environment: [:])).wait(timeout: 30)
        let bus = try #require(pid_t(found.output), "\(found)")
        sandbox.signal(SIGKILL)
        _ = await sandbox.wait(timeout: 10)
        #expect(await eventually(within: .seconds(2)) { !processExists(bus) })
        #expect(FileManager.default.fileExists(atPath: folder + "/config"))
        try? FileManager.default.removeItem(atPath: folder)
    }

    @Test("a command that is not found is 127, one that cannot be executed 126, as a shell gives")
    func commandFaults() async throws {
        let scenario = try await Scenario()
        let missing = try await scenario.authctl("sandbox", "--", "/nonexistent/cmd")
        #expect(missing.status == 127, "\(missing)")
        #expect(missing.stderr == "authctl: /nonexistent/cmd: command not found\n", "\(missing)")
        let data = try await scenario.authctl("sandbox", "--", "/etc/passwd")
        #expect(data.status == 126, "\(data)")
        #expect(data.stderr.hasPrefix("authctl: /etc/passwd: cannot be executed"), "\(data)")
        #expect(data.stderr.filter { $0 == "\n" }.count == 1, "\(data)")
        let folder = try await scenario.authctl("sandbox", "--", "/")
        #expect(folder.status == 126, "\(folder)")
    }

    @Test("a daemon that fails at start-up: 69, and no authctl-sandbox.* is left in TMPDIR")
    func failedStartup() async throws {
        var scenario = try await Scenario()
        let temporary = try freshDirectory("authctl-tmp")
        let fakes = try freshDirectory("authctl-fakes")
        defer { try? FileManager.default.removeItem(atPath: temporary); try? FileManager.default.removeItem(atPath: fakes) }
        try "#!/bin/sh\nexit 3\n".write(toFile: fakes + "/dbus-daemon", atomically: true, encoding: .utf8)
        chmod(fakes + "/dbus-daemon", 0o755)
        scenario.extraEnvironment["TMPDIR"] = temporary
        scenario.extraEnvironment["PATH"] = fakes + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let run = try await scenario.authctl("sandbox", "--", "true")
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("dbus-daemon exited at start-up"), "\(run)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty)
    }

    @Test("a full TMPDIR: 69, and no authctl-sandbox.* is left behind")
    func fullTemporaryDirectory() async throws {
        var scenario = try await Scenario()
        let temporary = try freshDirectory("authctl-full")
        defer { try? FileManager.default.removeItem(atPath: temporary) }
        // A tiny file system of its own, filled up (the tests run as root, as CI does).
        let mount = try await runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", temporary], input: nil,
                                         environment: [:], timeout: 10)
        try #require(mount.status == 0, "mounting a tmpfs needs root: \(mount)")
        defer { _ = umount2(temporary, 2) }  // MNT_DETACH
        let filler = try await runProcess("/bin/sh", ["-c", "cat /dev/zero > \"$0\"/filler 2>/dev/null; true", temporary], input: nil,
                                          environment: [:], timeout: 10)
        #expect(filler.status == 0)
        scenario.extraEnvironment["TMPDIR"] = temporary
        let run = try await scenario.authctl("sandbox", "--", "true")
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.hasPrefix("authctl: "), "\(run)")
        #expect(run.stderr.filter { $0 == "\n" }.count == 1, "\(run)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary) == ["filler"])
    }

    /// An empty directory whose path is `length` bytes long, inside a fresh one (returned too,
    /// for removal).
    func directory(ofLength length: Int) throws -> (path: String, base: String) {
        let base = try freshDirectory("authctl-long")
        let path = base + "/" + String(repeating: "d", count: length - base.utf8.count - 1)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        #expect(path.utf8.count == length)
        return (path, base)
    }

    /// The daemons' sockets must fit in a socket path (libdbus takes 99 bytes): under a long
    /// TMPDIR they go to a private folder under /tmp.
    @Test("a long TMPDIR: the sandbox works, its sockets fit, and nothing is left behind", arguments: [65, 100, 200])
    func longTemporaryDirectory(_ length: Int) async throws {
        var scenario = try await Scenario()
        let temporary = try directory(ofLength: length)
        defer { try? FileManager.default.removeItem(atPath: temporary.base) }
        scenario.extraEnvironment["TMPDIR"] = temporary.path
        let script = #"echo "$XDG_RUNTIME_DIR"; printf 'pw-long-tmp' | "$AUTHCTL" sign-in long-tmp --password-stdin && "$AUTHCTL" status"#
        let run = try await scenario.shellEnvironment.authctl(["sandbox", "--", "/bin/sh", "-c", script])
        #expect(run.status == 0, "\(run)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(run)")
        let runtime = try #require(lines.first)
        #expect((runtime + "/keyring/control").utf8.count <= 99, "\(runtime)")
        #expect(lines.last?.hasPrefix("Signed in to \(scenario.service) as long-tmp") == true, "\(run)")
        #expect(!FileManager.default.fileExists(atPath: runtime), "\(runtime) is left")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path).isEmpty)
    }

    @Test("a long TMPDIR and SIGKILL: within 2 s the sandbox's folder and its socket folder are removed")
    func longTemporaryDirectoryKilled() async throws {
        var scenario = try await Scenario()
        let temporary = try directory(ofLength: 200)
        defer { try? FileManager.default.removeItem(atPath: temporary.base) }
        scenario.extraEnvironment["TMPDIR"] = temporary.path
        let sandbox = try await scenario.start(["sandbox", "--", "/bin/sh", "-c", #"echo "$XDG_RUNTIME_DIR"; exec sleep 30"#])
        let runtime = try #require(await sandbox.waitForLines(1).first, "\(sandbox.stderr)")
        #expect(FileManager.default.fileExists(atPath: runtime + "/bus"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path).count == 1)
        let killedAt = Date()
        sandbox.signal(SIGKILL)
        #expect(await sandbox.wait(timeout: 10).status == 128 + SIGKILL)
        let clean = await eventually(within: .seconds(2 - Date().timeIntervalSince(killedAt))) {
            !FileManager.default.fileExists(atPath: runtime)
                && (try? FileManager.default.contentsOfDirectory(atPath: temporary.path).isEmpty) == true
        }
        let left = (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? []
        #expect(clean, "socket folder \(FileManager.default.fileExists(atPath: runtime)), TMPDIR holds \(left)")
    }
}

@Suite("authctl watch --exec: no hook left running")
struct HookCleanupTests {
    @Test("SIGTERM or --timeout while a hook runs: the hook and what it started are gone", arguments: ["signal", "timeout"])
    func hookStopped(_ how: String) async throws {
        var scenario = try await Scenario()
        let pids = scenario.sandbox.directory + "/hook-pids-" + UUID().uuidString
        scenario.extraEnvironment["PIDS"] = pids
        var arguments = ["watch", "--initial", "--exec", #"sleep 30 & echo "$$ $!" > "$PIDS"; wait"#]
        if how == "timeout" { arguments += ["--timeout", "1"] }
        let watch = try await scenario.start(arguments)
        let recorded = await eventually(within: .seconds(10)) {
            ((try? String(contentsOfFile: pids, encoding: .utf8)) ?? "").hasSuffix("\n")
        }
        try #require(recorded, "\(watch.stderr)")
        let hook = try String(contentsOfFile: pids, encoding: .utf8).split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { pid_t($0) }
        #expect(hook.count == 2)
        #expect(hook.allSatisfy(processExists))
        if how == "signal" { watch.signal(SIGTERM) }
        let run = await watch.wait(timeout: 20)
        #expect(run.status == 0, "\(run)")
        #expect(await eventually(within: .seconds(2)) { !hook.contains(where: processExists) }, "still running: \(hook.filter(processExists))")
    }
}
