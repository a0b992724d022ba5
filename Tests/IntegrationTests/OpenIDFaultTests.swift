// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// OpenID Connect sign-in against a provider that misbehaves on purpose (Support/ScriptedProvider.swift):
/// discovery documents that break a rule, mix-up attacks on the browser's callback, token and
/// device endpoints that refuse, stall or slow down, and claims that cannot name an account.
/// Each fault ends with its exit code and nothing stored: `status` says 1, the keyring holds no
/// item for the service and no event was emitted.
@Suite("OpenID Connect: a provider's faults")
struct OpenIDFaultTests {
    /// A scenario whose browser is the scripted one, bound to `provider` (`server set` must succeed).
    private func bound(_ provider: ScriptedProvider, _ extra: [String] = []) async throws -> Scenario {
        var scenario = try await Scenario()
        scenario.extraEnvironment["BROWSER"] = ScriptedProvider.browser
        let run = try await scenario.authctl(["server", "set", provider.issuer, "--protocol", "oidc", "--client-id", ScriptedProvider.clientID] + extra)
        #expect(run.status == 0, "\(run)")
        return scenario
    }

    /// Nobody signed in, no token item, no event, and (with `bound` false) no binding either.
    private func expectNothingStored(_ scenario: Scenario, bound: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let status = try await scenario.authctl("status", "--json")
        #expect(status.status == 1, "\(status)", sourceLocation: sourceLocation)
        #expect(status.stdout.contains("\"sequence\":0"), "\(status)", sourceLocation: sourceLocation)
        let items = try await scenario.secretTool("search", "--all", "service", scenario.service)
        #expect(!items.stdout.contains("account"), "\(items)", sourceLocation: sourceLocation)
        let settings = (try? String(contentsOfFile: scenario.settingsFile, encoding: .utf8)) ?? ""
        #expect(!settings.contains("\nuser="), "\(settings)", sourceLocation: sourceLocation)
        #expect(settings.contains("\nserver=") == bound, "\(settings)", sourceLocation: sourceLocation)
    }

    // MARK: - Discovery

