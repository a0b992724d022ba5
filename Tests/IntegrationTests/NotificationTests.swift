// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import DesktopSandbox
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TestSupport
import Testing

/// `authctl serve` telling the person on the desktop that a session ended: the real dunst under
/// Xvfb as the notification server (Support/NotificationServer.swift), or servers and peers that
/// misbehave (Support/NotificationPeers.swift), each test on a bus of its own.
@Suite("serve's desktop notifications")
struct NotificationTests {
    /// A sandbox of its own (serve owns a name there), serve running in it, and a scenario of one
    /// service.
    private struct Desktop {
        let sandbox: DesktopSandbox
        let scenario: Scenario
        let serve: Spawned
    }

    /// Starts serve with `arguments` once `scenario`'s set-up has run (serve inherits its
    /// environment: the browser stand-in of an OpenID service included).
    private func serving(_ sandbox: DesktopSandbox, _ scenario: Scenario, _ arguments: [String] = []) async throws -> Desktop {
        let (serve, _) = try await scenario.startServe(arguments)
        return Desktop(sandbox: sandbox, scenario: scenario, serve: serve)
    }

    /// Signs `account` in to a service of local accounts (a new one is enrolled).
    private func signInLocally(_ scenario: Scenario, _ account: String = "ada@example.org") async throws {
        let run = try await scenario.authctl("sign-in", account, "--password-stdin", stdin: "correct horse\ncorrect horse\n")
        try #require(run.status == 0, "\(run)")
    }

    /// Removes the account's keyring item behind authctl's back, as Seahorse does.
    private func removeItem(_ scenario: Scenario) async throws {
        let run = try await scenario.secretTool("clear", "service", scenario.service)
        try #require(run.status == 0, "\(run)")
    }

    /// Revokes the session's refresh token at the provider, so its next refresh is refused.
    private func revokeRefreshToken(_ scenario: Scenario, at provider: IdentityProvider) async throws {
        let item = try await scenario.secretTool("lookup", "service", scenario.service, "account", "ada@example.org")
        let tokens = try #require(try JSONSerialization.jsonObject(with: Data(item.stdout.utf8)) as? [String: Any])
        let refreshToken = try #require(tokens["refreshToken"] as? String)
        var request = URLRequest(url: URL(string: provider.revocationEndpoint)!)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data("token=\(refreshToken)&token_type_hint=refresh_token&client_id=\(IdentityProvider.browserClientID)".utf8)
        let (_, answer) = try await URLSession.shared.data(for: request)
        try #require((answer as? HTTPURLResponse)?.statusCode == 200)
    }

    /// Whether the service's status says someone is signed in.
    private func isSignedIn(_ scenario: Scenario) async throws -> Bool {
        try await scenario.authctl("status", "--quiet").status == 0
    }

    @Test("an item removed behind authctl's back: one notification with the app name, summary, body, hint and no timeout; a later sign-in closes it")
    func removed() async throws {
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        let dunst = try await NotificationServer.start(in: sandbox)
        let scenario = try await Scenario(sandbox: sandbox)
        try await signInLocally(scenario)
        let desktop = try await serving(sandbox, scenario)
        defer { desktop.serve.signal(SIGTERM) }
        try await removeItem(scenario)

        let posted = try await dunst.waitForNotifications(1)
        let notice = try #require(posted.first)
        #expect(notice.appName == "authctl")
        #expect(notice.summary == "Signed out of \(scenario.service)")
        #expect(notice.body == "ada@example.org: its keyring item was removed.")
        #expect(notice.desktopEntry == "io.github.authctl")
        #expect(notice.expireTimeout == 0)
        #expect(notice.actions.isEmpty, "a local account's sign-in needs a password at a terminal: \(notice.actions)")
        #expect(notice.isDisplayed)

        try await signInLocally(scenario)
        let closed = try await dunst.waitUntil { $0.first?.state == .closed(reason: 3) }
        #expect(closed)
        #expect(try await dunst.history().count == 1)
    }

