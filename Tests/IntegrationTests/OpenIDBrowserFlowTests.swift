// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Signing in at a real OpenID Connect provider (django-oauth-toolkit) in the browser: PKCE,
/// the loopback listener, the verified ID token. The person's browser is the browser stand-in
/// (`BROWSER`), over HTTP, or driving headless Chromium.
@Suite("OpenID Connect: the browser flow")
struct OpenIDBrowserFlowTests {
    /// A scenario bound to `provider`'s browser client, whose `BROWSER` is the stand-in.
    private func bound(_ provider: IdentityProvider, person: IdentityProvider.Person = IdentityProvider.ada,
                       decision: IdentityProvider.Decision = .approve, engine: IdentityProvider.Engine = .http,
                       extra: [String] = []) async throws -> (Scenario, result: URL) {
        var scenario = try await Scenario()
        let result = URL(fileURLWithPath: scenario.sandbox.directory + "/stand-in-\(UUID().uuidString).json")
        scenario.extraEnvironment = try IdentityProvider.browserEnvironment(result: result, person: person, decision: decision, engine: engine)
        let run = try await scenario.authctl(["server", "set", provider.issuer, "--protocol", "oidc", "--client-id", IdentityProvider.browserClientID] + extra)
        #expect(run.status == 0, "\(run)")
        return (scenario, result)
    }

    /// What the stand-in saw once it has finished (it runs detached from authctl).
    private func outcome(_ result: URL) async -> [String: Any] {
        _ = await eventually(within: .seconds(60)) { IdentityProvider.standInOutcome(at: result) != nil }
        return IdentityProvider.standInOutcome(at: result) ?? [:]
    }

    /// The query of the authorization request authctl sent the browser to.
    private func authorizationQuery(_ provider: IdentityProvider) async throws -> [String: String] {
        let request = try #require(try await provider.log().first { $0["endpoint"] as? String == "authorize" })
        let query = request["query"] as? String ?? ""
        return Dictionary(URLComponents(string: "http://x/?" + query)?.queryItems?.map { ($0.name, $0.value ?? "") } ?? [],
                          uniquingKeysWith: { first, _ in first })
    }

    @Test("signs in: PKCE S256, state and nonce, the verified ID token kept, the page says so after the tokens are stored")
    func signsIn() async throws {
        let provider = try await IdentityProvider()
        let (scenario, result) = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--timeout", "60")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "Signed in to \(scenario.service) as ada@example.org.\n")
        let url = try #require(run.stderr.split(separator: "\n").first { $0.hasPrefix("To sign in, continue in your browser at ") })
        #expect(url.hasSuffix(try await provider.log().first { $0["endpoint"] as? String == "authorize" }?["query"] as? String ?? "-"))
        let page = await outcome(result)
        #expect(page["status"] as? Int == 200, "\(page)")
        #expect(page["contentType"] as? String == "text/html; charset=utf-8")
        #expect((page["body"] as? String ?? "").contains("Signed in to \(scenario.service) as ada@example.org"))
        let query = try await authorizationQuery(provider)
        #expect(query["code_challenge_method"] == "S256")
        #expect(query["code_challenge"]?.count == 43)
        #expect((query["state"]?.count ?? 0) >= 22)
        #expect((query["nonce"]?.count ?? 0) >= 22)
        #expect(query["login_hint"] == nil)
        #expect(query["redirect_uri"]?.hasPrefix("http://127.0.0.1:") == true)
        let item = try await scenario.secretTool("lookup", "service", scenario.service, "account", "ada@example.org")
        let tokens = try JSONSerialization.jsonObject(with: Data(item.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(tokens["subject"] as? String == IdentityProvider.ada.subject)
        let idToken = try await scenario.authctl("token", "--id-token")
        #expect(idToken.status == 0, "\(idToken)")
        #expect(idToken.output == tokens["idToken"] as? String)
        #expect(idToken.output.split(separator: ".").count == 3)
        let status = try await scenario.authctl("status", "--json")
        #expect(status.stdout.contains("\"name\":\"Ada Lovelace\""))
        // The ID token named who signed in: no userinfo request.
        #expect(try await provider.count("userinfo") == 0)
        #expect(try await provider.count("jwks") >= 1)
    }

    @Test("the person refuses at the consent page: 77, the page says so, nothing stored")
    func refused() async throws {
        let provider = try await IdentityProvider()
        let (scenario, result) = try await bound(provider, decision: .deny)
        let run = try await scenario.authctl("sign-in", "--timeout", "60")
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.contains("authctl: the sign-in was refused at the provider\n"))
        let page = await outcome(result)
        #expect((page["body"] as? String ?? "").contains("the sign-in was refused at the provider"), "\(page)")
        #expect(try await scenario.authctl("status").status == 1)
    }

    @Test("ACCOUNT is sent as login_hint, and another account signing in is 77 with its refresh token revoked")
    func loginHint() async throws {
        let provider = try await IdentityProvider(completeDiscovery: true)
        let (scenario, result) = try await bound(provider, person: IdentityProvider.grace)
        let run = try await scenario.authctl("sign-in", "ada@example.org", "--timeout", "60")
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.contains("the provider signed in grace@example.org, not ada@example.org"))
        #expect(try await authorizationQuery(provider)["login_hint"] == "ada@example.org")
        let page = await outcome(result)
        #expect((page["body"] as? String ?? "").contains("did not complete"), "\(page)")
        #expect(try await provider.count("revoke") == 1)
        #expect(try await provider.liveRefreshTokens()["grace"] ?? 0 == 0)
        #expect(try await scenario.authctl("status").status == 1)
    }

