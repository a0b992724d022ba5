// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import Testing
import TestSupport

/// The built `authctl` binary against a real gnome-keyring on a private bus: exit codes,
/// stdout, stderr and JSON as a script sees them.
@Suite("authctl commands")
struct CommandLineTests {
    @Test("round trip: enrol, status, wrong password, switch, accounts, whoami, verify, sign-out, forget")
    func roundTrip() async throws {
        let scenario = try await Scenario()
        var run = try await scenario.authctl("status")
        #expect(run.status == 1)
        #expect(run.output == "Not signed in to \(scenario.service)")

        run = try await scenario.authctl("sign-in", "alice@example.org", "--name", "Alice Example", "--password-stdin", stdin: "pw-alice\n")
        #expect(run.status == 0, "\(run)")
        #expect(run.output == "Signed in to \(scenario.service) as alice@example.org.")

        run = try await scenario.authctl("status")
        #expect(run.status == 0)
        #expect(run.output.hasPrefix("Signed in to \(scenario.service) as alice@example.org (Alice Example) since 20"))
        run = try await scenario.authctl("status", "--quiet")
        #expect(run.status == 0)
        #expect(run.stdout.isEmpty)

        // The hash, not the password, is what the keyring holds: as secret-tool sees it.
        let stored = try await scenario.secretTool("lookup", "service", scenario.service, "account", "alice@example.org")
        #expect(stored.stdout.hasPrefix("$argon2id$v=19$m=65536,t=3,p=4$"))
        #expect(!stored.stdout.contains("pw-alice"))

        run = try await scenario.authctl("sign-in", "alice@example.org", "--password-stdin", stdin: "wrong\n")
        #expect(run.status == 77)
        #expect(run.stderr == "authctl: wrong password for alice@example.org\n")

        run = try await scenario.authctl("sign-in", "bob@example.org", "--name", "Bob", "--password-stdin", stdin: "pw-bob")
        #expect(run.status == 0)
        run = try await scenario.authctl("accounts")
        #expect(run.status == 0)
        #expect(run.stdout == "  alice@example.org\n* bob@example.org\n")
        run = try await scenario.authctl("accounts", "--json")
        #expect(run.output == #"[{"user":"alice@example.org","current":false},{"user":"bob@example.org","current":true}]"#)
        run = try await scenario.authctl("whoami")
        #expect(run.status == 0)
        #expect(run.stdout == "bob@example.org\n")
        run = try await scenario.authctl("whoami", "--json")
        #expect(run.output == #"{"service":"\#(scenario.service)","user":"bob@example.org","name":"Bob"}"#)

        run = try await scenario.authctl("verify", "--password-stdin", stdin: "pw-bob")
        #expect(run.status == 0)
        run = try await scenario.authctl("verify", "--password-stdin", stdin: "pw-alice")
        #expect(run.status == 77)

        run = try await scenario.authctl("sign-out")
        #expect(run.status == 0)
        #expect(run.stdout == "Signed out of \(scenario.service): bob@example.org.\n")
        run = try await scenario.authctl("status")
        #expect(run.status == 1)
        run = try await scenario.authctl("sign-out")
        #expect(run.status == 0)
        #expect(run.stderr == "authctl: nobody is signed in to \(scenario.service)\n")
        run = try await scenario.authctl("whoami")
        #expect(run.status == 1)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.hasPrefix("authctl: nobody is signed in"))
        run = try await scenario.authctl("whoami", "--json")
        #expect(run.status == 1)
        #expect(run.output == #"{"service":"\#(scenario.service)","user":null,"name":null}"#)
        run = try await scenario.authctl("verify", "--password-stdin", stdin: "pw-bob")
        #expect(run.status == 1)

        // sign-out deleted bob's hash; alice's stays until forgotten, twice is fine.
        run = try await scenario.authctl("accounts")
        #expect(run.stdout == "  alice@example.org\n")
        #expect(try await scenario.authctl("forget", "alice@example.org").status == 0)
        #expect(try await scenario.authctl("forget", "alice@example.org").status == 0)
        run = try await scenario.authctl("accounts")
        #expect(run.status == 0)
        #expect(run.stdout.isEmpty)
        let gone = try await scenario.secretTool("lookup", "service", scenario.service, "account", "alice@example.org")
        #expect(gone.stdout.isEmpty)
    }

