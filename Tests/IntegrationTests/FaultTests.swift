// SPDX-License-Identifier: Apache-2.0
import AuthController
import AuthControllerTesting
import DesktopSandbox
import Foundation
import Testing

/// Faults a script can meet: a locked keyring, no Secret Service, no bus, a hung service,
/// and corrupt or unsafe settings. Each has a test that could fail.
@Suite("Faults")
struct FaultTests {

    @Test("a locked keyring: status and whoami still work; changes fail fast with 69 \"locked\"; a dismissed prompt is 77")
    func lockedKeyring() async throws {
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        var scenario = try await Scenario(sandbox: sandbox)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let before = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        try await scenario.lockKeyring()

        var run = try await scenario.authctl("status", "--json")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains(#""signedIn":true"#), "\(run)")
        #expect(run.stdout.contains(#""keyringLocked":true"#), "\(run)")
        run = try await scenario.authctl("status")
        #expect(run.output.hasSuffix("(keyring locked)"))
        try await scenario.authctl("whoami").expect(0)
        run = try await scenario.authctl("accounts")
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("locked"), "\(run)")

        for arguments in [["sign-in", "bob", "--password-stdin"], ["verify", "--password-stdin"], ["sign-out"], ["forget", "alice"]] {
            run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 69, "\(arguments): \(run)")
            #expect(run.stderr.contains("locked"), "\(arguments): \(run)")
            #expect(run.seconds < 5, "\(arguments): \(run)")
        }
        scenario.extraEnvironment["DISPLAY"] = ":99"
        run = try await scenario.authctl(["--no-prompt", "sign-in", "bob", "--password-stdin"], input: Array("pw".utf8))
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("locked"), "\(run)")
        // With a display the prompt is shown; gnome-keyring cannot reach a prompter here, which
        // is what a user who dismisses it looks like.
        run = try await scenario.authctl(["sign-in", "bob", "--password-stdin"], input: Array("pw".utf8))
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.contains("dismissed"), "\(run)")

        #expect(try String(contentsOfFile: scenario.settingsFile, encoding: .utf8) == before)
        scenario.extraEnvironment.removeValue(forKey: "DISPLAY")
        try await scenario.authctl("status").expect(0)
    }

    @Test("no Secret Service on the bus: 69 within 5 s, naming it and the package")
    func noSecretService() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        for arguments in [["status"], ["whoami"], ["accounts"], ["sign-in", "a", "--password-stdin"], ["forget", "a"]] {
            let run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 69, "\(arguments): \(run)")
            #expect(run.seconds < 5, "\(arguments): \(run)")
            #expect(run.stderr.contains("no Secret Service"), "\(run)")
            #expect(run.stderr.contains("gnome-keyring"), "\(run)")
        }
        #expect(!FileManager.default.fileExists(atPath: scenario.settingsFile))
    }

    @Test("no default collection: 69 within 5 s, saying so")
    func noDefaultCollection() async throws {
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        let deleted = try await scenario.gdbus("call", "--session", "--dest", "org.freedesktop.secrets", "--object-path",
                                         "/org/freedesktop/secrets/collection/login", "--method", "org.freedesktop.Secret.Collection.Delete")
        #expect(deleted.status == 0, "\(deleted)")
        for arguments in [["status"], ["accounts"], ["sign-in", "a", "--password-stdin"], ["forget", "a"]] {
            let run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 69, "\(arguments): \(run)")
            #expect(run.seconds < 5, "\(arguments): \(run)")
            #expect(run.stderr.contains("no default collection"), "\(arguments): \(run)")
            // gnome-keyring's fix, as the program serving the Secret Service is gnome-keyring.
            #expect(run.stderr.contains("Seahorse"), "\(arguments): \(run)")
        }
    }

    @Test("no session bus: 69 within 5 s, saying so")
    func noSessionBus() async throws {
        var scenario = try await Scenario()
        scenario.cutOffFromTheBus()
        for arguments in [["status"], ["sign-in", "a", "--password-stdin"]] {
            let run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 69, "\(run)")
            #expect(run.seconds < 5, "\(run)")
            #expect(run.stderr.contains("no session bus"), "\(run)")
        }
    }

    @Test("a Secret Service that does not answer: 75 after --keyring-timeout, nothing changed")
    func hungService() async throws {
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let before = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        let daemon = try #require(sandbox.keyringProcessID)
        kill(daemon, SIGSTOP)
        defer { kill(daemon, SIGCONT) }
        var run = try await scenario.authctl("--keyring-timeout", "1", "status")
        #expect(run.status == 75, "\(run)")
        #expect(run.seconds < 4, "\(run)")
        #expect(run.stderr.contains("did not answer within 1 s"), "\(run)")
        run = try await scenario.authctl(["sign-out", "--keyring-timeout", "0.5"])
        #expect(run.status == 75, "\(run)")
        #expect(run.seconds < 4, "\(run)")
        kill(daemon, SIGCONT)
        #expect(try String(contentsOfFile: scenario.settingsFile, encoding: .utf8) == before)
        try await scenario.authctl("status").expect(0)
    }

    @Test("a corrupt settings file: reads fail with 78 naming it; sign-in replaces it and keeps a copy")
    func corruptSettings() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let garbage = "[\(scenario.service)\nuser=alice\n"
        try garbage.write(toFile: scenario.settingsFile, atomically: true, encoding: .utf8)
        chmod(scenario.settingsFile, 0o600)
        for arguments in [["status"], ["whoami"], ["accounts"], ["forget", "alice"], ["verify", "--password-stdin"]] {
            let run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 78, "\(arguments): \(run)")
            #expect(run.stderr.contains(scenario.settingsFile), "\(arguments): \(run)")
            #expect(run.stderr.contains("corrupt"), "\(arguments): \(run)")
        }
        #expect(try String(contentsOfFile: scenario.settingsFile, encoding: .utf8) == garbage)
        let run = try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("settings.ini.corrupt"), "\(run)")
        #expect(try String(contentsOfFile: scenario.settingsFile + ".corrupt", encoding: .utf8) == garbage)
        let json = try await scenario.authctl("status", "--json")
        #expect(json.status == 0)
        #expect(json.stdout.contains(#""sequence":1"#))
    }

    @Test("sign-out over a corrupt file replaces it without deleting a hash or sending an event")
    func signOutCorrupt() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        try "garbage\u{1}".write(toFile: scenario.settingsFile, atomically: true, encoding: .utf8)
        chmod(scenario.settingsFile, 0o600)
        let listener = try scenario.listener()
        let run = try await scenario.authctl("sign-out")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("corrupt"), "\(run)")
        #expect(try await scenario.authctl("accounts").stdout == "  alice\n")
        // A later change's event is the first the listener sees: sign-out sent none.
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let events = try await collect(1, from: listener)
        #expect(events.map(\.reason) == [.signIn])
        #expect(events.first?.sequence == 1)
    }

    @Test("unsafe settings paths: 78 with the fix, before any keyring problem", arguments: ["symlink", "group-writable", "world-writable"])
    func unsafeSettings(_ kind: String) async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)  // 78 must win over 69
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        try FileManager.default.createDirectory(atPath: scenario.settingsDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let fix: String
        switch kind {
        case "symlink":
            let target = sandbox.directory + "/target.ini"
            try "[x]\n".write(toFile: target, atomically: true, encoding: .utf8)
            try FileManager.default.createSymbolicLink(atPath: scenario.settingsFile, withDestinationPath: target)
            fix = "rm \(scenario.settingsFile)"
        default:
            try "[x]\n".write(toFile: scenario.settingsFile, atomically: true, encoding: .utf8)
            chmod(scenario.settingsFile, kind == "group-writable" ? 0o620 : 0o606)
            fix = "chmod 600 \(scenario.settingsFile)"
        }
        for arguments in [["status"], ["sign-in", "a", "--password-stdin"], ["sign-out"], ["forget", "a"]] {
            let run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 78, "\(arguments): \(run)")
            #expect(run.stderr.contains(fix), "\(arguments): \(run)")
        }
    }

    @Test("settings that cannot be written: 74, and the new hash is removed again")
    func unwritableSettings() async throws {
        let scenario = try await Scenario()
        try FileManager.default.createDirectory(atPath: scenario.configHome, withIntermediateDirectories: true)
        // A file where the settings folder must be: an I/O error even for root.
        try "in the way".write(toFile: scenario.settingsDirectory, atomically: true, encoding: .utf8)
        let run = try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw")
        #expect(run.status == 74, "\(run)")
        #expect(run.stderr.contains(scenario.settingsDirectory), "\(run)")
        let stored = try await scenario.secretTool("lookup", "service", scenario.service, "account", "alice")
        #expect(stored.stdout.isEmpty)
        try await scenario.authctl("status").expect(74)
    }

    @Test("the settings lock is waited for at most 5 s, then 75")
    func lockTimeout() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let descriptor = open(scenario.settingsDirectory + "/settings.lock", O_RDWR)
        #expect(descriptor >= 0)
        #expect(flock(descriptor, LOCK_EX) == 0)
        let run = try await scenario.authctl("sign-out")
        close(descriptor)
        #expect(run.status == 75, "\(run)")
        #expect(run.stderr.contains("settings lock"), "\(run)")
        #expect(run.seconds >= 5, "\(run)")
        #expect(run.seconds < 10, "\(run)")
        try await scenario.authctl("status").expect(0)
    }

    @Test("the library rolls back a new hash in the real keyring when the settings write fails")
    func rollbackInRealKeyring() async throws {
        let scenario = try await Scenario()
        let settings = InMemorySettingsStore()
        settings.failSaves(with: .settingsIO("injected failure"))
        let controller = try await scenario.controller(settings: settings)
        await #expect(throws: AuthError.settingsIO("injected failure")) {
            try await controller.signIn(account: AccountID(rawValue: "rolled-back")!, name: "", password: password("pw"))
        }
        let stored = try await scenario.secretTool("lookup", "service", scenario.service, "account", "rolled-back")
        #expect(stored.status != 0)
        #expect(stored.stdout.isEmpty)
        settings.failSaves(with: nil)
        try await controller.signIn(account: AccountID(rawValue: "rolled-back")!, name: "", password: password("pw"))
        #expect(try await scenario.secretTool("lookup", "service", scenario.service, "account", "rolled-back").stdout.hasPrefix("$argon2id$"))
    }
}
