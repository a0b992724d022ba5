// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

/// `git-credential setup` leaves the settings readable and unchanged when it cannot finish, and
/// an OpenID sign-in neither undoes a change of binding made while the person was at the
/// provider nor hangs on a redirect port another program holds.
@Suite("git-credential setup that changes nothing when it fails, and sign-ins that race a change of binding or a port")
struct SetupAndSignInRaceTests {
    /// A service bound to a token server (the oauth2 binding contacts nobody).
    private func boundScenario() async throws -> Scenario {
        var scenario = try await Scenario()
        let home = scenario.configHome + "-git"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        scenario.extraEnvironment["HOME"] = home
        scenario.extraEnvironment["GIT_CONFIG_GLOBAL"] = home + "/gitconfig"
        let bound = try await scenario.authctl("server", "set", "https://tokens.example.org/token")
        try #require(bound.status == 0, "\(bound)")
        return scenario
    }

    @Test("setup of a host with '_' (accepted as a URL) leaves a settings file every command can still read",
          arguments: ["https://git_server.example.org", "https://a'b.example.org", "https://a~b.example.org"])
    func setupHostThatTheReaderRefuses(url: String) async throws {
        let scenario = try await boundScenario()
        let setup = try await scenario.authctl("git-credential", "setup", url)
        let status = try await scenario.authctl("status")
        // Either setup refuses the host (65) and changes nothing, or it takes it and the file
        // stays readable; never a success that makes the file "corrupt" (78) for every command.
        #expect(setup.status == 65 || status.status != 78, "setup: \(setup)\nstatus: \(status)")
        #expect(status.status == 1, "\(status)")
    }

    @Test("setup that fails in git (unwritable global configuration) changes no settings")
    func setupFailingInGitChangesNothing() async throws {
        var scenario = try await boundScenario()
        scenario.extraEnvironment["GIT_CONFIG_GLOBAL"] = "/proc/nonexistent/gitconfig"
        let before = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        let setup = try await scenario.authctl("git-credential", "setup", "https://git.example.org")
        #expect(setup.status == 69, "\(setup)")
        let after = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        #expect(!after.contains("git-hosts"), "\(after)")
        #expect(after == before)
    }

    @Test("server unset while an OpenID sign-in waits for the person is not silently undone by that sign-in")
    func unsetDuringSignInStands() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await Scenario()
        try await scenario.bindDeviceClient(of: provider)
        let (signIn, uri, code) = try await scenario.startDeviceSignIn(["--timeout", "60"])
        let unset = try await scenario.authctl("server", "unset")
        try #require(unset.status == 0, "\(unset)")
        let (decided, outcome) = try await provider.approveDevice(verificationURI: uri, userCode: code)
        #expect(decided, "\(outcome)")
        let run = await signIn.wait()
        // `server unset` said the binding is gone; the sign-in that started under it must not
        // bring it back (and sign in) behind its back.
        let show = try await scenario.authctl("server", "show")
        #expect(show.status == 1, "sign-in: \(run)\nserver show: \(show)")
    }

    @Test("a --redirect-port another program listens on is 69 at once, not a silent hang")
    func redirectPortInUse() async throws {
        let provider = try await IdentityProvider()
        // Another program holds 127.0.0.1:PORT (a second sign-in, a local web server), until the
        // test ends it: a fixed two minutes ran out on a loaded machine before the sign-in came.
        let squatter = try await Spawned("/usr/bin/env", ["python3", "-c", """
            import socket, sys, time
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(5)
            print(s.getsockname()[1], flush=True); time.sleep(3600)
            """], input: nil, environment: ProcessInfo.processInfo.environment, leadsProcessGroup: true)
        defer { squatter.signal(SIGTERM) }
        _ = await squatter.waitForOutput(timeout: 30) { $0.contains("\n") || squatter.hasEnded }
        let port = try #require(squatter.stdout.split(separator: "\n").first.map(String.init),
                                "the squatter did not say its port: \(squatter.stderr)")
        var scenario = try await Scenario()
        let bound = try await scenario.authctl(["server", "set", provider.issuer, "--protocol", "oidc", "--client-id",
                                                IdentityProvider.browserClientID, "--redirect-port", port])
        try #require(bound.status == 0, "\(bound)")
        scenario.extraEnvironment["BROWSER"] = "/bin/true"
        let run = try await scenario.authctl(["sign-in", "--flow", "browser", "--timeout", "5"], timeout: 30)
        #expect(run.status == 69, "\(run)")
        #expect(run.seconds < 10, "\(run.seconds) s")
        #expect(run.stderr.hasPrefix("authctl: "), "\(run)")
    }
}
