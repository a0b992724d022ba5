// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
import DesktopSandbox
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Every core command against every Secret Service desktop users run — gnome-keyring, KeePassXC,
/// KWallet — and libsecret's own file keyring, each started for the test on a bus of its own,
/// with what `secret-tool` (libsecret) sees of the same keyring side by side.
@Suite("Every Secret Service")
struct SecretServiceImplementationTests {
    /// The implementations whose items any client may read: KeePassXC with its default settings
    /// asks a person first, and has a test of its own.
    static let openToEveryClient: [Implementation] = [.gnomeKeyring, .keePassXC, .kwallet, .fileKeyring]

    /// The accounts `secret-tool search` finds under `service`: what libsecret sees.
    static func accountsLibsecretSees(_ scenario: Scenario) async throws -> [String] {
        let search = try await scenario.secretTool("search", "--all", "service", scenario.service)
        return (search.stdout + search.stderr).split(separator: "\n").compactMap { line in
            line.hasPrefix("attribute.account = ") ? String(line.dropFirst("attribute.account = ".count)) : nil
        }.sorted()
    }

    @Test("sign-in, status, switch, accounts, verify, forget, sign-out: as on gnome-keyring, and secret-tool sees the same items",
          arguments: openToEveryClient)
    func coreCommands(_ implementation: Implementation) async throws {
        let keyring = try await KeyringUnderTest.start(implementation)
        defer { Task { await keyring.stop() } }
        let scenario = try await keyring.scenario()

        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        var run = try await scenario.authctl("status")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.hasPrefix("Signed in to \(scenario.service) as alice"), "\(run)")
        // The item a sign-in wrote is there for libsecret: kept, not just accepted.
        let lookup = try await scenario.secretTool("lookup", "service", scenario.service, "account", "alice")
        #expect(lookup.stdout.hasPrefix("$argon2id$"), "\(lookup)")
        run = try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "wrong")
        #expect(run.status == 77, "\(run)")
        run = try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw")
        #expect(run.status == 0 && run.stdout.hasPrefix("Already signed in"), "\(run)")

        try await scenario.authctl("sign-in", "bob", "--password-stdin", stdin: "pw").expect(0)
        run = try await scenario.authctl("accounts")
        #expect(run.stdout == "  alice\n* bob\n", "\(run)")
        #expect(try await Self.accountsLibsecretSees(scenario) == ["alice", "bob"])
        #expect(try await scenario.authctl("whoami").stdout == "bob\n")
        try await scenario.authctl("verify", "--password-stdin", stdin: "pw").expect(0)
        run = try await scenario.authctl("verify", "--password-stdin", stdin: "wrong")
        #expect(run.status == 77, "\(run)")

        run = try await scenario.authctl("forget", "alice")
        #expect(run.status == 0 && run.stdout.isEmpty, "\(run)")
        #expect(try await Self.accountsLibsecretSees(scenario) == ["bob"])
        run = try await scenario.authctl("sign-out")
        #expect(run.stdout == "Signed out of \(scenario.service): bob.\n", "\(run)")
        run = try await scenario.authctl("status")
        #expect(run.status == 1, "\(run)")
        #expect(try await scenario.authctl("accounts").stdout.isEmpty)
        #expect(try await Self.accountsLibsecretSees(scenario).isEmpty)
    }

    @Test("a write leaves exactly one item per account, whatever other items with its attributes another tool stored",
          arguments: openToEveryClient)
    func exactlyOneItem(_ implementation: Implementation) async throws {
        let keyring = try await KeyringUnderTest.start(implementation)
        defer { Task { await keyring.stop() } }
        let scenario = try await keyring.scenario()
        // Two hashes of "pw" weaker than the defaults, stored by another tool: one with exactly the
        // attributes authctl searches by, one with an attribute more (a new item everywhere, where
        // `replace` would overwrite the first). The sign-in verifies against either and stores the
        // stronger hash.
        for (index, extra) in [[], ["origin", "other-tool"]].enumerated() {
            let weak = try await runProcess(try which("argon2", package: "argon2"), ["saltsaltsalt\(index)0123", "-id", "-m", "15", "-t", "2", "-p", "1", "-e"],
                                            input: Array("pw".utf8), environment: [:], timeout: 30)
            #expect(weak.output.hasPrefix("$argon2id$v=19$m=32768"), "\(weak)")
            try await scenario.secretTool(["store", "--label", "another tool's", "service", scenario.service, "account", "alice"] + extra,
                                          stdin: weak.output).expect(0)
        }
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        #expect(try await Self.accountsLibsecretSees(scenario) == ["alice"])
        let lookup = try await scenario.secretTool("lookup", "service", scenario.service, "account", "alice")
        #expect(lookup.stdout.hasPrefix("$argon2id$v=19$m=65536,t=3,p=4$"), "\(lookup)")
    }

    @Test("locked is not gone: while the keyring is locked, status answers from the settings, changes are 69 \"locked\", serve signs nobody out; unlocked, all is as before",
          arguments: Implementation.lockable)
    func lockedIsNotGone(_ implementation: Implementation) async throws {
        let keyring = try await KeyringUnderTest.start(implementation)
        defer { Task { await keyring.stop() } }
        let scenario = try await keyring.scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let signedIn = try await scenario.authctl("status").output
        let (serve, _) = try await scenario.startServe()
        defer { serve.signal(SIGTERM) }
        let events = try await BusMonitor(scenario, rules: ["type='signal',interface='io.github.authctl.AuthController1',member='LoginStatusChanged'"])
        let settings = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)

        // Where a person unlocks it: each program's own place, never another desktop's.
        let fix = switch implementation {
        case .kwallet: "KWallet Manager"
        case .keePassXC, .keePassXCDefaults: "in KeePassXC"
        default: "Seahorse"
        }
        try await keyring.lock()
        var run = try await scenario.authctl("status")
        #expect(run.status == 0, "\(run)")
        #expect(run.output == signedIn + " (keyring locked)", "\(run)")
        #expect(run.seconds < 5, "\(run)")
        run = try await scenario.authctl("status", "--json")
        #expect(run.stdout.contains(#""signedIn":true"#) && run.stdout.contains(#""keyringLocked":true"#), "\(run)")
        for arguments in [["--no-prompt", "sign-out"], ["--no-prompt", "forget", "alice"], ["accounts"], ["--no-prompt", "verify", "--password-stdin"]] {
            run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 69, "\(arguments): \(run)")
            #expect(run.stderr.contains("locked"), "\(arguments): \(run)")
            #expect(run.stderr.contains(fix), "the fix for \(implementation) names \(fix): \(arguments): \(run)")
            #expect(run.seconds < 5, "\(arguments): \(run)")
        }
        // serve read the locked keyring (its GetStatus answers from a re-read) and ended nothing.
        let status = try await scenario.call("GetStatus", scenario.service)
        #expect(status.status == 0 && status.stdout.contains("'user': <'alice'>"), "\(status)")
        #expect(try String(contentsOfFile: scenario.settingsFile, encoding: .utf8) == settings)

        if implementation != .gnomeKeyring {
            try await keyring.unlock()
            #expect(try await scenario.authctl("status").output == signedIn)
        }
        #expect(await events.wait(for: 1, timeout: 1, where: BusMonitor.loginStatusChanged(scenario.service)).isEmpty,
                "a LoginStatusChanged went out")
        #expect(try String(contentsOfFile: scenario.settingsFile, encoding: .utf8) == settings)
    }

    @Test("KeePassXC as it comes: status, whoami and accounts never wait for a dialog; reading another process's item asks a person, which --no-prompt says, changing nothing")
    func keePassXCConfirmations() async throws {
        let keyring = try await KeyringUnderTest.start(.keePassXCDefaults)
        defer { Task { await keyring.stop() } }
        let scenario = try await keyring.scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let settings = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        var run = try await scenario.authctl("status")
        #expect(run.status == 0 && run.seconds < 5, "\(run)")
        run = try await scenario.authctl("accounts")
        #expect(run.stdout == "* alice\n", "\(run)")
        for arguments in [["verify", "--password-stdin"], ["sign-in", "alice", "--password-stdin"], ["sign-out"]] {
            run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 69, "\(arguments): \(run)")
            #expect(run.stderr.contains("asks a person to confirm access to the item of alice"), "\(arguments): \(run)")
            #expect(!run.stderr.contains("locked"), "\(arguments): \(run)")
            #expect(run.seconds < 5, "\(arguments): \(run)")
        }
        #expect(try String(contentsOfFile: scenario.settingsFile, encoding: .utf8) == settings)
        // A locked database holds a search behind its unlock dialog: status does not search it.
        try await keyring.lock()
        run = try await scenario.authctl("status")
        #expect(run.status == 0 && run.output.hasSuffix("(keyring locked)") && run.seconds < 5, "\(run)")
        run = try await scenario.authctl("whoami")
        #expect(run.status == 0 && run.seconds < 5, "\(run)")
        try await keyring.unlock()
        #expect(try await scenario.authctl("status").status == 0)
    }

    @Test("KeePassXC asking a person to confirm a deletion: doctor, which never prompts, gives up at its deadline with 69, the fix that fits, and the probe item it left")
    func keePassXCConfirmsDeletion() async throws {
        let keyring = try await KeyringUnderTest.start(.keePassXCDefaults, settings: ["KEEPASSXC_RECYCLE_BIN": "False"])
        defer { Task { await keyring.stop() } }
        let run = try await keyring.scenario().authctl("doctor")
        #expect(run.status == 69, "\(run)")
        #expect(run.seconds < 8, "\(run)")
        let probe = run.stdout.split(separator: "\n").first { $0.hasPrefix("fail store-probe") }.map(String.init) ?? ""
        #expect(probe.contains("was stored but could not be deleted"), "\(run)")
        #expect(probe.contains("asks a person to confirm"), "\(run)")
        #expect(probe.contains("turn off the confirmations"), "\(run)")
    }

    @Test("a prompt left open (KeePassXC's confirmation of access, nobody to answer it) ends at the deadline: 75, nothing changed")
    func promptLeftOpen() async throws {
        let keyring = try await KeyringUnderTest.start(.keePassXCDefaults)
        defer { Task { await keyring.stop() } }
        var scenario = try await keyring.scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let settings = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        // A display: authctl may let the keyring ask; KeePassXC's dialog then waits, unseen.
        scenario.extraEnvironment["DISPLAY"] = ":99"
        let run = try await scenario.authctl(["--keyring-timeout", "2", "sign-out"])
        #expect(run.status == 75, "\(run)")
        #expect(run.stderr.contains("did not answer within 2 s"), "\(run)")
        #expect(run.seconds < 6, "\(run)")
        #expect(try String(contentsOfFile: scenario.settingsFile, encoding: .utf8) == settings)
        #expect(try await Self.accountsLibsecretSees(scenario) == ["alice"])
    }

    @Test("a keyring that dies while its prompt is up: the command still ends at its deadline, 75")
    func keyringDiesMidPrompt() async throws {
        let keyring = try await KeyringUnderTest.start(.keePassXCDefaults)
        defer { Task { await keyring.stop() } }
        var scenario = try await keyring.scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let prompts = try await BusMonitor(scenario, rules: ["type='method_call',interface='org.freedesktop.Secret.Prompt',member='Prompt'"])
        scenario.extraEnvironment["DISPLAY"] = ":99"
        let signOut = try await scenario.start(["--keyring-timeout", "3", "sign-out"])
        // The confirmation of access is showing (libsecret called Prompt): the keyring goes.
        let shown = await prompts.wait(for: 1, timeout: 30) { $0.member == "Prompt" }
        #expect(shown.count == 1, "no prompt: \(signOut.stderr)")
        kill(try #require(keyring.processID), SIGKILL)
        let run = await signOut.wait(timeout: 30)
        #expect(run.status == 75, "\(run)")
        #expect(run.seconds < 12, "\(run)")
    }

    @Test("a Secret Service that restarted under serve: serve's next change goes through the new one")
    func serviceRestartsUnderServe() async throws {
        let keyring = try await KeyringUnderTest.start(.keePassXC)
        defer { Task { await keyring.stop() } }
        let scenario = try await keyring.scenario()
        let (serve, _) = try await scenario.startServe()
        defer { serve.signal(SIGTERM) }
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        // serve reads the keyring through libsecret for its sign-out: it met the first service.
        try await scenario.authctl("sign-in", "bob", "--password-stdin", stdin: "pw").expect(0)
        let first = try await scenario.call("SignOut", scenario.service)
        #expect(first.status == 0, "\(first)")
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        try await keyring.restart()
        let second = try await scenario.call("SignOut", scenario.service)
        #expect(second.status == 0, "\(second)")
        // Both sign-outs deleted their account's item: the second through the new service.
        #expect(try await Self.accountsLibsecretSees(scenario).isEmpty)
    }

    @Test("libsecret's file keyring and processes writing at once: no update lost, none refused")
    func fileKeyringConcurrentWriters() async throws {
        let keyring = try await KeyringUnderTest.start(.fileKeyring)
        defer { Task { await keyring.stop() } }
        let scenario = try await keyring.scenario()
        try await scenario.authctl("sign-in", "first", "--password-stdin", stdin: "pw").expect(0)
        let writers = try await withThrowingTaskGroup(of: Run.self) { group in
            for index in 0..<6 {
                group.addTask { await (try scenario.start(["sign-in", "user\(index)", "--password-stdin"], input: Array("pw".utf8))).wait() }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(writers.allSatisfy { $0.status == 0 }, "\(writers.filter { $0.status != 0 })")
        #expect(try await Self.accountsLibsecretSees(scenario) == ["first"] + (0..<6).map { "user\($0)" })
    }

    @Test("another tool's item with an account's attributes and more, not a hash, hides nothing: the account's own item is read")
    func anotherToolsItemHidesNothing() async throws {
        let keyring = try await KeyringUnderTest.start(.gnomeKeyring)
        defer { Task { await keyring.stop() } }
        let scenario = try await keyring.scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        try await scenario.secretTool(["store", "--label", "another tool's", "service", scenario.service, "account", "alice", "origin", "x"],
                                      stdin: "not a hash").expect(0)
        try await scenario.authctl("verify", "--password-stdin", stdin: "pw").expect(0)
    }

    @Test("libsecret's file keyring needs no Secret Service: without a session bus a change warns that listeners were not notified, and stands")
    func fileKeyringWithoutBus() async throws {
        let keyring = try await KeyringUnderTest.start(.fileKeyring)
        defer { Task { await keyring.stop() } }
        var scenario = try await keyring.scenario()
        scenario.cutOffFromTheBus()
        var run = try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("listeners were not notified"), "\(run)")
        run = try await scenario.authctl("status")
        #expect(run.status == 0, "\(run)")
        #expect(try await scenario.secretTool("lookup", "service", scenario.service, "account", "alice").stdout.hasPrefix("$argon2id$"))
        run = try await scenario.authctl("doctor")
        #expect(run.status == 69 && run.stdout.contains("fail session-bus"), "\(run)")
    }

    // KeePassXC goes on offering a deleted group as its default collection, so only the two whose
    // default can be taken away here are tried.
    @Test("no default collection (a KWallet wallet not yet offered): sign-in, accounts and forget are 69 with that program's own fix",
          arguments: [Implementation.gnomeKeyring, .kwallet])
    func noDefaultCollection(_ implementation: Implementation) async throws {
        let keyring = try await KeyringUnderTest.start(implementation)
        defer { Task { await keyring.stop() } }
        let scenario = try await keyring.scenario()
        let alias = try await scenario.gdbus("call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                                             "--method", "org.freedesktop.Secret.Service.ReadAlias", "default")
        let collection = try #require(alias.stdout.split(separator: "'").dropFirst().first.map(String.init), "\(alias)")
        let deleted = try await scenario.gdbus("call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", collection,
                                               "--method", "org.freedesktop.Secret.Collection.Delete")
        #expect(deleted.status == 0, "\(deleted)")
        let fix = implementation == .kwallet ? "KWallet Manager" : "Seahorse"
        for arguments in [["sign-in", "a", "--password-stdin"], ["accounts"], ["forget", "a"]] {
            let run = try await scenario.authctl(arguments, input: Array("pw".utf8))
            #expect(run.status == 69, "\(arguments): \(run)")
            #expect(run.stderr.contains("no default collection"), "\(arguments): \(run)")
            #expect(run.stderr.contains(fix), "the fix for \(implementation) names \(fix): \(arguments): \(run)")
        }
    }

    @Test("doctor names the implementation and passes on each", arguments: openToEveryClient)
    func doctorNamesIt(_ implementation: Implementation) async throws {
        let keyring = try await KeyringUnderTest.start(implementation)
        defer { Task { await keyring.stop() } }
        let run = try await keyring.scenario().authctl("doctor", "--json")
        #expect(run.status == 0, "\(run)")
        let expected = switch implementation {
        case .gnomeKeyring: "gnome-keyring-daemon"
        case .keePassXC, .keePassXCDefaults: "keepassxc"
        case .kwallet: "kwalletd5"
        case .fileKeyring: "libsecret file keyring"
        }
        #expect(run.stdout.contains(#""name":"secret-service","ok":true,"#) && run.stdout.contains(#""implementation":"\#(expected)""#), "\(run)")
    }
}