    @Test("nobody comes back within --timeout: 75, nothing stored, and the listener is gone")
    func timeout() async throws {
        let provider = try await IdentityProvider()
        let (scenario, _) = try await bound(provider, decision: .ignore)
        let run = try await scenario.authctl("sign-in", "--timeout", "3")
        #expect(run.status == 75, "\(run)")
        #expect(run.stderr.contains("raise --timeout"))
        let redirect = try #require(try await authorizationQuery(provider)["redirect_uri"])
        let port = try #require(URLComponents(string: redirect)?.port)
        #expect(try await scenario.authctl("status").status == 1)
        try await expectNoListener(on: port)
    }

    @Test("SIGTERM, SIGINT or SIGHUP while the person is at the provider: nothing stored, the listener gone", arguments: [SIGTERM, SIGINT, SIGHUP])
    func signalDuringWait(_ signal: Int32) async throws {
        let provider = try await IdentityProvider()
        let (scenario, _) = try await bound(provider, decision: .ignore)
        let signIn = try await scenario.start(["sign-in", "--timeout", "60"])
        #expect(await eventually(within: .seconds(30)) { signIn.stderr.contains("continue in your browser at ") })
        // The stand-in reached the provider, so the listener is up and the person is "there".
        var redirect: String?
        _ = await eventually(within: .seconds(30)) {
            let asked = (try? await provider.log())?.contains { $0["endpoint"] as? String == "authorize" } ?? false
            if asked { redirect = try? await authorizationQuery(provider)["redirect_uri"] }
            return redirect != nil
        }
        signIn.signal(signal)
        let run = await signIn.wait()
        #expect(run.status == 128 + signal, "\(run)")
        #expect(try await scenario.authctl("status").status == 1)
        let redirectURI = try #require(redirect)
        let port = try #require(URLComponents(string: redirectURI)?.port)
        try await expectNoListener(on: port)
        let settings = (try? String(contentsOfFile: scenario.settingsFile, encoding: .utf8)) ?? ""
        #expect(!settings.contains("user="))
    }

    @Test("--redirect-port fixes the loopback port of the redirect URI")
    func redirectPort() async throws {
        let provider = try await IdentityProvider()
        // A port nothing listens on now: the system's choice, given back.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        close(listener)
        let (scenario, _) = try await bound(provider, extra: ["--redirect-port", "\(port)"])
        let run = try await scenario.authctl("sign-in", "--timeout", "60")
        #expect(run.status == 0, "\(run)")
        #expect(try await authorizationQuery(provider)["redirect_uri"] == "http://127.0.0.1:\(port)/callback")
        #expect(try await scenario.authctl("server", "show", "--json").stdout.contains("\"redirectPort\":\(port)"))
    }

    @Test("another local process knocking with a wrong state, another path or a POST gets 400, and the sign-in goes on")
    func knocking() async throws {
        let provider = try await IdentityProvider()
        var (scenario, result) = try await bound(provider)
        // The browser: first a hostile neighbour at the redirect URI, then the person.
        let knocks = URL(fileURLWithPath: scenario.sandbox.directory + "/knocks-\(UUID().uuidString)")
        let script = URL(fileURLWithPath: scenario.sandbox.directory + "/knocking-browser-\(UUID().uuidString)")
        try """
        #!/bin/sh
        redirect=$(printf '%s' "$1" | sed -n 's/.*redirect_uri=\\([^&]*\\).*/\\1/p' | sed 's/%3A/:/g; s/%2F/\\//g')
        base=${redirect%/callback}
        {
            curl -s -o /dev/null -w '%{http_code}\\n' "$redirect?code=stolen&state=wrong"
            curl -s -o /dev/null -w '%{http_code}\\n' "$redirect?code=stolen"
            curl -s -o /dev/null -w '%{http_code}\\n' "$base/elsewhere"
            curl -s -o /dev/null -w '%{http_code}\\n' -X POST "$redirect?code=stolen&state=wrong"
        } > '\(knocks.path)'
        exec '\(IdentityProvider.browserStandIn)' "$1"
        """.write(to: script, atomically: true, encoding: .utf8)
        chmod(script.path, 0o755)
        scenario.extraEnvironment["BROWSER"] = script.path
        let run = try await scenario.authctl("sign-in", "--timeout", "60")
        #expect(run.status == 0, "\(run)")
        #expect(try String(contentsOf: knocks, encoding: .utf8) == "400\n400\n400\n400\n")
        let page = await outcome(result)
        #expect((page["body"] as? String ?? "").contains("Signed in to"), "\(page)")
    }