    @Test("status --json has every field, null when signed out, and the sequence")
    func statusJSON() async throws {
        let scenario = try await Scenario()
        var run = try await scenario.authctl("status", "--json")
        #expect(run.status == 1)
        #expect(run.output == #"{"service":"\#(scenario.service)","signedIn":false,"user":null,"name":null,"signedInAt":null,"sequence":0,"keyringLocked":false,"avatarURL":null,"server":null,"accessTokenExpiresAt":null,"refreshTokenExpiresAt":null}"#)
        try await scenario.authctl("sign-in", "MyEmailAddress@example.com ", "--password-stdin", stdin: "pw").expect(65)
        try await scenario.authctl("sign-in", "MyEmailAddress@example.com", "--name", "Me", "--password-stdin", stdin: "pw").expect(0)
        run = try await scenario.authctl("status", "--json")
        #expect(run.status == 0)
        let object = try #require(JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        #expect(object["signedIn"] as? Bool == true)
        #expect(object["user"] as? String == "MyEmailAddress@example.com")
        #expect(object["name"] as? String == "Me")
        #expect((object["signedInAt"] as? String)?.hasSuffix("Z") == true)
        #expect((object["sequence"] as? NSNumber)?.intValue == 1)
        #expect(object["keyringLocked"] as? Bool == false)
        #expect(object["avatarURL"] as? String == "https://www.gravatar.com/avatar/0bc83cb571cd1c50ba6f3e8a78ef1346")
        try await scenario.authctl("sign-out").expect(0)
        run = try await scenario.authctl("status", "--json")
        #expect(run.output.contains(#""sequence":2"#))
    }

    @Test("--service and AUTHCTL_SERVICE choose the service, before or after the command; services are isolated")
    func serviceSelection() async throws {
        var scenario = try await Scenario()
        let other = "other-" + UUID().uuidString.lowercased()
        try await scenario.authctl(["sign-in", "amy", "--password-stdin", "--service", other], input: Array("pw".utf8)).expect(0)
        try await scenario.authctl("--service", other, "status").expect(0)
        try await scenario.authctl("status", "--service", other).expect(0)
        try await scenario.authctl("status").expect(1)  // AUTHCTL_SERVICE is this scenario's own
        #expect(try await scenario.authctl("accounts").stdout.isEmpty)
        scenario.extraEnvironment["AUTHCTL_SERVICE"] = ""
        try await scenario.authctl("status").expect(1)
        #expect(try await scenario.authctl("status").stdout.contains("io.github.authctl"))
        let secret = try await scenario.secretTool("lookup", "service", other, "account", "amy")
        #expect(secret.stdout.hasPrefix("$argon2id$"))
        scenario.extraEnvironment["AUTHCTL_SERVICE"] = "bad service"
        let bad = try await scenario.authctl("status")
        #expect(bad.status == 65)
        #expect(bad.stderr.hasPrefix("authctl: invalid service name"))
    }

    @Test("usage errors exit 64 with one line on stderr; help and version exit 0", arguments: [
        ["frobnicate"], ["status", "--bogus"], ["sign-in"], ["forget"], ["--keyring-timeout", "0", "status"],
        ["--keyring-timeout", "soon", "status"], ["sign-in", "a", "--password", "x"], [],
    ])
    func usageErrors(_ arguments: [String]) async throws {
        let scenario = try await Scenario()
        let run = try await scenario.authctl(arguments)
        if arguments.isEmpty {
            // Like git and systemctl, no command prints the help.
            #expect(run.status == 0)
            #expect(run.stdout.contains("USAGE"))
            return
        }
        #expect(run.status == 64, "\(run)")
        #expect(run.stderr.hasPrefix("authctl: "), "\(run)")
        #expect(run.stderr.filter { $0 == "\n" }.count == 1, "\(run)")
    }

