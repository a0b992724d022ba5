// SPDX-License-Identifier: Apache-2.0
import AuthController
import Foundation
import TestSupport
import Testing

/// `authctl` against a real HTTP token server on 127.0.0.1 (the README, "Remote accounts: a token
/// server"): both protocols, the token's life, single flight across processes, and what a hostile
/// or failing server does.
@Suite("Remote accounts against a token server")
struct RemoteAccountTests {
    /// A server and a scenario where alice is signed in and her access token has expired, by
    /// the expiry written into the settings file (the server would still take the token).
    func signedInWithAnExpiredToken(_ settings: [String: any Sendable] = [:]) async throws -> (TokenServer, Scenario) {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 3600].merging(settings) { $1 })
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        try scenario.expireAccessToken()
        return (server, scenario)
    }

    /// Starts `count` processes at once, then waits for them all.
    func startAll(_ count: Int, _ scenario: Scenario, _ arguments: [String]) async throws -> [Run] {
        var started: [Spawned] = []
        for _ in 0..<count { started.append(try await scenario.start(arguments)) }
        var runs: [Run] = []
        for spawned in started { runs.append(await spawned.wait(timeout: 60)) }
        return runs
    }

    func json(_ run: Run) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any] ?? [:]
    }

    @Test("oauth2 round trip: bind, sign in, status, a cached token, a forced refresh, accounts, sign-out revokes")
    func oauth2RoundTrip() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice@example.org": "s3cret pw"]])
        let scenario = try await Scenario()
        var run = try await scenario.authctl(["server", "set", server.oauth2.uppercased().replacingOccurrences(of: "/OAUTH/TOKEN", with: "/oauth/token"),
                                        "--client-id", "cli", "--scope", "openid profile", "--revoke-url", server.revoke])
        #expect(run.status == 0, "\(run)")
        run = try await scenario.authctl("server", "show", "--json")
        #expect(json(run)["server"] as? String == server.oauth2, "\(run)")
        #expect(json(run)["clientId"] as? String == "cli", "\(run)")
        run = try await scenario.authctl("sign-in", "alice@example.org", "--password-stdin", stdin: "s3cret pw\n")
        #expect(run.status == 0, "\(run)")
        let login = try #require(try server.log().last)
        #expect((login["fields"] as? [String: String]) == ["grant_type": "password", "username": "alice@example.org", "password": "s3cret pw",
                                                          "client_id": "cli", "scope": "openid profile"])
        let headers = login["headers"] as? [String: String] ?? [:]
        #expect(headers["accept"] == "application/json", "\(headers)")
        #expect(headers["user-agent"]?.hasPrefix("authctl/") == true, "\(headers)")

        run = try await scenario.authctl("status", "--json")
        let status = json(run)
        #expect(status["signedIn"] as? Bool == true)
        #expect(status["server"] as? String == server.oauth2)
        #expect(status["accessTokenExpiresAt"] is String, "\(run)")
        #expect(status["refreshTokenExpiresAt"] is String, "\(run)")

        let requests = try server.log().count
        run = try await scenario.authctl("token")
        let accepted = try server.accepts(run.output), requestsAfter = try server.log().count
        #expect(run.status == 0, "\(run)")
        #expect(accepted, "\(run)")
        #expect(requestsAfter == requests, "\(run)")
        let first = run.output
        run = try await scenario.authctl("token", "--refresh", "--json")
        let refreshed = json(run)["accessToken"] as? String ?? ""
        let refreshedAccepted = try server.accepts(refreshed), refreshes = try server.count("refresh")
        #expect(run.status == 0, "\(run)")
        #expect(refreshed != first, "\(run)")
        #expect(refreshedAccepted, "\(run)")
        #expect(refreshes == 1, "\(run)")
        #expect(json(run)["tokenType"] as? String == "Bearer")
        #expect(json(run)["user"] as? String == "alice@example.org")

        run = try await scenario.authctl("accounts")
        #expect(run.stdout == "* alice@example.org\n", "\(run)")
        run = try await scenario.authctl("server", "unset")
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("sign out first"), "\(run)")
        run = try await scenario.authctl("sign-out")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.isEmpty, "\(run)")
        #expect(try server.log().last?["endpoint"] as? String == "revoke")
        #expect(try await scenario.secretTool("search", "service", scenario.service).stdout.isEmpty)
        run = try await scenario.authctl("server", "show")
        #expect(run.status == 0, "the binding outlives sign-out: \(run)")
        #expect(run.stdout.contains("server: \(server.oauth2)"), "the binding outlives sign-out: \(run)")
        run = try await scenario.authctl("server", "unset")
        #expect(run.status == 0)
        run = try await scenario.authctl("server", "show", "--json")
        #expect(run.status == 1, "\(run)")
        #expect(json(run)["server"] is NSNull, "\(run)")
    }

    @Test("json protocol: register, then log in; refresh with the refresh token as Bearer; 409 and 401")
    func jsonProtocol() async throws {
        let server = try await TokenServer()
        let scenario = try await Scenario()
        var run = try await scenario.authctl("sign-in", "bob", "--server", server.json, "--protocol", "json", "--register", "--password-stdin", stdin: "pw")
        #expect(run.status == 0, "\(run)")
        #expect(try server.log().last?["path"] as? String == "/api/register")
        run = try await scenario.authctl("token", "--refresh")
        let refresh = try #require(try server.log().last)
        #expect(refresh["path"] as? String == "/api/refresh_tokens")
        #expect((refresh["authorization"] as? String)?.hasPrefix("Bearer refresh-") == true)
        run = try await scenario.authctl("sign-out")
        run = try await scenario.authctl("sign-in", "bob", "--register", "--password-stdin", stdin: "pw")
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("already has an account"), "\(run)")
        run = try await scenario.authctl("sign-in", "bob", "--password-stdin", stdin: "wrong")
        #expect(run.status == 77, "\(run)")
        #expect(try await scenario.authctl("status").status == 1)
    }

    @Test("twelve `authctl token` at once with an expired token: exactly one refresh, one token, which the server accepts")
    func singleFlightAcrossProcesses() async throws {
        let (server, scenario) = try await signedInWithAnExpiredToken(["refresh_delay": 0.5])
        // The refreshed token lives long: a process that starts late must find it fresh.
        try server.configure(["access_lifetime": 300])
        let runs = try await startAll(12, scenario, ["token"])
        #expect(runs.allSatisfy { $0.status == 0 }, "\(runs)")
        #expect(Set(runs.map(\.output)).count == 1, "\(runs.map(\.output))")
        #expect(try server.count("refresh") == 1)
        #expect(try server.accepts(runs[0].output))
    }

    @Test("processes arriving one after another while a refresh is under way: still exactly one refresh")
    func staggeredSingleFlight() async throws {
        let (server, scenario) = try await signedInWithAnExpiredToken()
        try server.configure(["access_lifetime": 300, "refresh_delay": 0.3])
        var started: [Spawned] = []
        for _ in 0..<12 {
            started.append(try await scenario.start(["token"]))
            try await Task.sleep(for: .milliseconds(30))  // a spread of arrivals across the refresh, on purpose
        }
        var runs: [Run] = []
        for spawned in started { runs.append(await spawned.wait(timeout: 60)) }
        #expect(runs.allSatisfy { $0.status == 0 }, "\(runs)")
        #expect(Set(runs.map(\.output)).count == 1, "\(runs)")
        #expect(try server.count("refresh") == 1)
    }

    @Test("twelve processes waiting on a refresh the server refuses: all exit 77, one request, one `expired` event")
    func waitersOnAnEndedSession() async throws {
        let (server, scenario) = try await signedInWithAnExpiredToken()
        // The refusal takes 3 s, so that all twelve have read the session before it ends: one
        // started after the end finds nobody signed in (1), which is right but not this test.
        try server.configure(["revoke_all": true, "refresh_delay": 3])
        let listener = try scenario.listener()
        let runs = try await startAll(12, scenario, ["token"])
        #expect(runs.allSatisfy { $0.status == 77 }, "\(runs)")
        #expect(runs.allSatisfy { $0.stderr.contains("sign in again") }, "\(runs)")
        #expect(try server.count("refresh") == 1)
        let events = try await collect(1, from: listener)
        #expect(events.map(\.reason) == [.expired])
    }

    @Test("a slow refresh of one service does not delay a sign-in to another")
    func slowRefreshBlocksNoOneElse() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "refresh_delay": 4])
        let slow = try await Scenario()
        var other = try await Scenario(sandbox: slow.sandbox)
        other.extraEnvironment["XDG_CONFIG_HOME"] = slow.configHome  // the same settings file and lock
        try await slow.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        let refreshing = try await slow.start(["token", "--refresh"])
        try #require(try await eventually(within: .seconds(20)) { try server.count("refresh") > 0 }, "\(refreshing.stderr)")
        let run = try await other.authctl("sign-in", "carol", "--password-stdin", stdin: "pw")
        #expect(run.status == 0, "\(run)")
        #expect(run.seconds < 3, "\(run)")
        #expect(await refreshing.wait().status == 0)
    }

    @Test("a server clock three hours ahead or behind changes nothing visible", arguments: [10_800, -10_800])
    func clockOffset(_ offset: Int) async throws {
        for (url, tokenProtocol) in [({ (s: TokenServer) in s.oauth2 }, "oauth2"), ({ (s: TokenServer) in s.json }, "json")] {
            let server = try await TokenServer()
            try server.configure(["accounts": ["alice": "pw"], "clock_offset": offset, "access_lifetime": 600])
            let scenario = try await Scenario()
            let before = AuthController.systemClock()
            try await scenario.authctl("sign-in", "alice", "--server", url(server), "--protocol", tokenProtocol, "--password-stdin", stdin: "pw").expect(0)
            let status = json(try await scenario.authctl("status", "--json"))
            let expiry = try #require(Timestamp.microseconds(rfc3339: status["accessTokenExpiresAt"] as? String ?? ""))
            #expect(expiry > before + 590_000_000, "\(tokenProtocol): \(status)")
            #expect(expiry < AuthController.systemClock() + 610_000_000, "\(tokenProtocol): \(status)")
            let run = try await scenario.authctl("token")
            let refreshes = try server.count("refresh")
            #expect(run.status == 0, "\(tokenProtocol): \(run)")
            #expect(refreshes == 0, "\(tokenProtocol): \(run)")
        }
    }

    @Test("the server ends the session: token is 77 saying to sign in again; a listener sees one `expired` event")
    func sessionEnds() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"]])
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        try server.configure(["revoke_all": true])
        let listener = try scenario.listener()
        let run = try await scenario.authctl("token", "--refresh")
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.contains("sign in again"), "\(run)")
        #expect(run.stdout.isEmpty, "\(run)")
        let events = try await collect(1, from: listener)
        #expect(events.map(\.reason) == [.expired])
        #expect(events.first?.account?.rawValue == "alice")
        #expect(try await scenario.authctl("status").status == 1)
        #expect(try await scenario.secretTool("search", "service", scenario.service).stdout.isEmpty)
    }

    @Test("a hostile or failing server: 69 failing, 75 silent, 76 not understood, one line, nothing changes", arguments: [
        (#"{"status": 200, "body": "not json"}"#, Int32(76)),
        (#"{"oversized": 70000}"#, 76),
        (#"{"status": 302, "headers": {"Location": "https://evil.example/"}}"#, 76),
        (#"{"status": 200, "body": "{\"access_token\":\"a\",\"token_type\":\"mac\"}"}"#, 76),
        (#"{"status": 503, "body": "down"}"#, 69),
        (#"{"status": 400, "body": "{\"error\":\"invalid_client\",\"error_description\":\"bad client\\u001b[2J\\nforged\"}"}"#, 69),
        (#"{"drop": true}"#, 69),
        (#"{"slow": 3}"#, 75),
    ])
    func hostileServer(_ answerJSON: String, _ code: Int32) async throws {
        let answer = try JSONSerialization.jsonObject(with: Data(answerJSON.utf8))
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "scripted": [answer]])
        let scenario = try await Scenario()
        let run = try await scenario.authctl(["--server-timeout", "1", "sign-in", "alice", "--server", server.oauth2, "--password-stdin"], input: Array("pw".utf8))
        #expect(run.status == code, "\(run)")
        #expect(run.stderr.hasPrefix("authctl: "), "\(run)")
        #expect(run.stderr.split(separator: "\n").count == 1, "\(run)")
        #expect(!run.stderr.contains("\u{1b}"), "\(run)")
        #expect(try await scenario.authctl("status").status == 1)
        #expect(try await scenario.authctl("server", "show").status == 1, "a failed sign-in keeps no binding")
    }

    @Test("the server failing while the token is still valid: printed anyway, exit 0, with a warning")
    func printedAnyway() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"]])
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        try server.configure(["scripted": [["status": 500, "body": "down"]]])
        let run = try await scenario.authctl("token", "--refresh")
        let accepted = try server.accepts(run.output)
        #expect(run.status == 0, "\(run)")
        #expect(accepted, "\(run)")
        #expect(run.stderr.contains("still valid"), "\(run)")
    }

    @Test("server URLs that break a rule are 65 and store nothing", arguments: [
        "http://example.com/token", "https://user:pw@example.com/", "https://example.com/#x", "", "example.com", "ftp://example.com/",
    ])
    func badServerURLs(_ url: String) async throws {
        let scenario = try await Scenario()
        let run = try await scenario.authctl("server", "set", url)
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.hasPrefix("authctl: invalid server URL"), "\(run)")
        #expect(!FileManager.default.fileExists(atPath: scenario.settingsFile))
    }

    @Test("TLS certificates are always verified: a self-signed one is 69, and nothing is stored")
    func untrustedCertificate() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-tls-" + UUID().uuidString).path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let made = try await runProcess(try which("openssl", package: "openssl"),
                                        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-days", "1",
                                         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                                         "-keyout", folder + "/key.pem", "-out", folder + "/cert.pem"], input: nil, environment: [:], timeout: 60)
        #expect(made.status == 0, "\(made)")
        let server = try await TokenServer(tls: (folder + "/cert.pem", folder + "/key.pem"))
        let scenario = try await Scenario()
        let run = try await scenario.authctl(["sign-in", "alice", "--server", "https://localhost:\(server.port)/oauth/token", "--password-stdin"],
                                             input: Array("pw".utf8))
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("TLS"), "\(run)")
        #expect(try await scenario.authctl("server", "show").status == 1)
        #expect(try await scenario.secretTool("search", "service", scenario.service).stdout.isEmpty)
        server.stop()
    }

    @Test("a connection refused is 69; token on a service without a binding is 65; with nobody signed in, 1")
    func refusedAndUnbound() async throws {
        let scenario = try await Scenario()
        var run = try await scenario.authctl("sign-in", "alice", "--server", "http://127.0.0.1:1/token", "--password-stdin", stdin: "pw")
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("cannot reach"), "\(run)")
        run = try await scenario.authctl("token")
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("not bound"), "\(run)")
        try await scenario.authctl("server", "set", "http://127.0.0.1:1/token").expect(0)
        run = try await scenario.authctl("token")
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr.contains("nobody is signed in"), "\(run)")
    }

    @Test("forget revokes like sign-out; tokens never reach the settings file")
    func forgetRevokes() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"]])
        let scenario = try await Scenario()
        try await scenario.authctl("server", "set", server.oauth2, "--revoke-url", server.revoke).expect(0)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let token = try await scenario.authctl("token").output
        let stored = try await scenario.secretTool("search", "service", scenario.service).stdout
        let refresh = try #require(stored.split(separator: "\"").first { $0.hasPrefix("refresh-") }, "\(stored)")
        let settings = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
        #expect(!settings.contains(token), "\(settings)")
        #expect(!settings.contains(refresh), "\(settings)")
        let run = try await scenario.authctl("forget", "alice")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("Signed out"), "\(run)")
        #expect(try server.log().last?["endpoint"] as? String == "revoke")
        #expect(try await scenario.authctl("accounts").stdout.isEmpty)
    }
}
