// SPDX-License-Identifier: Apache-2.0
import AuthController
import Foundation
import Testing

/// `status`, `whoami` and `token` with only their plain options are read without swift-argument-parser.
/// Each argument list must mean what it means to ArgumentParser: the same list with an option
/// only ArgumentParser reads (`--keyring-timeout 5`, the default of a call that never prompts)
/// must give the same exit status, stdout and stderr.
@Suite("status, whoami and token read directly mean what ArgumentParser reads")
struct FastPathTests {
    static func argumentLists(service: String) -> [[String]] {
        [
            ["status"], ["status", "--json"], ["status", "--quiet"], ["status", "-q"], ["status", "--json", "--quiet"],
            ["--service", service, "status"], ["status", "--service", service, "--json"], ["status", "--service=\(service)"],
            ["--no-prompt", "status", "--json"], ["status", "--no-prompt"],
            ["whoami"], ["whoami", "--json"], ["--service", service, "whoami", "--json"],
            ["--service", "not a service", "status"], ["--service=", "status"],
            ["status", "--json", "--json"], ["status", "--bogus"], ["status", "extra"], ["--json", "status"], ["status", "--service"],
            ["token"], ["token", "--json"], ["--service", service, "token", "--min-valid", "30"], ["token", "--min-valid", "0030"],
            ["token", "--min-valid", "31536000"], ["token", "--min-valid", "31536001"], ["token", "--min-valid", "-5"],
            ["token", "--min-valid", "+30"], ["token", "--min-valid"], ["token", "--min-valid", "1", "--min-valid", "2"],
            ["--min-valid", "30", "token"], ["token", "--json", "--no-prompt"],
        ]
    }

    /// Lists that refresh: each run gets a new token, so only the exit status and stderr compare.
    static let refreshing: [[String]] = [["token", "--refresh"], ["token", "--refresh", "--json", "--min-valid", "5"]]

    @Test("signed out, then signed in: every list gives what ArgumentParser gives")
    func sameAsArgumentParser() async throws {
        let scenario = try await Scenario()
        // A service other than AUTHCTL_SERVICE (the scenario's), so that --service is seen to act.
        let other = scenario.service + "-other"
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice@example.org": "pw"], "access_lifetime": 3600])
        for signedIn in [false, true] {
            if signedIn {
                // The scenario's own service is bound to the token server (`token`), the other is local.
                try await scenario.authctl("sign-in", "alice@example.org", "--server", server.oauth2, "--password-stdin", stdin: "pw")
                    .expect(0)
                try await scenario.authctl("--service", other, "sign-in", "alice@example.org", "--name", "Alice", "--password-stdin",
                                           stdin: "pw").expect(0)
            }
            for arguments in Self.argumentLists(service: other) + Self.refreshing {
                let direct = try await scenario.authctl(arguments)
                let parsed = try await scenario.authctl(arguments + ["--keyring-timeout", "5"])
                #expect(direct.status == parsed.status, "\(arguments): \(direct) vs \(parsed)")
                #expect(direct.stderr == parsed.stderr, "\(arguments)")
                if !Self.refreshing.contains(arguments) {
                    #expect(direct.stdout == parsed.stdout, "\(arguments)")
                }
            }
        }
    }
}