    @Test("the body's &, < and > are escaped for a server that reads markup, and only for one", arguments: [true, false])
    func markup(bodyMarkup: Bool) async throws {
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        let server = try await NotificationPeer.recordingServer(in: sandbox, capabilities: ["actions", "body"] + (bodyMarkup ? ["body-markup"] : []))
        let scenario = try await Scenario(sandbox: sandbox)
        try await signInLocally(scenario, "<b>ada&co</b>@example.org")
        let desktop = try await serving(sandbox, scenario)
        defer { desktop.serve.signal(SIGTERM) }
        try await removeItem(scenario)
        let notify = try #require(await server.waitForCalls { $0.notify != nil }.first?.notify)
        #expect(notify.body == (bodyMarkup ? "&lt;b&gt;ada&amp;co&lt;/b&gt;@example.org: its keyring item was removed."
                                           : "<b>ada&co</b>@example.org: its keyring item was removed."))
        await server.stop()
    }

    @Test("a session the provider ended: the notification's action, taken in dunst, signs in again in the browser")
    func expiredAndSignInAgain() async throws {
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        let dunst = try await NotificationServer.start(in: sandbox)
        let provider = try await IdentityProvider(accessTokenLifetime: .seconds(3), idTokenLifetime: .seconds(3), completeDiscovery: true)
        var scenario = try await Scenario(sandbox: sandbox)
        try await scenario.signInWithBrowser(at: provider)
        let desktop = try await serving(sandbox, scenario)
        defer { desktop.serve.signal(SIGTERM) }
        try await revokeRefreshToken(scenario, at: provider)

        // serve refreshes at about 80 % of the lifetime, is refused, and ends the session.
        let posted = try await dunst.waitForNotifications(1, within: .seconds(30))
        let notice = try #require(posted.first)
        #expect(notice.summary == "Signed out of \(scenario.service)")
        #expect(notice.body == "ada@example.org: the session has ended. Sign in again to go on.")
        #expect(notice.actions.map(\.key) == ["default"])
        #expect(notice.actions.map(\.label) == ["Sign in again"])
        #expect(try await !isSignedIn(scenario))

        let signInsBefore = try await provider.count("authorization_code")
        try await dunst.invokeDefaultAction()
        let signedIn = await eventually(within: .seconds(60), pollingEvery: .milliseconds(200)) {
            (try? await isSignedIn(scenario)) ?? false
        }
        #expect(signedIn, "\(desktop.serve.stderr)")
        #expect(try await provider.count("authorization_code") == signInsBefore + 1)
        #expect(try await dunst.history().count == 1)
    }

    @Test("another process's end is told once serve's own re-read confirms it; a forged signal alone, or one about nobody, posts nothing")
    func signalsFromOthers() async throws {
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        let dunst = try await NotificationServer.start(in: sandbox)
        let forged = try await Scenario(sandbox: sandbox)
        try await signInLocally(forged)
        let scenario = try await Scenario(sandbox: sandbox)
        try await signInLocally(scenario)
        let desktop = try await serving(sandbox, scenario)
        defer { desktop.serve.signal(SIGTERM) }

        // Forged: ends that never happened, one about a service nobody is signed in to.
        for (service, user, sequence) in [(forged.service, "ada@example.org", 2), (forged.service, "ada@example.org", 1),
                                          ("nobody-" + forged.service, "eve@example.org", 1)] {
            let run = try await scenario.gdbus("emit", "--session", "--object-path", ServeBus.path, "--signal",
                                               ServeBus.interface + ".LoginStatusChanged", service, "signed-out", user,
                                               "{'reason': <'expired'>, 'name': <''>, 'timestamp': <uint64 1>, 'sequence': <uint64 \(sequence)>}")
            #expect(run.status == 0, "\(run)")
        }
        // A real end, found by another process: the stale state ends at its next command.
        try await removeItem(scenario)
        #expect(try await scenario.authctl("status").status == 1)
        let posted = try await dunst.waitForNotifications(1)
        #expect(posted.map(\.summary) == ["Signed out of \(scenario.service)"])
        // The forged signals came first, and serve's re-reads since have not confirmed them.
        let more = try await dunst.waitUntil(within: .seconds(2)) { $0.count > 1 }
        #expect(!more)
    }

    @Test("ActionInvoked from a peer that is not the server, or for an id serve did not post, starts nothing")
    func forgedActions() async throws {
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        let server = try await NotificationPeer.recordingServer(in: sandbox)
        let provider = try await IdentityProvider(accessTokenLifetime: .seconds(3), idTokenLifetime: .seconds(3), completeDiscovery: true)
        var scenario = try await Scenario(sandbox: sandbox)
        try await scenario.signInWithBrowser(at: provider)
        let desktop = try await serving(sandbox, scenario)
        defer { desktop.serve.signal(SIGTERM) }
        let serveName = try #require(try await scenario.nameOwner())
        try await revokeRefreshToken(scenario, at: provider)
        let notify = try #require(await server.waitForCalls(within: .seconds(30)) { $0.notify != nil }.first)
        #expect(notify.notify?.actions.first?.key == "default")
        let signIns = try await provider.count("authorization_code")

        // The id the recording server gave it is 1: a forger sends that id, unicast and broadcast.
        let forger = try await NotificationPeer.forger(in: sandbox, id: 1, destination: serveName)
        defer { Task { await forger.stop() } }
        // The server itself, for an id it never gave serve.
        try await server.forgeAction(id: 99)
        // A round trip to serve: the signals sent before it have been dispatched there.
        #expect(try await scenario.call("Ping", interface: "org.freedesktop.DBus.Peer").status == 0)
        #expect(try await scenario.authctl("status").status == 1)
        #expect(try await provider.count("authorization_code") == signIns)

        // The server's own word for its id: the sign-in starts, once, however often it is said.
        try await server.forgeAction(id: 1)
        try await server.forgeAction(id: 1)
        let started = await eventually(within: .seconds(30)) { ((try? await provider.count("authorization_code")) ?? 0) > signIns }
        #expect(started)
        _ = await eventually(within: .seconds(60), pollingEvery: .milliseconds(200)) { (try? await isSignedIn(scenario)) ?? false }
        #expect(try await provider.count("authorization_code") == signIns + 1)
        await server.stop()
    }

    @Test("a notification server that never answers, floods ActionInvoked or vanishes delays nothing and starts nothing")
    func brokenServers() async throws {
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        let hung = try await NotificationPeer.hungServer(in: sandbox)
        let scenario = try await Scenario(sandbox: sandbox)
        try await signInLocally(scenario)
        let desktop = try await serving(sandbox, scenario)
        defer { desktop.serve.signal(SIGTERM) }
        try await removeItem(scenario)
        let notify = try #require(await hung.waitForCalls { $0.notify != nil }.first)
        // serve answers while its Notify waits: before the call's deadline could have ended it.
        let status = try await scenario.call("GetStatus", scenario.service)
        #expect(status.status == 0, "\(status)")
        #expect(Date().timeIntervalSince1970 < notify.time + LoginService.notificationDeadline, "GetStatus waited for the hung Notify")
        try await hung.vanish()

        let flood = try await NotificationPeer.floodServer(in: sandbox, count: 3000)
        try await signInLocally(scenario)
        try await removeItem(scenario)
        #expect(await flood.waitForFloods())
        let answered = try await scenario.call("GetStatus", scenario.service)
        #expect(answered.status == 0, "\(answered)")
        #expect(!desktop.serve.hasEnded, "\(desktop.serve.stderr)")
        #expect(!desktop.serve.stderr.contains("cannot start"), "\(desktop.serve.stderr)")
        await flood.stop()
    }

    @Test("serve --no-notifications posts none; sign-out posts none")
    func none() async throws {
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        let server = try await NotificationPeer.recordingServer(in: sandbox)
        let scenario = try await Scenario(sandbox: sandbox)
        try await signInLocally(scenario)
        let desktop = try await serving(sandbox, scenario, ["--no-notifications"])
        try await removeItem(scenario)
        // serve has ended the session (its property says so): it posts nothing about it.
        _ = await eventually(within: .seconds(10)) { (try? await scenario.sessionProperties(scenario.service)["SignedIn"]) == "false" }
        #expect(await server.waitForCalls(within: .seconds(2)) { $0.notify != nil }.isEmpty)
        desktop.serve.signal(SIGTERM)
        _ = await desktop.serve.wait()

        let again = try await serving(sandbox, scenario)
        defer { again.serve.signal(SIGTERM) }
        try await signInLocally(scenario)
        #expect(try await scenario.authctl("sign-out").status == 0)
        #expect(await server.waitForCalls(within: .seconds(2)) { $0.notify != nil }.isEmpty)
        await server.stop()
    }
}
