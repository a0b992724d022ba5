// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import TestSupport
import Testing

/// `authctl watch` as a script runs it.
@Suite("authctl watch")
struct WatchTests {
    @Test("--json --initial --count: the current state first, then each event, one JSON object per line")
    func jsonLines() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "first", "--name", "First", "--password-stdin", stdin: "pw").expect(0)
        let watch = try await scenario.start(["watch", "--json", "--initial", "--count", "3"])
        #expect(await watch.waitForLines(1).count == 1)  // subscribed before it printed the state
        try await scenario.authctl("sign-in", "second", "--name", "Second", "--password-stdin", stdin: "pw").expect(0)
        let run = await watch.wait()
        #expect(run.status == 0, "\(run)")
        let lines = run.output.split(separator: "\n").map(String.init)
        try #require(lines.count == 3)
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.map { $0["reason"] as? String } == ["initial", "switch", "switch"])
        #expect(objects.map { $0["user"] as? String } == ["first", "first", "second"])
        #expect(objects.map { $0["signedIn"] as? Bool } == [true, false, true])
        #expect(objects.map { ($0["sequence"] as? NSNumber)?.intValue } == [1, 2, 3])
        #expect(objects.allSatisfy { ($0["service"] as? String) == scenario.service })
        #expect(objects.allSatisfy { ($0["timestamp"] as? String)?.hasSuffix("Z") == true })
        #expect(lines[1].hasPrefix(#"{"service":"\#(scenario.service)","signedIn":false,"user":"first","reason":"switch","name":"First","timestamp":""#))
    }

    @Test("--initial with nobody signed in: user null; text lines by default")
    func initialNobody() async throws {
        let scenario = try await Scenario()
        var run = try await scenario.authctl("watch", "--json", "--initial", "--count", "1")
        #expect(run.status == 0, "\(run)")
        #expect(run.output.contains(#""signedIn":false,"user":null,"reason":"initial""#), "\(run)")
        run = try await scenario.authctl("watch", "--initial", "--count", "1")
        #expect(run.status == 0, "\(run)")
        #expect(run.output.contains("signed-out (nobody) [initial] #0"), "\(run)")
    }

    @Test("--exec runs once per event, in order, one at a time, with the event only in AUTHCTL_* variables")
    func exec() async throws {
        let scenario = try await Scenario()
        let log = scenario.sandbox.directory + "/hook-" + UUID().uuidString
        let marker = scenario.sandbox.directory + "/pwned-" + UUID().uuidString
        let hostile = "evil$(touch \(marker))`touch \(marker)`@x.org"
        // The hook's `sleep 0.2` is the test: a second hook started before the first ended would
        // write its `start` line between the first one's two lines.
        let hook = #"printf 'start %s\n' "$AUTHCTL_SEQUENCE" >> "$LOG"; sleep 0.2; printf '%s|%s|%s|%s|%s\n' "$AUTHCTL_SERVICE" "$AUTHCTL_SIGNED_IN" "$AUTHCTL_USER" "$AUTHCTL_REASON" "$AUTHCTL_SEQUENCE" >> "$LOG""#
        var watching = scenario
        watching.extraEnvironment["LOG"] = log
        let watch = try await watching.start(["watch", "--initial", "--count", "3", "--exec", hook])
        #expect(await watch.waitForLines(1).count == 1)
        try await scenario.authctl([ "sign-in", hostile, "--password-stdin"], input: Array("pw".utf8)).expect(0)
        try await scenario.authctl("sign-out").expect(0)
        let run = await watch.wait()
        #expect(run.status == 0, "\(run)")
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines == [
            "start 0", "\(scenario.service)|0||initial|0",
            "start 1", "\(scenario.service)|1|\(hostile)|sign-in|1",
            "start 2", "\(scenario.service)|0|\(hostile)|sign-out|2",
        ])
        #expect(!FileManager.default.fileExists(atPath: marker))
    }

    @Test("--timeout alone ends with 0; before --count is reached, 1")
    func timeouts() async throws {
        let scenario = try await Scenario()
        var run = try await scenario.authctl("watch", "--timeout", "0.5")
        #expect(run.status == 0, "\(run)")
        #expect(run.seconds >= 0.5, "\(run)")
        #expect(run.seconds < 5, "\(run)")
        run = try await scenario.authctl("watch", "--timeout", "0.5", "--count", "1")
        #expect(run.status == 1, "\(run)")
        #expect(run.seconds >= 0.5, "\(run)")
        #expect(run.seconds < 5, "\(run)")
    }

    @Test("a running --exec command does not hold up --timeout or a signal")
    func execDoesNotBlock() async throws {
        let scenario = try await Scenario()
        var run = try await scenario.authctl("watch", "--initial", "--timeout", "1", "--exec", "sleep 30")
        #expect(run.status == 0, "\(run)")
        #expect(run.seconds < 10, "\(run)")
        let watch = try await scenario.start(["watch", "--initial", "--exec", "echo hook-started; sleep 30"])
        #expect(await watch.waitForLines(2).count == 2)
        watch.signal(SIGTERM)
        run = await watch.wait(timeout: 20)
        #expect(run.status == 0, "\(run)")
        #expect(run.seconds < 15, "\(run)")
    }

    @Test("SIGINT and SIGTERM end watching with 0", arguments: [SIGINT, SIGTERM])
    func signals(_ signalNumber: Int32) async throws {
        let scenario = try await Scenario()
        let watch = try await scenario.start(["watch", "--initial"])
        #expect(await watch.waitForLines(1).count == 1)
        watch.signal(signalNumber)
        let run = await watch.wait(timeout: 10)
        #expect(run.status == 0, "\(run)")
    }

    @Test("other services' events never wake it")
    func otherServices() async throws {
        let scenario = try await Scenario()
        let other = try await Scenario(service: scenario.service + "-other")
        let watch = try await scenario.start(["watch", "--initial", "--json", "--count", "2"])
        #expect(await watch.waitForLines(1).count == 1)
        try await other.authctl("sign-in", "theirs", "--password-stdin", stdin: "pw").expect(0)
        try await scenario.authctl("sign-in", "mine", "--password-stdin", stdin: "pw").expect(0)
        let run = await watch.wait()
        #expect(run.status == 0, "\(run)")
        #expect(run.output.split(separator: "\n").last?.contains(#""user":"mine""#) == true, "\(run)")
        #expect(!run.stdout.contains("theirs"))
    }

    @Test("no bus: 69 within 5 s")
    func noBus() async throws {
        var scenario = try await Scenario()
        scenario.cutOffFromTheBus()
        let run = try await scenario.authctl("watch")
        #expect(run.status == 69, "\(run)")
        #expect(run.seconds < 5, "\(run)")
        #expect(run.stderr.contains("no session bus"), "\(run)")
    }

    @Test("100 sign-in/sign-out cycles: each of 3 concurrent watchers prints exactly 200 events, in order")
    func manyCycles() async throws {
        let scenario = try await Scenario()
        var watchers: [Spawned] = []
        for _ in 0..<3 { watchers.append(try await scenario.start(["watch", "--json", "--initial", "--count", "201", "--timeout", "600"])) }
        for watcher in watchers { #expect(await watcher.waitForLines(1).count == 1) }
        for cycle in 0..<100 {
            try await scenario.authctl("sign-in", "cycler", "--password-stdin", stdin: "pw\(cycle)").expect(0)
            try await scenario.authctl("sign-out").expect(0)
        }
        for watcher in watchers {
            let run = await watcher.wait(timeout: 120)
            #expect(run.status == 0)
            let sequences = run.output.split(separator: "\n").dropFirst().compactMap { line in
                ((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any])?["sequence"] as? NSNumber
            }.map(\.intValue)
            #expect(sequences == Array(1...200))
        }
    }
}