    @Test("--help and --version")
    func helpAndVersion() async throws {
        let scenario = try await Scenario()
        let help = try await scenario.authctl("--help")
        #expect(help.status == 0)
        #expect(help.stdout.contains("sign-in"))
        #expect(help.stdout.contains("accounts"))
        let commandHelp = try await scenario.authctl("sign-in", "--help")
        #expect(commandHelp.status == 0)
        #expect(commandHelp.stdout.contains("--password-stdin"))
        let version = try await scenario.authctl("--version")
        #expect(version.status == 0)
        #expect(!version.stdout.isEmpty)
    }

    @Test("without a terminal or --password-stdin: 64 naming --password-stdin, before any other check")
    func noPasswordSource() async throws {
        let scenario = try await Scenario()
        for arguments in [["sign-in", "alice"], ["sign-in", " bad id"], ["verify"]] {
            let run = try await scenario.authctl(arguments)
            #expect(run.status == 64, "\(run)")
            #expect(run.stderr.contains("--password-stdin"), "\(run)")
        }
    }

    @Test("bad input data: 65 naming the rule, and nothing changes", arguments: [
        (Sample(["sign-in", "", "--password-stdin"]), Sample("pw"), "empty"),
        (Sample(["sign-in", " lead", "--password-stdin"]), Sample("pw"), "white space"),
        (Sample(["sign-in", "tab\there", "--password-stdin"]), Sample("pw"), "control"),
        (Sample(["sign-in", String(repeating: "a", count: 255), "--password-stdin"]), Sample("pw"), "254"),
        (Sample(["sign-in", "a", "--name", "bell\u{7}", "--password-stdin"]), Sample("pw"), "display name"),
        (Sample(["sign-in", "a", "--name", String(repeating: "n", count: 257), "--password-stdin"]), Sample("pw"), "display name"),
        (Sample(["sign-in", "a", "--password-stdin"]), Sample(""), "empty"),
        (Sample(["sign-in", "a", "--password-stdin"]), Sample("\n"), "empty"),
        (Sample(["sign-in", "a", "--password-stdin"]), Sample(String(repeating: "p", count: 4097)), "4096"),
        (Sample(["sign-in", "a", "--password-stdin"]), Sample("nul\u{0}byte"), "NUL"),
        (Sample(["forget", "\u{1b}[31m"]), Sample(""), "control"),
    ])
    func badInput(_ arguments: Sample<[String]>, _ input: Sample<String>, _ rule: String) async throws {
        let scenario = try await Scenario()
        let run = try await scenario.authctl(arguments.value, input: Array(input.value.utf8))
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.hasPrefix("authctl: "), "\(run)")
        #expect(run.stderr.contains(rule), "\(run)")
        #expect(run.stderr.filter { $0 == "\n" }.count == 1, "\(run)")
        #expect(!FileManager.default.fileExists(atPath: scenario.settingsFile))
        #expect(try await scenario.authctl("accounts").stdout.isEmpty)
    }

    @Test("an account id, name or service that is not UTF-8 is 65, not quietly replaced", arguments: [
        #"sign-in "$(printf 'a\377')" --password-stdin"#, #"sign-in a --name "$(printf '\300')" --password-stdin"#,
        #"--service "$(printf '\377')" status"#, #"forget "$(printf '\377')""#,
    ])
    func nonUTF8Arguments(_ arguments: String) async throws {
        var scenario = try await Scenario()
        scenario.extraEnvironment["AUTHCTL"] = Scenario.binary
        let run = try await runProcess("/bin/sh", ["-c", "printf pw | \"$AUTHCTL\" \(arguments)"], input: nil,
                                 environment: scenario.environment, timeout: 30)
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("not valid UTF-8"), "\(run)")
        #expect(try await scenario.authctl("accounts").stdout.isEmpty)
    }

    @Test("a password that is not UTF-8 is 65")
    func nonUTF8Password() async throws {
        let scenario = try await Scenario()
        let run = try await scenario.authctl(["sign-in", "a", "--password-stdin"], input: [0x70, 0xFF, 0x0A])
        #expect(run.status == 65)
        #expect(run.stderr.contains("UTF-8"))
    }

    @Test("--password-stdin drops one trailing \\n or \\r\\n and keeps a lone \\r; 4096 bytes is fine")
    func passwordLineEndings() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "crlf", "--password-stdin", stdin: "secret\r\n").expect(0)
        try await scenario.authctl("verify", "--password-stdin", stdin: "secret").expect(0)
        try await scenario.authctl("sign-in", "cr", "--password-stdin", stdin: "secret\r").expect(0)
        try await scenario.authctl("verify", "--password-stdin", stdin: "secret").expect(77)
        try await scenario.authctl("verify", "--password-stdin", stdin: "secret\r\n\n").expect(77)
        try await scenario.authctl("verify", "--password-stdin", stdin: "secret\r\n").expect(77)
        try await scenario.authctl("verify", "--password-stdin", stdin: "secret\r").expect(0)
        let long = String(repeating: "ü", count: 2048)  // 4096 bytes
        try await scenario.authctl("sign-in", "long", "--password-stdin", stdin: long + "\n").expect(0)
        try await scenario.authctl("verify", "--password-stdin", stdin: long).expect(0)
    }

    @Test("hostile account ids and names round-trip as data through keyring, settings, JSON")
    func hostileIDs() async throws {
        let scenario = try await Scenario()
        let marker = scenario.sandbox.directory + "/pwned-" + UUID().uuidString
        let account = "evil$(touch \(marker))`touch \(marker)`'\"; rm -rf / ;\"@ünï.org"
        let name = "Zoë \"$(touch \(marker))\" `x` \\ 'q'"
        try await scenario.authctl(["sign-in", account, "--name", name, "--password-stdin"], input: Array("pw".utf8)).expect(0)
        let who = try await scenario.authctl("whoami")
        #expect(who.output == account)
        let json = try await scenario.authctl("status", "--json")
        let object = try #require(JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["user"] as? String == account)
        #expect(object["name"] as? String == name)
        let stored = try await scenario.secretTool("lookup", "service", scenario.service, "account", account)
        #expect(stored.stdout.hasPrefix("$argon2id$"))
        let accounts = try await scenario.authctl("accounts", "--json")
        #expect((try JSONSerialization.jsonObject(with: Data(accounts.stdout.utf8)) as? [[String: Any]])?.first?["user"] as? String == account)
        try await scenario.authctl("forget", account).expect(0)
        #expect(!FileManager.default.fileExists(atPath: marker))
    }

    @Test("the settings file records the session, mode 0600 in a 0700 folder")
    func settingsFile() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--name", "Alice", "--password-stdin", stdin: "pw").expect(0)
        let text = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        #expect(text.hasPrefix("[\(scenario.service)]\n"))
        #expect(text.contains("\nuser=alice\n"))
        #expect(text.contains("\nname=Alice\n"))
        #expect(text.contains("\nsequence=1\n"))
        #expect(text.contains("\nsigned-in-at=20"))
        let fileMode = try FileManager.default.attributesOfItem(atPath: scenario.settingsFile)[.posixPermissions] as? NSNumber
        let folderMode = try FileManager.default.attributesOfItem(atPath: scenario.settingsDirectory)[.posixPermissions] as? NSNumber
        #expect(fileMode?.intValue == 0o600)
        #expect(folderMode?.intValue == 0o700)
    }

    @Test("the default display name is the passwd real name, else the login name")
    func defaultName() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "someone", "--password-stdin", stdin: "pw").expect(0)
        let json = try await scenario.authctl("whoami", "--json").stdout
        let entry = getpwuid(geteuid())!.pointee
        let gecos = String(cString: entry.pw_gecos).split(separator: ",", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        let expected = gecos.isEmpty ? String(cString: entry.pw_name) : gecos
        #expect(json.contains(#""name":"\#(expected)""#))
    }

    @Test("a stored secret another tool wrote is refused with 65 and the forget hint; forget clears it")
    func foreignSecret() async throws {
        let scenario = try await Scenario()
        let stored = try await scenario.secretTool("store", "--label=foreign", "service", scenario.service, "account", "mallory", stdin: "plaintext")
        #expect(stored.status == 0)
        let run = try await scenario.authctl("sign-in", "mallory", "--password-stdin", stdin: "plaintext")
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("mallory"), "\(run)")
        #expect(run.stderr.contains("authctl forget mallory"), "\(run)")
        try await scenario.authctl("status").expect(1)
        try await scenario.authctl("forget", "mallory").expect(0)
        try await scenario.authctl("sign-in", "mallory", "--password-stdin", stdin: "plaintext").expect(0)
    }

    @Test("a weak stored hash is upgraded on sign-in, never downgraded")
    func upgradeOnLogin() async throws {
        let scenario = try await Scenario()
        let weak = try Argon2idHasher(parameters: .init(memoryKiB: 19456, iterations: 2, parallelism: 8)).hash(password("pw"))
        try await scenario.secretTool("store", "--label=weak", "service", scenario.service, "account", "old", stdin: weak).expect(0)
        try await scenario.authctl("sign-in", "old", "--password-stdin", stdin: "pw").expect(0)
        let after = try await scenario.secretTool("lookup", "service", scenario.service, "account", "old").stdout
        #expect(after.hasPrefix("$argon2id$v=19$m=65536,t=3,p=8$"))
        try await scenario.authctl("verify", "--password-stdin", stdin: "pw").expect(0)
        // Still one item for the pair.
        let items = try await scenario.secretTool("search", "--all", "service", scenario.service, "account", "old")
        #expect(items.stdout.components(separatedBy: "\nlabel = ").count == 2, "\(items)")
    }

    @Test("sign-out --keep-credentials keeps the hash for the next sign-in")
    func keepCredentials() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "kim", "--password-stdin", stdin: "pw1").expect(0)
        try await scenario.authctl("sign-out", "--keep-credentials").expect(0)
        try await scenario.authctl("sign-in", "kim", "--password-stdin", stdin: "pw2").expect(77)
        try await scenario.authctl("sign-in", "kim", "--password-stdin", stdin: "pw1").expect(0)
    }
}

extension Run {
    /// `#expect(status == code)` in a chain, showing the whole run (stdout, stderr) when not.
    func expect(_ code: Int32, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(status == code, "\(self)", sourceLocation: sourceLocation)
    }
}

/// Output that cannot be written is exit 74 with a message, never a silent 0.
@Suite("authctl with an unwritable stdout")
struct UnwritableOutputTests {
    @Test("a command whose stdout is /dev/full: 74 and one line on stderr",
          arguments: [
              "status", "status --json", "whoami", "accounts --json", "doctor --json", "--version",
              "sign-in full-disk --password-stdin",
          ])
    func fullDisk(_ command: String) async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "someone", "--password-stdin", stdin: "pw").expect(0)
        let run = try await scenario.shell(#"printf pw | "$AUTHCTL" \#(command) >/dev/full"#)
        #expect(run.status == 74, "\(run)")
        #expect(run.stderr == "authctl: cannot write to standard output: No space left on device\n", "\(run)")
    }
}