    @Test("two sign-ins at once, to two services: both complete, each on its own port")
    func twoAtOnce() async throws {
        let provider = try await IdentityProvider()
        let (first, _) = try await bound(provider)
        let (second, _) = try await bound(provider, person: IdentityProvider.grace)
        async let one = first.authctl("sign-in", "--timeout", "90")
        async let two = second.authctl("sign-in", "--timeout", "90")
        let (a, b) = try await (one, two)
        #expect(a.status == 0, "\(a)")
        #expect(b.status == 0, "\(b)")
        #expect(a.stdout.contains("as ada@example.org"))
        #expect(b.stdout.contains("as grace@example.org"))
    }

    @Test("a real browser: headless Chromium signs in")
    func chromium() async throws {
        let provider = try await IdentityProvider()
        let (scenario, result) = try await bound(provider, engine: .chromium)
        let run = try await scenario.authctl(["sign-in", "--timeout", "120"], timeout: 150)
        #expect(run.status == 0, "\(run)")
        let page = await outcome(result)
        #expect((page["body"] as? String ?? "").contains("Signed in to \(scenario.service) as ada@example.org"), "\(page)")
    }

    @Test("verify signs in again: the same account renews the tokens without an event; another one is 77 and changes nothing")
    func verify() async throws {
        let provider = try await IdentityProvider()
        var (scenario, _) = try await bound(provider)
        #expect(try await scenario.authctl("sign-in", "--timeout", "60").status == 0)
        let before = try await scenario.authctl("token")
        let again = try await scenario.authctl("verify", "--timeout", "60")
        #expect(again.status == 0, "\(again)")
        let after = try await scenario.authctl("token")
        #expect(after.output != before.output)
        #expect(try await scenario.authctl("status", "--json").stdout.contains("\"sequence\":1"))
        let other = URL(fileURLWithPath: scenario.sandbox.directory + "/other-\(UUID().uuidString).json")
        scenario.extraEnvironment = try IdentityProvider.browserEnvironment(result: other, person: IdentityProvider.grace)
        let wrong = try await scenario.authctl("verify", "--timeout", "60")
        #expect(wrong.status == 77, "\(wrong)")
        #expect(try await scenario.authctl("token").output == after.output)
    }

    @Test("eight concurrent token --refresh against the provider's reuse detection: one refresh, one token, the session survives")
    func concurrentRefreshes() async throws {
        let provider = try await IdentityProvider()
        let (scenario, _) = try await bound(provider)
        #expect(try await scenario.authctl("sign-in", "--timeout", "60").status == 0)
        let before = try await scenario.authctl("token")
        // The provider answers refreshes after 3 s: all eight have read the session before the
        // first refresh is answered, so each --refresh is one of the concurrent ones.
        try await provider.configure(["REFRESH_DELAY_SECONDS": 3])
        // Started at once, not through the suite's limit on processes running together.
        var started: [Spawned] = []
        for _ in 0..<8 { started.append(try await scenario.start(["token", "--refresh"])) }
        var runs: [Run] = []
        for process in started { runs.append(await process.wait()) }
        for run in runs { #expect(run.status == 0, "\(run)") }
        // Each --refresh that found a token newer than the one it saw uses it: all the same.
        #expect(Set(runs.map(\.output)).count == 1, "\(runs.map(\.output))")
        #expect(runs[0].output != before.output)
        #expect(try await provider.count("refresh") == 1)
        try await provider.configure(["REFRESH_DELAY_SECONDS": 0])
        let afterwards = try await scenario.authctl("token", "--refresh")
        #expect(afterwards.status == 0, "\(afterwards)")
        #expect(try await provider.liveRefreshTokens()["ada"] == 1)
    }
}

/// Nothing of the sign-in listens on `port` any more: a connection is refused, or it is
/// answered by another server that took the port since (tests run side by side), never by the
/// sign-in's listener; and none is accepted and left unanswered, as by a socket a child process
/// inherited.
func expectNoListener(on port: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let probe = try await runProcess(try which("curl", package: "curl"),
                                     ["-s", "--max-time", "5", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)/callback"],
                                     input: nil, environment: [:], timeout: 10)
    let refused = probe.status == 7
    // The listener's 400 page says what it is ("authctl&#39;s sign-in listener").
    let answeredByAnother = probe.status == 0 && !probe.stdout.contains("sign-in listener")
    #expect(refused || answeredByAnother, "\(probe)", sourceLocation: sourceLocation)
}