    @Test("a discovery document that breaks a rule: 76 naming the field, nothing bound", arguments: [
        (#"{"discovery": {"issuer": "http://127.0.0.1:1/elsewhere"}}"#, "'issuer'"),
        (#"{"discovery": {"issuer": null}}"#, "'issuer'"),
        (#"{"discovery": {"token_endpoint": null}}"#, "'token_endpoint'"),
        (#"{"discovery": {"jwks_uri": null}}"#, "'jwks_uri'"),
        (#"{"discovery": {"token_endpoint": "http://idp.example.org/token"}}"#, "'token_endpoint'"),
        (#"{"discovery": {"userinfo_endpoint": "http://idp.example.org/userinfo"}}"#, "'userinfo_endpoint'"),
        (#"{"discovery": {"authorization_endpoint": null, "device_authorization_endpoint": null}}"#, "'authorization_endpoint'"),
        (#"{"discovery": {"token_endpoint": 42}}"#, "'token_endpoint' is not a string"),
        (#"{"discovery": {"issuer": ["http://127.0.0.1:1/p"]}}"#, "'issuer' is not a string"),
        (#"{"discovery": {"authorization_response_iss_parameter_supported": "yes"}}"#, "'authorization_response_iss_parameter_supported'"),
        (#"{"script": {"discovery": [{"status": 200, "body": "<html>not JSON</html>"}]}}"#, "discovery"),
        (#"{"script": {"discovery": [{"status": 200, "body": "[1, 2]"}]}}"#, "discovery"),
        (#"{"script": {"discovery": [{"oversized": 70000}]}}"#, "64 KiB"),
        (#"{"script": {"discovery": [{"status": 404, "body": "not here"}]}}"#, "no OpenID provider at"),
        (#"{"script": {"discovery": [{"status": 302, "headers": {"Location": "https://evil.example/"}}]}}"#, "redirect"),
    ])
    func brokenDiscovery(_ configuration: String, _ mention: String) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: configuration)
        let scenario = try await Scenario()
        let run = try await scenario.authctl("server", "set", provider.issuer, "--protocol", "oidc", "--client-id", ScriptedProvider.clientID)
        #expect(run.status == 76, "\(run)")
        #expect(run.stderr.contains(mention), "\(run)")
        #expect(run.stderr.split(separator: "\n").count == 1, "\(run)")
        try await expectNothingStored(scenario, bound: false)
    }

    @Test("discovery failing (5xx), unreachable or slower than --server-timeout: 69, 69, 75, nothing bound", arguments: [
        (#"{"script": {"discovery": [{"status": 500, "body": "down"}]}}"#, Int32(69)),
        (#"{"script": {"discovery": [{"status": 503, "json": {"error": "maintenance"}}]}}"#, Int32(69)),
        (#"{"script": {"discovery": [{"drop": true}]}}"#, Int32(69)),
        (#"{"script": {"discovery": [{"delay": 5, "default": true}]}}"#, Int32(75)),
    ])
    func discoveryUnavailable(_ configuration: String, _ code: Int32) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: configuration)
        let scenario = try await Scenario()
        let run = try await scenario.authctl("--server-timeout", "2", "server", "set", provider.issuer, "--protocol", "oidc",
                                             "--client-id", ScriptedProvider.clientID)
        #expect(run.status == code, "\(run)")
        #expect(run.seconds < 15, "\(run.seconds) s")
        try await expectNothingStored(scenario, bound: false)
    }

    @Test("nothing listens at the issuer: 69, nothing bound")
    func discoveryUnreachable() async throws {
        // A port held, bound but not listening, for the whole test: connections are refused, and
        // no other test's server can take it (a stopped provider's freed port once answered).
        let held = loopbackSocket(listening: false)
        defer { close(held.descriptor) }
        let issuer = "http://127.0.0.1:\(held.port)"
        let scenario = try await Scenario()
        let gone = await eventually(within: .seconds(10)) {
            (try? await URLSession.shared.data(from: URL(string: issuer + "/.well-known/openid-configuration")!)) == nil
        }
        #expect(gone)
        let run = try await scenario.authctl("server", "set", issuer, "--protocol", "oidc", "--client-id", "c")
        #expect(run.status == 69, "\(run)")
        try await expectNothingStored(scenario, bound: false)
    }

    @Test("sign-in discovers again: a provider that now fails is 69 (5xx) or 76 (another issuer), nothing stored, the binding kept", arguments: [
        (#"{"script": {"discovery": [{"status": 500, "body": "down"}]}}"#, Int32(69)),
        (#"{"discovery": {"issuer": "http://127.0.0.1:1/elsewhere"}}"#, Int32(76)),
    ])
    func rediscoveryFails(_ configuration: String, _ code: Int32) async throws {
        let provider = try await ScriptedProvider()
        let scenario = try await bound(provider)
        try await provider.configure(json: configuration)
        let run = try await scenario.authctl("sign-in", "--timeout", "30")
        #expect(run.status == code, "\(run)")
        #expect(try await provider.count("authorize") == 0)
        try await expectNothingStored(scenario)
    }

    @Test("sign-in --server with a broken discovery binds nothing")
    func signInWithServerBindsNothing() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["discovery": ["jwks_uri": NSNull()]])
        var scenario = try await Scenario()
        scenario.extraEnvironment["BROWSER"] = ScriptedProvider.browser
        let run = try await scenario.authctl("sign-in", "--server", provider.issuer, "--protocol", "oidc", "--client-id", ScriptedProvider.clientID)
        #expect(run.status == 76, "\(run)")
        #expect(run.stderr.contains("'jwks_uri'"), "\(run)")
        try await expectNothingStored(scenario, bound: false)
    }

    // MARK: - The browser flow's callback

    @Test("the browser signs in with the scripted provider (no ID token: who signed in comes from userinfo)")
    func browserSignsIn() async throws {
        let provider = try await ScriptedProvider()
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "Signed in to \(scenario.service) as ada@example.org.\n")
        let exchange = try #require(try await provider.tokenRequests("code").first)
        let fields = exchange["fields"] as? [String: String] ?? [:]
        #expect(fields["code_verifier"]?.count == 43)
        #expect(try await provider.count("userinfo") == 1)
    }

    @Test("every request authctl sends the provider carries Accept and User-Agent; refresh and revocation carry the client id")
    func requestHeaders() async throws {
        let provider = try await ScriptedProvider()
        let scenario = try await bound(provider)
        #expect(try await scenario.authctl("sign-in", "--timeout", "30").status == 0)
        #expect(try await scenario.authctl("token", "--refresh").status == 0)
        #expect(try await scenario.authctl("sign-out").status == 0)
        // The authorization request is the browser's, not authctl's.
        let sent = try await provider.log().filter { $0["endpoint"] as? String != "authorize" }
        #expect(Set(sent.compactMap { $0["endpoint"] as? String }) == ["discovery", "token", "userinfo", "revoke"])
        #expect(sent.allSatisfy { $0["accept"] as? String == "application/json" }, "\(sent)")
        #expect(sent.allSatisfy { ($0["userAgent"] as? String)?.hasPrefix("authctl/") == true }, "\(sent)")
        let refresh = try await provider.tokenRequests("refresh").first?["fields"] as? [String: String]
        #expect(refresh?["client_id"] == ScriptedProvider.clientID, "\(refresh ?? [:])")
        let revoke = try await provider.log().first { $0["endpoint"] as? String == "revoke" }?["fields"] as? [String: String]
        #expect(revoke?["token"]?.hasPrefix("refresh-") == true, "\(revoke ?? [:])")
        #expect(revoke?["client_id"] == ScriptedProvider.clientID, "\(revoke ?? [:])")
    }

    @Test("mix-up and broken callbacks (RFC 9207): iss missing when announced, another iss, no code, two codes, an error", arguments: [
        (true, #"[["code", "$code"], ["state", "$state"]]"#, Int32(76), "'iss'"),
        (true, #"[["code", "$code"], ["state", "$state"], ["iss", "http://127.0.0.1:1/p"]]"#, Int32(76), "other than"),
        (false, #"[["code", "$code"], ["state", "$state"], ["iss", "http://127.0.0.1:1/p"]]"#, Int32(76), "other than"),
        (false, #"[["code", "$code"], ["state", "$state"], ["iss", "$iss"], ["iss", "$iss"]]"#, Int32(76), "other than"),
        (false, #"[["state", "$state"], ["iss", "$iss"]]"#, Int32(76), "without a single authorization code"),
        (false, #"[["code", ""], ["state", "$state"], ["iss", "$iss"]]"#, Int32(76), "without a single authorization code"),
        (false, #"[["code", "$code"], ["code", "$code"], ["state", "$state"], ["iss", "$iss"]]"#, Int32(76), "without a single authorization code"),
        (true, #"[["error", "access_denied"], ["state", "$state"]]"#, Int32(77), "the sign-in was refused at the provider"),
        (true, #"[["error", "server_error"], ["error_description", "the database\u001b[2J is\u0007 down\nforged: line"], ["state", "$state"]]"#,
         Int32(69), "'server_error': the database[2J is downforged: line"),
    ] as [(Bool, String, Int32, String)])
    func brokenCallback(_ announced: Bool, _ callback: String, _ code: Int32, _ mention: String) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"discovery": {"authorization_response_iss_parameter_supported": \#(announced)}, "callback": \#(callback)}"#)
        var scenario = try await bound(provider)
        let page = scenario.sandbox.directory + "/page-\(UUID().uuidString).html"
        scenario.extraEnvironment["SCRIPTED_BROWSER_PAGE"] = page
        let run = try await scenario.authctl("sign-in", "--timeout", "30")
        #expect(run.status == code, "\(run)")
        #expect(run.stderr.contains(mention), "\(run)")
        #expect(!run.stderr.contains("\u{1b}"), "\(run)")
        #expect(run.stderr.split(separator: "\n").filter { $0.hasPrefix("authctl: ") }.count == 1, "\(run)")
        // The code was never exchanged.
        #expect(try await provider.tokenRequests("code").isEmpty)
        try await expectNothingStored(scenario)
        _ = await eventually(within: .seconds(10)) { FileManager.default.fileExists(atPath: page) }
        let body = (try? String(contentsOfFile: page, encoding: .utf8)) ?? ""
        #expect(!body.contains("Signed in"), "\(body)")
        #expect(!body.contains("\u{1b}"), "\(body)")
    }

    // MARK: - The code exchange

    @Test("the token endpoint refuses the code: invalid_grant 77, another error 69, a 5xx 69, a token type other than Bearer 76, no answer 69, too late 75", arguments: [
        (#"[{"status": 400, "json": {"error": "invalid_grant", "error_description": "code expired"}}]"#, Int32(77), "did not accept"),
        (#"[{"status": 401, "json": {"error": "invalid_client", "error_description": "who\u001b[2J are you"}}]"#, Int32(69), "who[2J are you"),
        (#"[{"status": 400, "body": "no JSON here"}]"#, Int32(69), "HTTP 400"),
        (#"[{"status": 502, "body": "bad gateway"}]"#, Int32(69), "HTTP 502"),
        (#"[{"tokens": {"token_type": "mac"}}]"#, Int32(76), "'mac'"),
        (#"[{"tokens": {"access_token": null}}]"#, Int32(76), "without an access token"),
        (#"[{"oversized": 70000}]"#, Int32(76), "64 KiB"),
        (#"[{"drop": true}]"#, Int32(69), "authctl: "),
        (#"[{"delay": 5, "default": true}]"#, Int32(75), "authctl: "),
    ])
    func codeExchangeRefused(_ script: String, _ code: Int32, _ mention: String) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"script": {"token": \#(script)}}"#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("--server-timeout", "2", "sign-in", "--timeout", "30")
        #expect(run.status == code, "\(run)")
        #expect(run.stderr.contains(mention), "\(run)")
        #expect(!run.stderr.contains("\u{1b}"), "\(run)")
        #expect(try await provider.tokenRequests("code").count == 1)
        try await expectNothingStored(scenario)
    }

    @Test("sign-in --server whose code exchange is refused keeps no binding: 77")
    func signInWithServerRefused() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"script": {"token": [{"status": 400, "json": {"error": "invalid_grant"}}]}}"#)
        var scenario = try await Scenario()
        scenario.extraEnvironment["BROWSER"] = ScriptedProvider.browser
        let run = try await scenario.authctl("sign-in", "--server", provider.issuer, "--protocol", "oidc", "--client-id", ScriptedProvider.clientID,
                                             "--timeout", "30")
        #expect(run.status == 77, "\(run)")
        try await expectNothingStored(scenario, bound: false)
    }

    @Test("verify against a provider that now misbehaves: its exit code, and the session as it was", arguments: [
        (#"{"callback": [["code", "$code"], ["state", "$state"], ["iss", "http://127.0.0.1:1/p"]]}"#, Int32(76)),
        (#"{"callback": [["error", "access_denied"], ["state", "$state"]]}"#, Int32(77)),
        (#"{"script": {"token": [{"status": 500, "body": "down"}]}}"#, Int32(69)),
        (#"{"userinfo": {"email": "grace@example.org", "sub": "sub-grace"}}"#, Int32(77)),
    ])
    func verifyFaults(_ configuration: String, _ code: Int32) async throws {
        let provider = try await ScriptedProvider()
        let scenario = try await bound(provider)
        #expect(try await scenario.authctl("sign-in", "--timeout", "30").status == 0)
        let before = try await scenario.secretTool("lookup", "service", scenario.service, "account", "ada@example.org")
        try await provider.configure(json: configuration)
        let run = try await scenario.authctl("verify", "--timeout", "30")
        #expect(run.status == code, "\(run)")
        let after = try await scenario.secretTool("lookup", "service", scenario.service, "account", "ada@example.org")
        #expect(after.stdout == before.stdout)
        let status = try await scenario.authctl("status", "--json")
        #expect(status.status == 0, "\(status)")
        #expect(status.stdout.contains("\"sequence\":1"), "\(status)")
    }

    // MARK: - The device flow

    /// The times between the device polls the provider logged.
    private func pollGaps(_ provider: ScriptedProvider) async throws -> [Double] {
        let times = try await provider.tokenRequests("device_poll").compactMap { $0["time"] as? Double }
        return zip(times, times.dropFirst()).map { $1 - $0 }
    }

    @Test("slow_down makes the interval 5 s longer for this and every later poll")
    func slowDown() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"""
            {"device": {"interval": 1}, "script": {"token": [
              {"status": 400, "json": {"error": "slow_down"}},
              {"status": 400, "json": {"error": "authorization_pending"}}]}}
            """#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "60")
        #expect(run.status == 0, "\(run)")
        let gaps = try await pollGaps(provider)
        #expect(gaps.count == 2, "\(gaps)")
        #expect(gaps.allSatisfy { $0 >= 6 - 0.5 }, "\(gaps)")
    }

    @Test("a poll answered 503 (or not at all) is tried again after twice the interval", arguments: [
        #"{"status": 503, "body": "busy"}"#, #"{"drop": true}"#,
    ])
    func pollWithoutAnswer(_ answer: String) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"device": {"interval": 2}, "script": {"token": [\#(answer)]}}"#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "60")
        #expect(run.status == 0, "\(run)")
        let gaps = try await pollGaps(provider)
        #expect(gaps.count == 1, "\(gaps)")
        #expect(gaps.allSatisfy { $0 >= 4 - 0.5 }, "\(gaps)")
    }

    @Test("the person refuses (access_denied) 77; the device code expires (expired_token) 75; another error 69", arguments: [
        (#"{"status": 400, "json": {"error": "access_denied"}}"#, Int32(77)),
        (#"{"status": 400, "json": {"error": "expired_token"}}"#, Int32(75)),
        (#"{"status": 400, "json": {"error": "invalid_client", "error_description": "gone"}}"#, Int32(69)),
        (#"{"tokens": {"token_type": "mac"}}"#, Int32(76)),
    ])
    func pollRefused(_ answer: String, _ code: Int32) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"pending_polls": 1, "script": {"token": [{"default": true}, \#(answer)]}}"#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "60")
        #expect(run.status == code, "\(run)")
        #expect(try await provider.tokenRequests("device_poll").count == 2)
        try await expectNothingStored(scenario)
    }

    @Test("a device authorization answer without what the person needs: 76", arguments: [
        #"{"user_code": null}"#, #"{"verification_uri": null}"#, #"{"expires_in": null}"#, #"{"device_code": null}"#,
        #"{"verification_uri": "javascript:alert(1)"}"#, #"{"verification_uri": "file:///etc/passwd"}"#,
        #"{"expires_in": -5}"#, #"{"expires_in": "soon"}"#, #"{"user_code": "\u001b\u0007"}"#,
    ])
    func brokenDeviceAnswer(_ overrides: String) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"device": \#(overrides)}"#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == 76, "\(run)")
        #expect(!run.stderr.contains("To sign in, open"), "\(run)")
        #expect(try await provider.tokenRequests("device_poll").isEmpty)
        try await expectNothingStored(scenario)
    }

    @Test("the device authorization endpoint fails (69), answers nonsense (76) or too late (75): nothing stored", arguments: [
        (#"{"status": 500, "body": "down"}"#, Int32(69)),
        (#"{"status": 400, "json": {"error": "invalid_scope", "error_description": "no\u001b[2J such scope"}}"#, Int32(69)),
        (#"{"status": 200, "body": "<html>device</html>"}"#, Int32(76)),
        (#"{"oversized": 70000}"#, Int32(76)),
        (#"{"status": 302, "headers": {"Location": "https://evil.example/"}}"#, Int32(76)),
        (#"{"drop": true}"#, Int32(69)),
        (#"{"delay": 5, "default": true}"#, Int32(75)),
    ])
    func deviceEndpointFails(_ answer: String, _ code: Int32) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"script": {"device": [\#(answer)]}}"#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("--server-timeout", "2", "sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == code, "\(run)")
        #expect(!run.stderr.contains("\u{1b}"), "\(run)")
        #expect(!run.stderr.contains("To sign in, open"), "\(run)")
        try await expectNothingStored(scenario)
    }

    @Test("a poll slower than what is left of --timeout does not hold the sign-in past it: 75 at about --timeout")
    func slowPollAtTheDeadline() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"pending_polls": 1000, "script": {"token": [{"delay": 9, "default": true}]}}"#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("--server-timeout", "10", "sign-in", "--flow", "device", "--timeout", "3")
        #expect(run.status == 75, "\(run)")
        #expect(run.seconds < 6, "\(run.seconds) s for --timeout 3")
        try await expectNothingStored(scenario)
    }

    @Test("an interval longer than --timeout: the person still has until --timeout passes, then 75")
    func intervalLongerThanTimeout() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["pending_polls": 1000, "device": ["interval": 30]])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "3")
        #expect(run.status == 75, "\(run)")
        #expect(run.seconds >= 2.5, "\(run.seconds) s for --timeout 3")
        #expect(run.seconds < 8, "\(run.seconds) s for --timeout 3")
        #expect(try await provider.tokenRequests("device_poll").isEmpty)
        try await expectNothingStored(scenario)
    }

    @Test("a user code with control characters and ANSI escapes is printed without them")
    func userCodeStripped() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"""
            {"device": {"user_code": "AB\u001b[31mCD\u0007EF\r\nforged"}}
            """#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains(" and enter the code AB[31mCDEFforged\n"), "\(run)")
        #expect(!run.stderr.contains("\u{1b}"), "\(run)")
        #expect(!run.stderr.contains("\u{07}"), "\(run)")
        #expect(run.stderr.contains("\nOr open \(provider.issuer)/activate?user_code=WDJB-MJHT\n"), "\(run)")
    }

    @Test("once tokens arrived the device code is never sent again")
    func deviceCodeSentUntilTokens() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["pending_polls": 2])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        let refreshed = try await scenario.authctl("token", "--refresh")
        #expect(refreshed.status == 0, "\(refreshed)")
        // Nothing is left to wait for: the sign-in process has ended, so it polls no more, and
        // the provider logged the refresh made after it, so what the sign-in sent is logged too.
        #expect(try await provider.tokenRequests("refresh").count == 1)
        let polls = try await provider.tokenRequests("device_poll")
        #expect(polls.count == 3, "\(polls)")
        #expect(polls.last?["answered"] as? String == "tokens")
        let deviceCode = (polls.first?["fields"] as? [String: String])?["device_code"] ?? "-"
        let later = try await provider.log().filter { ($0["fields"] as? [String: String])?["device_code"] == deviceCode }
        #expect(later.count == 3, "\(later)")
    }

    @Test("a device code that expires before --timeout: 75 when it expires")
    func deviceCodeExpires() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["pending_polls": 1000, "device": ["expires_in": 4, "interval": 1]])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "60")
        #expect(run.status == 75, "\(run)")
        #expect(run.stderr.contains("expired"), "\(run)")
        #expect(run.seconds >= 2.5, "\(run.seconds) s")
        #expect(run.seconds < 10, "\(run.seconds) s")
        try await expectNothingStored(scenario)
    }

    // MARK: - Who signed in

    @Test("no ID token and no userinfo endpoint: 76")
    func nobodyNamed() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["discovery": ["userinfo_endpoint": NSNull()]])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == 76, "\(run)")
        #expect(run.stderr.contains("no userinfo endpoint"), "\(run)")
        try await expectNothingStored(scenario)
    }

    @Test("claims that cannot name an account: 76", arguments: [
        (#"{"userinfo": {"employee_id": null}}"#, ["--account-claim", "employee_id"]),
        (#"{"userinfo": {"employee_id": 42}}"#, ["--account-claim", "employee_id"]),
        (#"{"userinfo": {"employee_id": "x\u0007y"}}"#, ["--account-claim", "employee_id"]),
        (#"{"userinfo": {"email": " ada@example.org"}}"#, []),
        (#"{"userinfo": {"email": "ada\u001b@example.org"}}"#, []),
        (#"{"userinfo": {"email": null, "preferred_username": "\#(String(repeating: "a", count: 300))"}}"#, []),
        (#"{"userinfo": {"sub": null}}"#, []),
    ] as [(String, [String])])
    func noAccount(_ configuration: String, _ extra: [String]) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: configuration)
        let scenario = try await bound(provider, extra)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == 76, "\(run)")
        #expect(!run.stderr.contains("\u{1b}"), "\(run)")
        try await expectNothingStored(scenario)
    }

    @Test("userinfo failing (69), answering nonsense (76) or too late (75): nothing stored", arguments: [
        (#"{"status": 500, "body": "down"}"#, Int32(69)),
        (#"{"status": 200, "body": "not JSON"}"#, Int32(76)),
        (#"{"status": 200, "body": "[\"sub\"]"}"#, Int32(76)),
        (#"{"oversized": 70000}"#, Int32(76)),
        (#"{"status": 401, "json": {"error": "invalid_token"}}"#, Int32(76)),
        (#"{"delay": 5, "default": true}"#, Int32(75)),
    ])
    func userinfoFails(_ answer: String, _ code: Int32) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"script": {"userinfo": [\#(answer)]}}"#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("--server-timeout", "2", "sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == code, "\(run)")
        try await expectNothingStored(scenario)
    }

    @Test("an e-mail address the provider has not verified is not the account: preferred_username is")
    func unverifiedEmail() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["userinfo": ["email_verified": false]])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        let whoami = try await scenario.authctl("whoami")
        #expect(whoami.output == "ada", "\(whoami)")
        let settings = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        #expect(!settings.contains("ada@example.org"), "\(settings)")
    }

    @Test("a name claim with control characters is not the display name: the account id is")
    func nameWithControls() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["userinfo": ["name": "Ada\u{1b}[2J Lovelace"]])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        let whoami = try await scenario.authctl("whoami", "--json")
        let document = try JSONSerialization.jsonObject(with: Data(whoami.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(document["name"] as? String == "ada@example.org", "\(whoami)")
    }

    @Test("a verification_uri_complete that is not an http or https URL is not shown; the sign-in goes on")
    func completeURINotShown() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["device": ["verification_uri_complete": "javascript:alert(1)"]])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", "device", "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        #expect(!run.stderr.contains("javascript:"), "\(run)")
    }

    // MARK: - The ID token

    @Test("a valid ID token names who signed in: no userinfo request, the ID token kept")
    func validIDToken() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["id_token": true])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        #expect(try await provider.count("userinfo") == 0)
        let idToken = try await scenario.authctl("token", "--id-token")
        #expect(idToken.output.split(separator: ".").count == 3, "\(idToken)")
    }

    @Test("an ID token that fails a check: 76 naming it, nothing stored, its refresh token revoked", arguments: [
        (#"{"id_token_signing": "tampered"}"#, "signature"),
        (#"{"id_token_signing": "other_key"}"#, "signature"),
        (#"{"id_token_signing": "none"}"#, "none"),
        (#"{"id_token_signing": "hs256"}"#, "HS256"),
        (#"{"id_token_header": {"kid": "k9"}}"#, "k9"),
        (#"{"id_token_claims": {"iss": "http://127.0.0.1:1/p"}}"#, "iss"),
        (#"{"id_token_claims": {"aud": "someone-else"}}"#, "another client"),
        (#"{"id_token_claims": {"aud": ["scripted-client", "someone-else"]}}"#, "azp"),
        (#"{"id_token_claims": {"exp": {"$now": -600}, "iat": {"$now": -900}}}"#, "exp"),
        (#"{"id_token_claims": {"iat": {"$now": 900}}}"#, "ahead"),
        (#"{"script": {"token": [{"tokens": {"id_token": "not.a-jws"}}]}}"#, "JWS"),
        (#"{"script": {"token": [{"tokens": {"id_token": "abc"}}]}}"#, "JWS"),
        (#"{"id_token_claims": {"nonce": "not-the-one-sent"}}"#, "nonce"),
        (#"{"id_token_claims": {"nonce": null}}"#, "nonce"),
    ])
    func badIDToken(_ configuration: String, _ mention: String) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["id_token": true])
        try await provider.configure(json: configuration)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--timeout", "30")
        #expect(run.status == 76, "\(run)")
        #expect(run.stderr.contains(mention), "\(run)")
        #expect(try await provider.count("revoke") == 1)
        try await expectNothingStored(scenario)
    }

    @Test("userinfo about another subject than the ID token's: 76, nothing stored")
    func userinfoOfAnotherSubject() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["id_token": true, "id_token_claims": ["email": NSNull()], "userinfo": ["sub": "sub-mallory"]])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--timeout", "30")
        #expect(run.status == 76, "\(run)")
        #expect(try await provider.count("userinfo") == 1)
        try await expectNothingStored(scenario)
    }

    @Test("a refresh whose new ID token names another subject: 76, and the stored tokens stay as they were")
    func refreshForAnotherSubject() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(["id_token": true])
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        let before = try await scenario.secretTool("lookup", "service", scenario.service, "account", "ada@example.org")
        try await provider.configure(["id_token_claims": ["sub": "sub-mallory"]])
        // Once the stored access token has expired, nothing can be printed instead of a refresh.
        try scenario.expireAccessToken()
        let due = try await scenario.authctl("token")
        #expect(due.status == 76, "\(due)")
        #expect(due.stderr.contains("another subject"), "\(due)")
        #expect(try await provider.tokenRequests("refresh").count == 1)
        let after = try await scenario.secretTool("lookup", "service", scenario.service, "account", "ada@example.org")
        #expect(after.stdout == before.stdout)
        #expect(try await scenario.authctl("status").status == 0)
    }

    @Test("the signing keys failing (69), missing (76) or not a key set (76): nothing stored", arguments: [
        (#"{"status": 500, "body": "down"}"#, Int32(69)),
        (#"{"status": 404, "body": "gone"}"#, Int32(76)),
        (#"{"status": 200, "body": "not JSON"}"#, Int32(76)),
        (#"{"status": 200, "json": {"keys": []}}"#, Int32(76)),
        (#"{"oversized": 70000}"#, Int32(76)),
    ])
    func signingKeysFail(_ answer: String, _ code: Int32) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"id_token": true, "script": {"jwks": [\#(answer), \#(answer)]}}"#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--timeout", "30")
        #expect(run.status == code, "\(run)")
        try await expectNothingStored(scenario)
    }

    @Test("an ID token naming a key the last fetch did not have: the keys are fetched again, and the sign-in goes on")
    func keyRotated() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"id_token": true, "script": {"jwks": [{"status": 200, "json": {"keys": [{"kty": "oct", "kid": "old", "k": "AAAA"}]}}]}}"#)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        #expect(try await provider.count("jwks") == 2)
    }

    @Test("ID tokens that pass: no kid with a one-key set; a nonce in the device flow, which sends none", arguments: [
        (#"{"id_token_header": {"kid": null}}"#, "browser"),
        (#"{"id_token_claims": {"nonce": "anything"}}"#, "device"),
    ])
    func acceptedIDTokens(_ configuration: String, _ flow: String) async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"id_token": true}"#)
        try await provider.configure(json: configuration)
        let scenario = try await bound(provider)
        let run = try await scenario.authctl("sign-in", "--flow", flow, "--timeout", "30")
        #expect(run.status == 0, "\(run)")
        #expect(try await provider.count("userinfo") == 0)
    }

    @Test("a refresh: without an ID token the stored one stays; a new one may carry a nonce; one that fails a check changes nothing (the valid stored token is printed, with a warning)")
    func refreshIDTokens() async throws {
        let provider = try await ScriptedProvider()
        try await provider.configure(json: #"{"id_token": true}"#)
        let scenario = try await bound(provider)
        #expect(try await scenario.authctl("sign-in", "--timeout", "30").status == 0)
        let first = try await scenario.authctl("token", "--id-token")
        try await provider.configure(json: #"{"script": {"token": [{"tokens": {"id_token": null}}]}}"#)
        #expect(try await scenario.authctl("token", "--refresh").status == 0)
        let kept = try await scenario.authctl("token", "--id-token")
        #expect(kept.output == first.output, "\(kept)")
        try await provider.configure(json: #"{"id_token_claims": {"nonce": "from-the-first-sign-in"}}"#)
        let withNonce = try await scenario.authctl("token", "--refresh")
        #expect(withNonce.status == 0, "\(withNonce)")
        let renewed = try await scenario.authctl("token", "--id-token")
        #expect(renewed.output != first.output, "\(renewed)")
        let before = try await scenario.secretTool("lookup", "service", scenario.service, "account", "ada@example.org")
        try await provider.configure(json: #"{"id_token_signing": "tampered", "id_token_claims": {}}"#)
        let tampered = try await scenario.authctl("token", "--refresh")
        #expect(tampered.status == 0, "\(tampered)")
        #expect(tampered.stderr.contains("signature"), "\(tampered)")
        let after = try await scenario.secretTool("lookup", "service", scenario.service, "account", "ada@example.org")
        #expect(after.stdout == before.stdout)
    }
}
