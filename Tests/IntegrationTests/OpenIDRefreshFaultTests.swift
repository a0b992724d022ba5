// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A refresh at an OpenID Connect provider that rotates its refresh tokens (django-oauth-toolkit)
/// when something after the token answer goes wrong: the rotated refresh token must not be lost,
/// since the provider has already retired the old one.
@Suite("OpenID Connect: faults during a refresh")
struct OpenIDRefreshFaultTests {
    /// A scenario signed in as Ada at `provider` through the browser flow.
    private func signedIn(_ provider: IdentityProvider) async throws -> Scenario {
        var scenario = try await Scenario()
        let result = URL(fileURLWithPath: scenario.sandbox.directory + "/stand-in-\(UUID().uuidString).json")
        scenario.extraEnvironment = try IdentityProvider.browserEnvironment(result: result)
        let bind = try await scenario.authctl(["server", "set", provider.issuer, "--protocol", "oidc", "--client-id", IdentityProvider.browserClientID])
        try #require(bind.status == 0, "\(bind)")
        let signIn = try await scenario.authctl("sign-in", "--timeout", "60")
        try #require(signIn.status == 0, "\(signIn)")
        return scenario
    }

    /// Rewrites the service's `jwks-uri` in the settings file (atomically, mode 0600), as if the
    /// provider's key set were served from elsewhere; returns the value it replaced.
    @discardableResult
    private func setKeySetURL(_ scenario: Scenario, to url: String) throws -> String {
        let text = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        var lines = text.components(separatedBy: "\n")
        let index = try #require(lines.firstIndex { $0.hasPrefix("jwks-uri=") })
        let previous = String(lines[index].dropFirst("jwks-uri=".count))
        lines[index] = "jwks-uri=" + url
        let temporary = scenario.settingsFile + ".edit"
        try lines.joined(separator: "\n").write(toFile: temporary, atomically: false, encoding: .utf8)
        chmod(temporary, 0o600)
        rename(temporary, scenario.settingsFile)
        return previous
    }

    @Test("the key set cannot be fetched after the provider rotated the refresh token: the session survives")
    func keySetUnreachableDuringRefresh() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await signedIn(provider)
        // Port 1 on loopback: connection refused, as a key-set host that is briefly down.
        let keySet = try setKeySetURL(scenario, to: "http://127.0.0.1:1/jwks.json")
        _ = try await scenario.authctl("token", "--refresh")
        #expect(try await provider.count("refresh") == 1)
        try setKeySetURL(scenario, to: keySet)
        let afterwards = try await scenario.authctl("token", "--refresh")
        #expect(afterwards.status == 0, "\(afterwards)")
        #expect(try await provider.liveRefreshTokens()["ada"] == 1)
    }

    @Test("SIGTERM while the key set is fetched after the provider rotated the refresh token: the session survives")
    func signalWhileKeySetIsFetched() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await signedIn(provider)
        // A listener that accepts and never answers: the key-set fetch waits for its deadline.
        let (silent, port) = loopbackSocket(listening: true)
        defer { close(silent) }
        let keySet = try setKeySetURL(scenario, to: "http://127.0.0.1:\(port)/jwks.json")
        let refresh = try await scenario.start(["token", "--refresh"])
        let refreshed = await eventually(within: .seconds(30)) { ((try? await provider.count("refresh")) ?? 0) == 1 }
        #expect(refreshed)
        refresh.signal(SIGTERM)
        _ = await refresh.wait()
        try setKeySetURL(scenario, to: keySet)
        let afterwards = try await scenario.authctl("token", "--refresh")
        #expect(afterwards.status == 0, "\(afterwards)")
        #expect(try await provider.liveRefreshTokens()["ada"] == 1)
    }

    @Test("token --id-token --min-valid longer than the ID token lives: the threshold is capped at half its lifetime, so no refresh at once")
    func idTokenThresholdCapped() async throws {
        // Ten minutes: half of it is far more than a loaded machine takes between the commands.
        let provider = try await IdentityProvider(idTokenLifetime: .seconds(600))
        let scenario = try await signedIn(provider)
        let first = try await scenario.authctl("token", "--id-token", "--min-valid", "3000")
        #expect(first.status == 0, "\(first)")
        let second = try await scenario.authctl("token", "--id-token", "--min-valid", "3000")
        #expect(second.status == 0, "\(second)")
        #expect(try await provider.count("refresh") == 0)
    }
}
