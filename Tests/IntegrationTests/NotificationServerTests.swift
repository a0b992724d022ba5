// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The notification servers the tests of `authctl serve`'s notifications stand on: the real dunst
/// (Support/NotificationServer.swift) and the servers and peers of Support/notification_peers.py.
/// Each test has a bus of its own; an application is played by notification_peers.py `notify`, one
/// connection that calls Notify and collects the signals it receives.
@Suite("The test notification servers")
struct NotificationServerTests {
    @Test("dunst takes a notification: app name, summary, body, actions and hints as sent, displayed until closed")
    func dunstTakesANotification() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationServer.start(in: sandbox)
        let client = try await NotificationClient(bus: sandbox.busAddress, appName: "authctl", summary: "Sign in to example",
                                                  body: "Your <b>session</b> has ended", actions: [("default", "Sign in")],
                                                  hints: ["desktop-entry": "'authctl'", "urgency": "byte 2"])
        let id = try #require(await client.id())
        let taken = try await server.waitForNotifications(1)
        let notification = try #require(taken.first)
        #expect(notification.id == id)
        #expect(notification.sender == client.uniqueName)
        #expect(notification.appName == "authctl")
        #expect(notification.summary == "Sign in to example")
        #expect(notification.body == "Your <b>session</b> has ended")
        #expect(notification.actions == [.init(key: "default", label: "Sign in")])
        #expect(notification.hints["desktop-entry"] == .init(type: "s", value: .string("authctl")))
        #expect(notification.hints["urgency"] == .init(type: "y", value: .number(2)))
        #expect(notification.expireTimeout == -1)
        #expect(notification.isDisplayed)
        // dunst's own view: it read the hints, and shows it.
        #expect(try await eventually(within: .seconds(20)) { try await server.count(.displayed) == 1 })
        #expect(await eventually(within: .seconds(20)) { server.dunstViews.contains { $0.id == String(id) } })
        let view = try #require(server.dunstViews.first { $0.id == String(id) })
        #expect(view.desktopEntry == "authctl")
        #expect(view.urgency == "CRITICAL")
        #expect(view.appName == "authctl")
        #expect(try await server.dunstHistory().isEmpty, "dunstctl history lists closed notifications only")
        #expect(try await server.serverInformation().first == "dunst")

