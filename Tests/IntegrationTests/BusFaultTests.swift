// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A Unix socket that accepts connections and never answers: a hung or mute session bus.
final class MuteBus: @unchecked Sendable {
    // Sendable: `path` and `descriptor` never change after init; the accepting thread only
    // appends to `held`, which nothing else reads.
    let path: String
    private let descriptor: Int32
    private var held: [Int32] = []

    init(in directory: String) throws {
        path = directory + "/mute-bus-" + UUID().uuidString.prefix(8)
        descriptor = try listeningUnixSocket(at: path, backlog: 16)
        let listening = descriptor
        Thread.detachNewThread { [self] in
            while true {
                let connection = accept(listening, nil, nil)
                if connection < 0 { return }
                held.append(connection)  // kept open, never read: the peer waits forever
            }
        }
    }

    var address: String { "unix:path=\(path)" }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
        unlink(path)
    }
}

/// A session bus that goes away, says nothing or answers late: every command ends within its
/// deadline with one line (the README, "Reacting to logins" and the table of exit codes).
@Suite("Bus faults")
struct BusFaultTests {
    @Test("the session bus going away under watch: exit 69 within 1 s, one line saying so")
    func busGoesAway() async throws {
        let sandbox = try await DesktopSandbox.started()
        let scenario = try await Scenario(sandbox: sandbox)
        let watch = try await scenario.start(["watch", "--initial"])
        #expect(await watch.waitForLines(1).count == 1)
        await sandbox.stop()
        let stopped = Date()
        let run = await watch.wait(timeout: 10)
        let seconds = Date().timeIntervalSince(stopped)
        #expect(run.status == 69, "\(run) after \(seconds) s")
        #expect(seconds < 1, "\(run) after \(seconds) s")
        #expect(run.stderr.hasPrefix("authctl: the session bus went away"), "\(run)")
        #expect(run.stderr.split(separator: "\n").count == 1, "\(run)")
    }

    @Test("a mute session bus: 75 saying the bus did not answer within the deadline; doctor ends within 5 s")
    func muteBus() async throws {
        let sandbox = try await SharedSandbox.get()
        let mute = try MuteBus(in: sandbox.directory)
        var scenario = try await Scenario(sandbox: sandbox)
        scenario.extraEnvironment["DBUS_SESSION_BUS_ADDRESS"] = mute.address
        var run = try await scenario.authctl("--keyring-timeout", "1", "status")
        #expect(run.status == 75, "\(run)")
        #expect(run.stderr == "authctl: the session bus did not answer within 1 s; try again, or raise --keyring-timeout\n", "\(run)")
        #expect(run.seconds < 4, "\(run)")
        for arguments in [["status"], ["accounts"], ["sign-in", "a", "--password-stdin"]] {
            run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 75, "\(arguments): \(run)")
            #expect(run.seconds < 5, "\(arguments): \(run)")
            #expect(run.stderr.contains("did not answer within 4 s"), "\(arguments): \(run)")
        }
        run = try await scenario.authctl("doctor")
        #expect(run.status == 75, "\(run)")
        #expect(run.seconds < 5, "\(run)")
        #expect(run.stdout.contains("fail session-bus"), "\(run)")
        run = try await scenario.authctl("watch", "--timeout", "10")
        #expect(run.status == 75, "\(run)")
        #expect(run.seconds < 8, "\(run)")
        #expect(run.stderr.contains("did not answer"), "\(run)")
    }

    @Test("a write whose deadline passed changes nothing, though the keyring finishes it late", arguments: ["0.002", "0.01", "0.05"])
    func lateWrites(_ timeout: String) async throws {
        let scenario = try await Scenario()
        var succeeded: [String] = []
        for index in 0..<4 {
            let run = try await scenario.authctl(["--keyring-timeout", timeout, "sign-in", "u\(index)", "--password-stdin"], input: Array("pw".utf8))
            #expect(run.status == 0 || run.status == 75, "\(run)")
            if run.status == 0 { succeeded.append("u\(index)") }
        }
        let listed = try await scenario.authctl("accounts").stdout.split(separator: "\n").map { String($0.dropFirst(2)) }
        #expect(listed.sorted() == succeeded.sorted(), "a failed sign-in left a hash behind")
        try await scenario.authctl("sign-in", "kept", "--password-stdin", stdin: "pw").expect(0)
        let run = try await scenario.authctl(["--keyring-timeout", timeout, "forget", "kept"])
        let signedIn = try await scenario.authctl("status").status == 0
        let stored = try await scenario.secretTool("lookup", "service", scenario.service, "account", "kept").status == 0
        // Either the deletion happened in full, or it timed out and nothing changed.
        if run.status == 0 {
            #expect(!signedIn, "\(run)")
            #expect(!stored, "\(run)")
        } else {
            #expect(run.status == 75, "\(run)")
            #expect(signedIn, "\(run)")
            #expect(stored, "\(run)")
        }
    }

    @Test("a keyring deadline too short for a live bus is 75, not \"no session bus\"")
    func tinyKeyringTimeout() async throws {
        let scenario = try await Scenario()
        let run = try await scenario.authctl("--keyring-timeout", "0.000001", "status")
        #expect(run.status == 75, "\(run)")
        #expect(run.stderr.contains("did not answer within"), "\(run)")
    }
}

