// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `authctl token` against other authctl processes and signals, with a real token server and
/// keyring: a race with another authctl is never a broken Secret Service, and a refresh token
/// the server rotated is never lost — not to a signal, not to a sign-out.
@Suite("Tokens racing other processes and signals")
struct TokenRaceTests {
    /// A server that knows alice, and alice signed in at it with the revocation URL bound.
    func signedIn(_ settings: [String: any Sendable] = [:]) async throws -> (TokenServer, Scenario) {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"]].merging(settings) { $1 })
        let scenario = try await Scenario()
        try await scenario.authctl("server", "set", server.oauth2, "--revoke-url", server.revoke).expect(0)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        return (server, scenario)
    }

    @Test("`token` and `accounts` racing sign-out, forget and sign-in: every `token` exits 0 or 1, no stderr line names a D-Bus error")
    func tokenRacingSignOut() async throws {
        let (server, scenario) = try await signedIn()
        defer { withExtendedLifetime(server) {} }
        let clock = ContinuousClock()
        let giveUp = clock.now.advanced(by: .seconds(90))
        var tokens: [Run] = []
        var listings: [Run] = []
        // At least four rounds (20 tokens) whatever the machine's speed; more while time allows.
        for round in 0..<14 where round < 4 || clock.now < giveUp {
            let ending = round % 2 == 0 ? ["sign-out"] : ["forget", "alice"]
            var started: [(command: String, process: Spawned)] = []
            // Tokens before, beside and after the ending, so some read while the item goes, and
            // forced refreshes, so some wait for the refresh lock while the session ends.
            for arguments in [["token"], ["token", "--refresh"], ["accounts"], ending, ["token"], ["token", "--refresh"], ["accounts"], ["token"]] {
                started.append((arguments[0], try await scenario.start(arguments)))
            }
            for (command, process) in started {
                let run = await process.wait(timeout: 60)
                if command == "token" { tokens.append(run) }
                if command == "accounts" { listings.append(run) }
            }
            try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        }
        #expect(tokens.count >= 20, "the loop ran too few rounds to race")
        #expect(tokens.allSatisfy { $0.status == 0 || $0.status == 1 }, "\(tokens.filter { $0.status != 0 && $0.status != 1 })")
        #expect(!tokens.contains { $0.stderr.contains("org.freedesktop.") }, "\(tokens.filter { $0.stderr.contains("org.freedesktop.") })")
        #expect(listings.allSatisfy { $0.status == 0 }, "\(listings.filter { $0.status != 0 })")
        #expect(!listings.contains { $0.stderr.contains("org.freedesktop.") }, "\(listings.filter { $0.stderr.contains("org.freedesktop.") })")
    }

    @Test("an item deleted between the search and the read is not there: its attributes and its secret are nil")
    func itemDeletedAfterTheSearch() async throws {
        let scenario = try await Scenario()
        let store = SecretServiceStore(promptAllowed: false)
        let key = ItemKey(service: scenario.serviceName, account: AccountID(rawValue: "alice")!,
                          server: try ServerURL(validating: "https://auth.test/token"))
        try store.store(Array(#"{"accessToken":"a","tokenType":"Bearer"}"#.utf8), contentType: "application/json", for: key, label: "tokens")
        let bus = SessionBus.shared(address: scenario.sandbox.busAddress)
        let connection = try bus.connection(timeout: 5)
        let found = try SecretServiceCalls.searchItems(connection, attributes: key.attributes, Deadline(seconds: 5))
        let path = try #require(found.unlocked.first)
        _ = try store.deleteItem(key)
        let attributes = try SecretServiceCalls.itemsAttributes(connection, paths: [path], Deadline(seconds: 5))
        #expect(attributes.count == 1)
        #expect(attributes.first.map { $0 == nil } == true)
        let secret = try bus.callUnlessGone("read the secret", timeout: 5) { connection, deadline throws(GLibError) in
            try SecretServiceCalls.secret(connection, item: path, deadline)
        }
        #expect(secret == nil)
    }

    @Test("SIGTERM, SIGINT or SIGHUP during a refresh: the answer is awaited and stored, so the next refresh works",
          arguments: [SIGTERM, SIGINT, SIGHUP])
    func signalDuringRefresh(_ signal: Int32) async throws {
        let (server, scenario) = try await signedIn(["refresh_answer_delay": 1.5])
        let refreshing = try await scenario.start(["token", "--refresh"])
        // The server has rotated the refresh token once it logged the request; its answer is on its way.
        try #require(try await eventually(within: .seconds(20)) { try server.count("refresh") == 1 }, "\(refreshing.stderr)")
        refreshing.signal(signal)
        let run = await refreshing.wait(timeout: 30)
        #expect(run.status == 128 + signal, "ended by the signal: \(run)")
        #expect(run.stdout.isEmpty, "\(run)")
        try server.configure(["refresh_answer_delay": 0])
        let again = try await scenario.authctl("token", "--refresh")
        #expect(again.status == 0, "the rotated refresh token was stored: \(again)")
        let presented = try server.log().filter { $0["endpoint"] as? String == "refresh" }
            .map { ($0["fields"] as? [String: String])?["refresh_token"] ?? "" }
        #expect(presented.count == 2)
        #expect(Set(presented).count == 2, "the second refresh presented the rotated token, not the first one again: \(presented)")
    }

    @Test("sign-out or forget during a refresh waits for it and revokes the rotated refresh token: none stays live",
          arguments: [["sign-out"], ["forget", "alice"]])
    func endingDuringRefresh(_ ending: [String]) async throws {
        let (server, scenario) = try await signedIn(["refresh_answer_delay": 1.5])
        let refreshing = try await scenario.start(["token", "--refresh"])
        try #require(try await eventually(within: .seconds(20)) { try server.count("refresh") == 1 }, "\(refreshing.stderr)")
        let run = try await scenario.authctl(ending)
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.isEmpty, "\(run)")
        let refreshed = await refreshing.wait(timeout: 30)
        #expect(refreshed.status == 0, "the refresh completed before the session ended: \(refreshed)")
        #expect(try server.liveRefreshTokens().isEmpty)
        #expect(try server.log().last?["endpoint"] as? String == "revoke")
    }
}