        let dunst = server.dunstProcessID
        await server.stop()
        await client.stop()
        #expect(!server.isRunning)
        #expect(kill(dunst, 0) == -1 && errno == ESRCH, "dunst outlived its launcher")
    }

    @Test("a launcher that is killed (as with the test process) takes dunst and Xvfb with it, and the name is freed")
    func killedLauncher() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationServer.start(in: sandbox)
        #expect(FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X" + server.display.dropFirst()))
        kill(server.launcherProcessID, SIGKILL)
        // A process that has ended may stay a zombie here: its parent is gone, and whoever
        // inherits it need not reap it.
        func ended(_ pid: Int32) -> Bool {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
            return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
        }
        #expect(await eventually(within: .seconds(20)) { ended(server.dunstProcessID) && ended(server.xvfbProcessID) })
        let scenario = try await Scenario(sandbox: sandbox)
        #expect(try await eventually(within: .seconds(20)) {
            try await scenario.gdbus("call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                                     "--method", "org.freedesktop.DBus.NameHasOwner", "org.freedesktop.Notifications").stdout == "(false,)\n"
        })
        await server.stop()
    }

    @Test("choosing the default action: ActionInvoked(id, default) to the caller alone, then NotificationClosed(id, 2)")
    func defaultAction() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationServer.start(in: sandbox)
        let client = try await NotificationClient(bus: sandbox.busAddress, appName: "authctl", summary: "Signed out",
                                                  actions: [("default", "Sign in")])
        let id = try #require(await client.id())
        // Another application, which listens to every signal of the interface, and whose own
        // notification comes later, so it is not the one on top.
        let bystander = try await NotificationClient(bus: sandbox.busAddress, appName: "other", summary: "Something else")
        let otherID = try #require(await bystander.id())
        _ = try await server.waitForNotifications(2)

        let chosen = try await server.invokeDefaultAction()
        #expect(chosen == id)
        let signals = await client.waitForSignals(2) { $0.sender == server.ownerName }
        #expect(signals.map(\.member) == ["ActionInvoked", "NotificationClosed"], "\(signals)")
        #expect(signals.first?.arguments == [.number(Double(id)), .string("default")])
        #expect(signals.last?.arguments == [.number(Double(id)), .number(2)])
        #expect(signals.allSatisfy { $0.unicast == true && $0.destination == client.uniqueName }, "\(signals)")
        #expect(try await server.waitUntil { $0.first { $0.id == id }?.state == .closed(reason: 2) })
        let history = try await server.history()
        #expect(history.first { $0.id == id }?.invokedActions == ["default"])
        #expect(history.first { $0.id == otherID }?.isDisplayed == true)
        // The signals went to the caller only: the bystander's match rule for the interface saw none.
        #expect(bystander.signals.isEmpty, "\(bystander.signals)")
        #expect(try await server.dunstHistory().map(\.id) == [Int64(id)])
        await server.stop()
        await client.stop()
        await bystander.stop()
    }

    @Test("expire_timeout 0 stays displayed while one of 1 s expires; CloseNotification closes it with reason 3")
    func expiryAndClose() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationServer.start(in: sandbox)
        let staying = try await NotificationClient(bus: sandbox.busAddress, summary: "Stays", expireTimeout: 0)
        let stayingID = try #require(await staying.id())
        let expiring = try await NotificationClient(bus: sandbox.busAddress, summary: "Expires", expireTimeout: 1000)
        let expiringID = try #require(await expiring.id())

        let expired = await expiring.waitForSignals(within: .seconds(30)) { $0.isSignal("NotificationClosed") }
        #expect(expired.first?.arguments == [.number(Double(expiringID)), .number(1)], "\(expired)")
        #expect(try await server.history().first { $0.id == stayingID }?.isDisplayed == true)
        #expect(staying.signals.isEmpty)

        try await staying.close(id: stayingID)
        let closed = await staying.waitForSignals { $0.isSignal("NotificationClosed") }
        #expect(closed.first?.arguments == [.number(Double(stayingID)), .number(3)], "\(closed)")
        #expect(closed.first?.sender == server.ownerName)
        #expect(try await server.waitUntil { $0.allSatisfy { !$0.isDisplayed } })
        #expect(try await server.count(.displayed) == 0)
        #expect(Set(try await server.dunstHistory().map(\.id)) == [Int64(stayingID), Int64(expiringID)])
        await server.stop()
        await staying.stop()
        await expiring.stop()
    }

    @Test("close-all dismisses every notification (reason 2); a duplicate replaces the one it repeats (reason 1)")
    func closeAllAndDuplicates() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationServer.start(in: sandbox)
        let first = try await NotificationClient(bus: sandbox.busAddress, appName: "authctl", summary: "Same")
        let firstID = try #require(await first.id())
        // dunst stacks a notification equal to a displayed one (`stack_duplicates`, Debian's
        // default): the new one gets a new id, the old one is closed as expired.
        let repeated = try await NotificationClient(bus: sandbox.busAddress, appName: "authctl", summary: "Same")
        let repeatedID = try #require(await repeated.id())
        #expect(repeatedID != firstID)
        let replaced = await first.waitForSignals { $0.isSignal("NotificationClosed") }
        #expect(replaced.first?.arguments == [.number(Double(firstID)), .number(1)], "\(replaced)")

        try await server.closeAll()
        let dismissed = await repeated.waitForSignals { $0.isSignal("NotificationClosed") }
        #expect(dismissed.first?.arguments == [.number(Double(repeatedID)), .number(2)], "\(dismissed)")
        let states = try await server.history().map(\.state)
        #expect(states == [.closed(reason: 1), .closed(reason: 2)])
        await server.stop()
        await first.stop()
        await repeated.stop()
    }

    @Test("paused (do not disturb), dunst keeps a notification waiting, and shows it once resumed")
    func paused() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationServer.start(in: sandbox)
        try await server.setPaused(true)
        let client = try await NotificationClient(bus: sandbox.busAddress, summary: "While away")
        let id = try #require(await client.id())
        #expect(try await eventually(within: .seconds(20)) { try await server.count(.waiting) == 1 })
        #expect(try await server.count(.displayed) == 0)
        #expect(try await server.history().map(\.id) == [id])
        try await server.setPaused(false)
        #expect(try await eventually(within: .seconds(20)) { try await server.count(.displayed) == 1 })
        #expect(try await server.count(.waiting) == 0)
        await server.stop()
        await client.stop()
    }

    @Test("dunst's capabilities: actions always, body-markup only with markup on", arguments: [true, false])
    func capabilities(bodyMarkup: Bool) async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationServer.start(in: sandbox, bodyMarkup: bodyMarkup)
        let capabilities = try await server.capabilities()
        await server.stop()
        #expect(capabilities.contains("actions"), "\(capabilities)")
        #expect(capabilities.contains("body"), "\(capabilities)")
        #expect(capabilities.contains("body-markup") == bodyMarkup, "\(capabilities)")
        #expect(!capabilities.contains("persistence"), "\(capabilities)")
    }

    @Test("the recording server logs every call with its arguments and hint types, answers, acts on request and vanishes")
    func recordingServer() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let monitor = try await NotificationBusMonitor(in: sandbox)
        let server = try await NotificationPeer.recordingServer(in: sandbox, capabilities: ["actions", "body"])
        let client = try await NotificationClient(bus: sandbox.busAddress, appName: "authctl", summary: "Summary", body: "Body",
                                                  actions: [("default", "Open"), ("later", "Later")],
                                                  hints: ["desktop-entry": "'authctl'", "urgency": "byte 1", "transient": "true"],
                                                  expireTimeout: 0)
        #expect(await client.id() == 1)
        #expect(try await client.notifyAgain() == 2)
        let calls = await server.waitForCalls(2) { $0.member == "Notify" }
        let notify = try #require(calls.first?.notify)
        #expect(calls.first?.sender == client.uniqueName)
        #expect(notify.appName == "authctl" && notify.summary == "Summary" && notify.body == "Body")
        #expect(notify.replacesID == 0 && notify.appIcon == "" && notify.expireTimeout == 0)
        #expect(notify.actions == [.init(key: "default", label: "Open"), .init(key: "later", label: "Later")])
        #expect(notify.hints == ["desktop-entry": .init(type: "s", value: .string("authctl")), "urgency": .init(type: "y", value: .number(1)),
                                 "transient": .init(type: "b", value: .bool(true))])

        try await client.close(id: 1)
        let closed = await client.waitForSignals { $0.isSignal("NotificationClosed") }
        #expect(closed.first?.arguments == [.number(1), .number(3)])
        try await server.forgeAction(id: 2)
        let invoked = await client.waitForSignals { $0.isSignal("ActionInvoked") }
        #expect(invoked.first?.arguments == [.number(2), .string("default")])
        #expect(invoked.first?.sender == server.uniqueName && invoked.first?.unicast == true, "\(invoked)")
        #expect(server.calls.map(\.member) == ["Notify", "Notify", "CloseNotification"])

        try await server.vanish()
        let released = await monitor.wait(for: 2) { $0.member == "NameOwnerChanged" }
        #expect(released.map { $0.arguments.map(\.string) } == [["org.freedesktop.Notifications", "", server.uniqueName],
                                                                  ["org.freedesktop.Notifications", server.uniqueName, ""]],
                "\(released)")
        await client.stop()
        await monitor.stop()
    }

    @Test("the forger's ActionInvoked comes from a connection that does not own the name, to the destination and to everyone")
    func forger() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationPeer.recordingServer(in: sandbox)
        let client = try await NotificationClient(bus: sandbox.busAddress, appName: "authctl")
        let id = try #require(await client.id())
        let forger = try await NotificationPeer.forger(in: sandbox, id: id, destination: client.uniqueName)
        let forged = await client.waitForSignals(2) { $0.isSignal("ActionInvoked") }
        #expect(forged.count == 2)
        #expect(forged.allSatisfy { $0.sender == forger.uniqueName && $0.arguments == [.number(Double(id)), .string("default")] }, "\(forged)")
        #expect(forged.allSatisfy { $0.path == "/org/freedesktop/Notifications" })
        #expect(Set(forged.compactMap(\.unicast)) == [true, false], "one to the client, one to everyone: \(forged)")
        let owner = try await Scenario(sandbox: sandbox).gdbus("call", "--session", "--dest", "org.freedesktop.DBus", "--object-path",
                                                                 "/org/freedesktop/DBus", "--method", "org.freedesktop.DBus.GetNameOwner",
                                                                 "org.freedesktop.Notifications")
        #expect(GVariantText.strings(owner.stdout) == [server.uniqueName])
        #expect(forger.uniqueName != server.uniqueName && !forger.uniqueName.isEmpty)
        await forger.stop()
        await client.stop()
        await server.stop()
    }

    @Test("the hung server keeps Notify unanswered until told to answer")
    func hungServer() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationPeer.hungServer(in: sandbox)
        let client = try await NotificationClient(bus: sandbox.busAddress, appName: "authctl", summary: "Waiting")
        let calls = await server.waitForCalls { $0.member == "Notify" }
        #expect(calls.first?.notify?.summary == "Waiting")
        // Received, and unanswered: only the server could answer, and it has not been told to.
        #expect(await client.id(within: .zero) == nil)
        try await server.answerPendingCalls()
        #expect(await client.id() == 1)
        await client.stop()
        await server.stop()
    }

    @Test("the flood server answers Notify, then sends the caller thousands of ActionInvoked")
    func floodServer() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        let server = try await NotificationPeer.floodServer(in: sandbox, count: 3000)
        let client = try await NotificationClient(bus: sandbox.busAddress, appName: "authctl")
        let id = try #require(await client.id())
        #expect(await server.waitForFloods())
        let flood = await client.waitForSignals(3000, within: .seconds(60)) { $0.isSignal("ActionInvoked") }
        #expect(flood.count == 3000)
        #expect(flood.allSatisfy { $0.sender == server.uniqueName && $0.unicast == true })
        #expect(flood.contains { $0.arguments.first?.uint32 == id } && flood.contains { $0.arguments.first?.uint32 != id })
        // The answer reached the client before the flood did.
        let lines = client.process.lines
        let reply = try #require(lines.firstIndex { $0.hasPrefix("reply ") })
        #expect(reply < lines.firstIndex { $0.hasPrefix("signal ") }!)
        await client.stop()
        await server.stop()
    }
}
