// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

/// Binding to a real OpenID Connect provider (django-oauth-toolkit, Support/IdentityProvider.swift)
/// by discovery, and signing in with the device flow, the person played by the device stand-in.
@Suite("OpenID Connect: discovery and the device flow")
struct OpenIDDeviceFlowTests {
    /// A scenario bound to `provider` for its device client.
    private func bound(_ provider: IdentityProvider, _ extra: [String] = []) async throws -> Scenario {
        let scenario = try await Scenario()
        try await scenario.bindDeviceClient(of: provider, extra)
        return scenario
    }

    @Test("server set discovers the endpoints and keeps them; server show --json names the issuer")
    func discovery() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await bound(provider)
        let settings = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        #expect(settings.contains("issuer=\(provider.issuer)\n"))
        #expect(settings.contains("token-endpoint=\(provider.tokenEndpoint)\n"))
        #expect(settings.contains("jwks-uri=\(provider.jwksURI)\n"))
        #expect(settings.contains("userinfo-endpoint=\(provider.userinfoEndpoint)\n"))
        #expect(settings.contains("scope=openid profile email\n"))
        let show = try await scenario.authctl("server", "show", "--json")
        let document = try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(document["protocol"] as? String == "oidc")
        #expect(document["issuer"] as? String == provider.issuer)
        #expect(document["deviceAuthorizationUrl"] as? String == provider.deviceAuthorizationEndpoint)
        #expect(document["accountClaim"] is NSNull)
        #expect(document["redirectPort"] is NSNull)
        #expect(try await provider.count("discovery") == 1)
    }

    @Test("an issuer with a trailing slash is the same issuer; a scope without openid gets it in front")
    func issuerSpelling() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await Scenario()
        let run = try await scenario.authctl("server", "set", provider.issuer + "/", "--protocol", "oidc", "--client-id", "c", "--scope", "email")
        #expect(run.status == 0, "\(run)")
        let settings = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        #expect(settings.contains("scope=openid email\n"))
    }

    @Test("no provider at the URL (404): 76, nothing bound; no client id: 64; options of oidc on oauth2: 64")
    func discoveryRefused() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await Scenario()
        let missing = try await scenario.authctl("server", "set", "http://127.0.0.1:\(provider.port)/nowhere", "--protocol", "oidc", "--client-id", "c")
        #expect(missing.status == 76, "\(missing)")
        #expect(missing.stderr.contains("no OpenID provider at"))
        let settings = (try? String(contentsOfFile: scenario.settingsFile, encoding: .utf8)) ?? ""
        #expect(!settings.contains("server="))
        let noClient = try await scenario.authctl("server", "set", provider.issuer, "--protocol", "oidc")
        #expect(noClient.status == 64, "\(noClient)")
        let wrongProtocol = try await scenario.authctl("server", "set", provider.tokenEndpoint, "--redirect-port", "8080")
        #expect(wrongProtocol.status == 64, "\(wrongProtocol)")
        let badPort = try await scenario.authctl("server", "set", provider.issuer, "--protocol", "oidc", "--client-id", "c", "--redirect-port", "65536")
        #expect(badPort.status == 65, "\(badPort)")
    }

    @Test("the device flow: the lines for the person, approval, who signed in from userinfo, the session as any other")
    func deviceFlowSignsIn() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await bound(provider)
        let (signIn, uri, code) = try await scenario.startDeviceSignIn()
        #expect(uri == provider.verificationPage)
        #expect(signIn.stderr.contains("\nOr open \(provider.verificationPage)?user_code=\(code)\n"))
        #expect(!signIn.stderr.contains("authctl: "))
        // Not a terminal: no QR code.
        #expect(!signIn.stderr.contains("\u{2580}") && !signIn.stderr.contains("\u{2588}"))
        let (decided, outcome) = try await provider.approveDevice(verificationURI: uri, userCode: code)
        #expect(decided, "\(outcome)")
        let run = await signIn.wait()
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "Signed in to \(scenario.service) as ada@example.org.\n")
        let status = try await scenario.authctl("status", "--json")
        let document = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(document["user"] as? String == "ada@example.org")
        #expect(document["name"] as? String == "Ada Lovelace")
        #expect(document["sequence"] as? Int == 1)
        // The device flow issues no ID token here: who signed in came from userinfo.
        #expect(try await provider.count("userinfo") == 1)
        let item = try await scenario.secretTool("lookup", "service", scenario.service, "account", "ada@example.org")
        let tokens = try JSONSerialization.jsonObject(with: Data(item.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(tokens["subject"] as? String == IdentityProvider.ada.subject)
        #expect(tokens["idToken"] == nil)
        let token = try await scenario.authctl("token")
        #expect(token.output == tokens["accessToken"] as? String)
        let idToken = try await scenario.authctl("token", "--id-token")
        #expect(idToken.status == 65, "\(idToken)")
        let refreshed = try await scenario.authctl("token", "--refresh")
        #expect(refreshed.status == 0, "\(refreshed)")
        #expect(refreshed.output != token.output, "\(refreshed)")
        #expect(try await provider.count("refresh") == 1)
    }

    @Test("at a terminal, a QR code of the complete verification page follows the two lines")
    func qrCodeAtTerminal() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await bound(provider)
        let terminal = try PseudoTerminal()
        let signIn = try await Spawned(Scenario.binary, ["sign-in", "--flow", "device", "--timeout", "60"], input: nil,
                                       environment: scenario.environment, terminal: terminal.slave)
        try #require(await terminal.read(within: .seconds(30)) { $0.contains("\u{2580}") || $0.contains("\u{2584}") }, "no QR code: \(terminal.screen)")
        let screen = terminal.screen
        let line = try #require(screen.split(separator: "\r\n").first { $0.hasPrefix("To sign in, open ") })
        let code = String(line.split(separator: " ").last!)
        #expect(screen.contains("Or open \(provider.verificationPage)?user_code=\(code)\r\n"))
        let (decided, _) = try await provider.approveDevice(verificationURI: provider.verificationPage, userCode: code)
        #expect(decided)
        #expect(await signIn.wait().status == 0)
    }

    @Test("the person refuses: 77, nothing stored, no event")
    func deviceFlowRefused() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await bound(provider)
        let (signIn, uri, code) = try await scenario.startDeviceSignIn()
        _ = try await provider.approveDevice(verificationURI: uri, userCode: code, decision: .deny)
        let run = await signIn.wait()
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.contains("authctl: the sign-in was refused at the provider\n"))
        let status = try await scenario.authctl("status", "--json")
        #expect(status.status == 1)
        #expect(status.stdout.contains("\"sequence\":0"))
        let items = try await scenario.secretTool("search", "--all", "service", scenario.service)
        #expect(!items.stdout.contains("account"), "\(items)")
    }

    @Test("nobody approves within --timeout: 75, nothing stored, and polling was once per interval")
    func deviceFlowTimeout() async throws {
        let provider = try await IdentityProvider(deviceInterval: .seconds(1))
        let scenario = try await bound(provider)
        let run = try await scenario.authctl(["sign-in", "--flow", "device", "--timeout", "4"])
        #expect(run.status == 75, "\(run)")
        #expect(run.stderr.contains("raise --timeout"))
        let polls = try await provider.count("device_poll")
        #expect(polls >= 1 && polls <= 4, "\(polls) polls in 4 s at an interval of 1 s")
        let status = try await scenario.authctl("status")
        #expect(status.status == 1)
    }

    @Test("the account given must be the one that signs in: 77, nothing stored, the new refresh token revoked")
    func deviceFlowOtherAccount() async throws {
        let provider = try await IdentityProvider(completeDiscovery: true)
        let scenario = try await bound(provider)
        let (signIn, uri, code) = try await scenario.startDeviceSignIn(["grace@example.org"])
        _ = try await provider.approveDevice(verificationURI: uri, userCode: code, person: IdentityProvider.ada)
        let run = await signIn.wait()
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.contains("the provider signed in ada@example.org, not grace@example.org"))
        #expect(try await provider.count("revoke") == 1)
        #expect(try await provider.liveRefreshTokens()["ada"] ?? 0 == 0)
        let status = try await scenario.authctl("status")
        #expect(status.status == 1)
    }

    @Test("sign-out revokes the refresh token at the discovered revocation endpoint")
    func signOutRevokes() async throws {
        let provider = try await IdentityProvider(completeDiscovery: true)
        let scenario = try await bound(provider)
        let (signIn, uri, code) = try await scenario.startDeviceSignIn()
        _ = try await provider.approveDevice(verificationURI: uri, userCode: code)
        #expect(await signIn.wait().status == 0)
        #expect(try await provider.liveRefreshTokens()["ada"] == 1)
        let out = try await scenario.authctl("sign-out")
        #expect(out.status == 0, "\(out)")
        #expect(try await provider.count("revoke") == 1)
        #expect(try await provider.liveRefreshTokens()["ada"] ?? 0 == 0)
    }

    @Test("--password-stdin and --register are not for an OpenID provider: 64")
    func passwordOptionsRefused() async throws {
        let provider = try await IdentityProvider()
        let scenario = try await bound(provider)
        let piped = try await scenario.authctl(["sign-in", "ada@example.org", "--password-stdin"], input: Array("x".utf8))
        #expect(piped.status == 64, "\(piped)")
        let register = try await scenario.authctl("sign-in", "ada@example.org", "--register")
        #expect(register.status == 64, "\(register)")
        let flowElsewhere = try await Scenario().authctl("sign-in", "ada@example.org", "--flow", "device")
        #expect(flowElsewhere.status == 64, "\(flowElsewhere)")
    }
}
