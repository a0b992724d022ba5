import AuthController
import Foundation
import Testing

/// `status` and `whoami` with only their plain options are read without swift-argument-parser.
/// Each argument list must mean what it means to ArgumentParser: the same list with an option
/// only ArgumentParser reads (`--keyring-timeout 5`, the default of a call that never prompts)
/// must give the same exit status, stdout and stderr.
@Suite("status and whoami read directly mean what ArgumentParser reads")
struct FastPathTests {
    static func argumentLists(service: String) -> [[String]] {
        [
            ["status"], ["status", "--json"], ["status", "--quiet"], ["status", "-q"], ["status", "--json", "--quiet"],
            ["--service", service, "status"], ["status", "--service", service, "--json"], ["status", "--service=\(service)"],
            ["--no-prompt", "status", "--json"], ["status", "--no-prompt"],
            ["whoami"], ["whoami", "--json"], ["--service", service, "whoami", "--json"],
            ["--service", "not a service", "status"], ["--service=", "status"],
            ["status", "--json", "--json"], ["status", "--bogus"], ["status", "extra"], ["--json", "status"], ["status", "--service"],
        ]
    }

    @Test("signed out, then signed in: every list gives what ArgumentParser gives")
    func sameAsArgumentParser() async throws {
        let scenario = try await Scenario()
        // A service other than AUTHCTL_SERVICE (the scenario's), so that --service is seen to act.
        let other = scenario.service + "-other"
        for signedIn in [false, true] {
            if signedIn {
                let run = try await scenario.authctl("--service", other, "sign-in", "alice@example.org", "--name", "Alice",
                                                     "--password-stdin", stdin: "pw")
                try #require(run.status == 0, "\(run)")
            }
            for arguments in Self.argumentLists(service: other) {
                let direct = try await scenario.authctl(arguments)
                let parsed = try await scenario.authctl(arguments + ["--keyring-timeout", "5"])
                #expect(direct.status == parsed.status, "\(arguments): \(direct) vs \(parsed)")
                #expect(direct.stdout == parsed.stdout, "\(arguments)")
                #expect(direct.stderr == parsed.stderr, "\(arguments)")
            }
        }
    }
}