@Suite("authctl sandbox")
struct SandboxTests {
    @Test("runs the command with a private bus, fresh XDG folders and an unlocked keyring; returns its status; leaves nothing behind")
    func lifecycle() async throws {
        let scenario = try await Scenario()
        let script = #"""
            echo "$XDG_RUNTIME_DIR"; echo "$XDG_CONFIG_HOME"; echo "$DBUS_SESSION_BUS_ADDRESS"
            printf pw | "$AUTHCTL" sign-in inside --password-stdin >/dev/null || exit 90
            "$AUTHCTL" status --quiet || exit 91
            exit 7
            """#
        var outer = scenario
        outer.extraEnvironment["AUTHCTL"] = Scenario.binary
        let run = try await outer.authctl(["sandbox", "--", "/bin/sh", "-c", script])
        #expect(run.status == 7, "\(run)")
        let lines = run.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        let folder = URL(fileURLWithPath: lines[0]).deletingLastPathComponent().path
        #expect(folder.contains("authctl-sandbox."))
        #expect(lines[1] == folder + "/config")
        #expect(lines[2] == "unix:path=\(folder)/runtime/bus")
        #expect(!FileManager.default.fileExists(atPath: folder))
        // The caller's keyring and settings are untouched.
        try await scenario.authctl("status").expect(1)
        #expect(try await scenario.authctl("accounts").stdout.isEmpty)
        // No daemon of that sandbox is left running.
        let left = try await runProcess("/usr/bin/pgrep", ["-f", folder], input: nil, environment: [:], timeout: 10)
        #expect(left.status == 1, "\(left)")
        #expect(left.stdout.isEmpty, "\(left)")
    }

    @Test("--keep keeps the folder and says where, once")
    func keep() async throws {
        let scenario = try await Scenario()
        let run = try await scenario.authctl("sandbox", "--keep", "--", "true")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.filter { $0 == "\n" }.count == 1, "\(run)")
        let path = try #require(run.stderr.split(separator: " ").last.map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) })
        #expect(run.stderr.hasPrefix("authctl: kept the sandbox directory /"))
        #expect(FileManager.default.fileExists(atPath: path + "/config"))
        try FileManager.default.removeItem(atPath: path)
    }

    @Test("SIGTERM, SIGINT and SIGHUP are passed on to the command", arguments: [SIGTERM, SIGINT, SIGHUP])
    func signals(_ signalNumber: Int32) async throws {
        let scenario = try await Scenario()
        let script = #"trap 'echo caught; exit 42' TERM INT HUP; echo ready; while :; do sleep 0.05; done"#
        let sandbox = try await scenario.start(["sandbox", "--", "/bin/sh", "-c", script])
        #expect(await sandbox.waitForLines(1) == ["ready"])
        sandbox.signal(signalNumber)
        let run = await sandbox.wait(timeout: 10)
        #expect(run.status == 42, "\(run)")
        #expect(run.stdout == "ready\ncaught\n", "\(run)")
    }

    @Test("a missing daemon: 69 naming the Debian package")
    func missingDaemon() async throws {
        var scenario = try await Scenario()
        scenario.extraEnvironment["PATH"] = scenario.sandbox.directory + "/empty-path"
        let run = try await scenario.authctl("sandbox", "--", "/bin/true")
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("dbus-daemon"), "\(run)")
        #expect(run.stderr.contains("apt-get install dbus-daemon"), "\(run)")
    }

    @Test("no command: 64; a command that is not found: 127; `--` is optional; global options may precede the command")
    func commandForms() async throws {
        let scenario = try await Scenario()
        #expect(try await scenario.authctl("sandbox").status == 64)
        let missing = try await scenario.authctl("sandbox", "--", "no-such-command-here")
        #expect(missing.status == 127, "\(missing)")
        #expect(missing.stderr == "authctl: no-such-command-here: command not found\n", "\(missing)")
        let bare = try await scenario.authctl("sandbox", "sh", "-c", "echo $XDG_RUNTIME_DIR; exit 5")
        #expect(bare.status == 5, "\(bare)")
        #expect(bare.stdout.contains("authctl-sandbox."), "\(bare)")
        let global = try await scenario.authctl("sandbox", "--no-prompt", "--service", "x", "--", "true")
        #expect(global.status == 0, "\(global)")
    }
}

@Suite("authctl doctor")
struct DoctorTests {
    func checks(_ run: Run) throws -> [[String: Any]] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        return object["checks"] as? [[String: Any]] ?? []
    }

    @Test("a healthy sandbox: every check ok, exit 0")
    func healthy() async throws {
        let scenario = try await Scenario()
        let run = try await scenario.authctl("doctor")
        #expect(run.status == 0, "\(run)")
        let lines = run.output.split(separator: "\n")
        #expect(lines.count == 7)
        #expect(lines.allSatisfy { $0.hasPrefix("ok ") })
        let json = try await scenario.authctl("doctor", "--json")
        #expect(json.status == 0)
        #expect(json.stdout.hasPrefix(#"{"ok":true,"checks":[{"name":"session-bus","ok":true,"#))
        #expect(try checks(json).map { $0["name"] as? String } == ["session-bus", "secret-service", "default-collection",
                                                                    "collection-unlocked", "store-probe", "settings", "argon2"])
    }

    @Test("a locked keyring: 69, the lock check fails with its fix, no probe; nothing prompts")
    func locked() async throws {
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        var scenario = try await Scenario(sandbox: sandbox)
        try await scenario.lockKeyring()
        scenario.extraEnvironment["DISPLAY"] = ":99"
        let run = try await scenario.authctl("doctor", "--json")
        #expect(run.status == 69, "\(run)")
        #expect(run.seconds < 5, "\(run)")
        let byName = Dictionary(uniqueKeysWithValues: try checks(run).map { ($0["name"] as! String, $0) })
        #expect(byName["collection-unlocked"]?["ok"] as? Bool == false)
        #expect((byName["collection-unlocked"]?["fix"] as? String)?.contains("unlock") == true)
        #expect(byName["store-probe"]?["ok"] as? Bool == false)
        #expect(byName["settings"]?["ok"] as? Bool == true)
        #expect(byName["argon2"]?["ok"] as? Bool == true)
    }

    @Test("a bus without a Secret Service: 69, with the package to install")
    func noSecretService() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        let run = try await scenario.authctl("doctor")
        #expect(run.status == 69, "\(run)")
        #expect(run.seconds < 5, "\(run)")
        #expect(run.stdout.contains("fail secret-service"), "\(run)")
        #expect(run.stdout.contains("apt-get install gnome-keyring"), "\(run)")
        #expect(run.stdout.contains("ok   session-bus"))
    }

    @Test("an unsafe settings file: 78 with the chmod that fixes it")
    func unsafeSettings() async throws {
        let scenario = try await Scenario()
        try FileManager.default.createDirectory(atPath: scenario.settingsDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        try "[x]\n".write(toFile: scenario.settingsFile, atomically: true, encoding: .utf8)
        chmod(scenario.settingsFile, 0o666)
        let run = try await scenario.authctl("doctor")
        #expect(run.status == 78, "\(run)")
        #expect(run.stdout.contains("fail settings"), "\(run)")
        #expect(run.stdout.contains("chmod 600 \(scenario.settingsFile)"), "\(run)")
    }

    @Test("no session bus: 69 at once")
    func noBus() async throws {
        var scenario = try await Scenario()
        scenario.cutOffFromTheBus()
        let run = try await scenario.authctl("doctor")
        #expect(run.status == 69, "\(run)")
        #expect(run.seconds < 5, "\(run)")
        #expect(run.stdout.hasPrefix("fail session-bus"), "\(run)")
        // The advice is said once, as the fix.
        let first = run.stdout.split(separator: "\n").first.map(String.init) ?? ""
        #expect(first.components(separatedBy: "dbus-run-session").count == 2, "\(first)")
    }
}

/// When the reader of `watch`'s output goes away, `watch` ends at once, status 0,
/// without a message — also when no further event would come to write.
@Suite("authctl watch whose reader goes away")
struct WatchReaderTests {
    @Test("watch --json --initial | head -n 1: ends promptly with 0 and nothing on stderr")
    func headAfterInitial() async throws {
        let scenario = try await Scenario()
        let run = try await scenario.shell(#"{ "$AUTHCTL" watch --json --initial; echo "watch=$?" >&2; } | head -n 1"#, timeout: 20)
        #expect(run.status == 0, "\(run)")
        #expect(run.seconds < 5, "\(run)")
        #expect(run.stderr == "watch=0\n", "\(run)")
        #expect(run.output.contains(#""reason":"initial""#), "\(run)")
    }

    @Test("watch --json --initial | head -n 2 with the event of a sign-in: ends promptly with 0 and nothing on stderr")
    func headAfterSignIn() async throws {
        let scenario = try await Scenario()
        let ready = scenario.sandbox.directory + "/ready-" + UUID().uuidString
        // The hook of the initial event says the watch is subscribed.
        let watch = try await scenario.startShell(#"""
            { "$AUTHCTL" watch --json --initial --exec ': > "\#(ready)"'; echo "watch=$?" >&2; } | head -n 2
            """#)
        #expect(await eventually(within: .seconds(30)) { FileManager.default.fileExists(atPath: ready) })
        try await scenario.authctl("sign-in", "reader-test", "--password-stdin", stdin: "pw").expect(0)
        let started = Date()
        let run = await watch.wait(timeout: 20)
        #expect(run.status == 0, "\(run)")
        #expect(Date().timeIntervalSince(started) < 5, "\(run)")
        #expect(run.stderr == "watch=0\n", "\(run)")
        let lines = run.output.split(separator: "\n")
        try #require(lines.count == 2, "\(run)")
        #expect(lines[1].contains(#""user":"reader-test","reason":"sign-in""#), "\(run)")
    }
}