@Suite("Stale state and exact ids against the real keyring")
struct KeyringStateTests {
    @Test("an item removed behind authctl's back: status says 1; the next sign-out emits one `removed` event")
    func removedBehindItsBack() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let cleared = try await scenario.secretTool("clear", "service", scenario.service, "account", "alice")
        #expect(cleared.status == 0, "\(cleared)")
        try await scenario.authctl("status").expect(1)
        let listener = try scenario.listener()
        let run = try await scenario.authctl("sign-out")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.isEmpty, "\(run)")
        #expect(run.stderr == "authctl: alice was already signed out of \(scenario.service): its keyring item is gone\n", "\(run)")
        let events = try await collect(1, from: listener)
        #expect(events.map(\.reason) == [.removed])
        #expect(events.first?.account?.rawValue == "alice")
        #expect(events.first?.sequence == 2)
        let settings = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        #expect(!settings.contains("user="), "\(settings)")
    }

    @Test("NFC é and NFD e+U+0301 are two accounts: forgetting one leaves the other signed in")
    func exactIDs() async throws {
        let scenario = try await Scenario()
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        try await scenario.authctl("sign-in", decomposed, "--password-stdin", stdin: "pw1").expect(0)
        try await scenario.authctl("sign-in", composed, "--password-stdin", stdin: "pw2").expect(0)
        try await scenario.authctl("forget", decomposed).expect(0)
        let who = try await scenario.authctl("whoami")
        #expect(who.status == 0, "\(who)")
        #expect(Array(who.output.utf8) == Array(composed.utf8), "\(who)")
        let accounts = try await scenario.authctl("accounts")
        #expect(Array(accounts.stdout.utf8) == Array("* \(composed)\n".utf8), "\(accounts)")
    }

    @Test("duplicate items another tool left are listed once")
    func duplicateItems() async throws {
        let scenario = try await Scenario()
        for label in ["one", "two"] {
            // Different labels and schema attributes make secret-tool create two items for one pair.
            let stored = try await scenario.secretTool("store", "--label", label, "service", scenario.service, "account", "dup", "copy", label,
                                                 stdin: "x")
            #expect(stored.status == 0, "\(stored)")
        }
        let run = try await scenario.authctl("accounts")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "  dup\n", "\(run)")
    }

    @Test("a sequence at its limit: reads are 78; sign-in replaces the file; one below, a switch that cannot be numbered is 78 and stores nothing")
    func sequenceAtItsLimit() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let original = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        func write(_ sequence: String) throws -> String {
            let text = original.replacingOccurrences(of: "sequence=1", with: "sequence=\(sequence)")
            try text.write(toFile: scenario.settingsFile, atomically: true, encoding: .utf8)
            chmod(scenario.settingsFile, 0o600)
            return text
        }
        var text = try write("18446744073709551614")
        var run = try await scenario.authctl("sign-in", "bob", "--password-stdin", stdin: "pw")
        #expect(run.status == 78, "\(run)")
        #expect(run.stderr.contains("at its limit"), "\(run)")
        #expect(run.stderr.split(separator: "\n").count == 1, "\(run)")
        #expect(try await scenario.secretTool("lookup", "service", scenario.service, "account", "bob").stdout.isEmpty)
        #expect(try String(contentsOfFile: scenario.settingsFile, encoding: .utf8) == text)

        text = try write("18446744073709551615")
        run = try await scenario.authctl("status")
        #expect(run.status == 78, "\(run)")
        #expect(run.stderr.contains(scenario.settingsFile), "\(run)")
        #expect(run.stderr.contains("cannot be incremented"), "\(run)")
        #expect(try String(contentsOfFile: scenario.settingsFile, encoding: .utf8) == text)
        run = try await scenario.authctl("sign-in", "bob", "--password-stdin", stdin: "pw")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("settings.ini.corrupt"), "\(run)")
        #expect(try String(contentsOfFile: scenario.settingsFile + ".corrupt", encoding: .utf8) == text)
    }
}
