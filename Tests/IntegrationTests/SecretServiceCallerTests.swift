// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import DesktopSandbox
import Foundation
import Testing

/// gnome-keyring now and then declines one of a new caller's first calls to the Service as an
/// unknown method (`UnknownMethod`, "Method SearchItems is not implemented on interface
/// org.freedesktop.Secret.Service"): such a call is asked once more, never more, and a call
/// declined twice is an error, never an item that is gone. The Secret Service here is a stand-in
/// that declines every caller's first searches (or sessions) (Support/secret_service_stand_in.py),
/// on a bus of its own.
@Suite("A Secret Service that declines a caller's first search")
struct SecretServiceCallerTests {
    /// A bus whose Secret Service declines each caller's first `refusals` calls of `method` (in
    /// `text`, or gnome-keyring's words), and a scenario that is signed in as alice and reads
    /// that bus.
    struct StandIn {
        let sandbox: DesktopSandbox
        let service: Spawned
        var scenario: Scenario

        init(refusals: Int, of method: String = "SearchItems", text: String? = nil) async throws {
            var scenario = try await Scenario()
            try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
            sandbox = try await DesktopSandbox.started(keyring: false)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Support/secret_service_stand_in.py")
            service = try await Spawned(debianPython, [script.path, sandbox.busAddress, String(refusals), method] + (text.map { [$0] } ?? []),
                                        input: nil, environment: [:], leadsProcessGroup: true, pipesOutput: true)
            let ready = await service.waitForOutput(timeout: 20) { $0.hasPrefix("ready\n") }
            #expect(ready, "the stand-in did not start: \(service.stdout) \(service.stderr)")
            scenario.extraEnvironment["DBUS_SESSION_BUS_ADDRESS"] = sandbox.busAddress
            self.scenario = scenario
        }

        /// The stand-in's answers to the calls of its method, one `METHOD SENDER refused|answered`
        /// each, and the deletes it was asked for, one `Delete SENDER` each.
        var calls: [Substring] { service.stdout.split(separator: "\n").filter { $0 != "ready" && !$0.hasPrefix("Delete ") } }
        var deletes: [Substring] { service.stdout.split(separator: "\n").filter { $0.hasPrefix("Delete ") } }

        /// How many calls of its method each caller made, in the order they first called.
        var callsByCaller: [Int] {
            var callers: [Substring] = []
            var counts: [Int] = []
            for line in calls {
                let caller = line.split(separator: " ")[1]
                if let index = callers.firstIndex(of: caller) { counts[index] += 1 } else { callers.append(caller); counts.append(1) }
            }
            return counts
        }

        func stop() async {
            service.signal(SIGKILL)
            _ = await service.wait(timeout: 10)
            await sandbox.stop()
        }
    }

    @Test("status: the search declined on the first read is asked again, and answered")
    func statusAsksAgain() async throws {
        let standIn = try await StandIn(refusals: 1)
        let run = try await standIn.scenario.authctl("status")
        await standIn.stop()
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.hasPrefix("Signed in to \(standIn.scenario.service) as alice"), "\(run)")
        // The first read's connection is refused once; the read asked again one call at a
        // time, on a connection of its own, is refused once and then answered.
        #expect(standIn.calls.map { $0.split(separator: " ")[2] } == ["refused", "refused", "answered"], "\(standIn.calls)")
        #expect(standIn.callsByCaller == [1, 2], "\(standIn.calls)")
    }

    @Test("a search declined twice is the command's error: 69, one line, asked again only once")
    func declinedTwice() async throws {
        let standIn = try await StandIn(refusals: 2)
        let run = try await standIn.scenario.authctl("accounts")
        await standIn.stop()
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr == "authctl: could not search the keyring: GDBus.Error:org.freedesktop.DBus.Error.UnknownMethod: "
            + "Method SearchItems is not implemented on interface org.freedesktop.Secret.Service\n", "\(run)")
        #expect(standIn.callsByCaller == [2], "\(standIn.calls)")
    }

    @Test("a search sent beside another call is sent again on its own, once: a token's read", arguments: [1, 2])
    func pipelinedSearchAsksAgain(refusals: Int) async throws {
        let standIn = try await StandIn(refusals: refusals)
        let store = SecretServiceStore(promptAllowed: false, readingFrom: standIn.sandbox.busAddress)
        let tokenKey = ItemKey(service: standIn.scenario.serviceName, account: AccountID(rawValue: "alice")!,
                               server: try ServerURL(validating: "https://id.example"))
        // The connection's first search, sent beside OpenSession.
        let read = Result { () throws(AuthError) in try store.secret(tokenKey) }
        await standIn.stop()
        if refusals == 1 {
            #expect(try read.get() == Array("the secret".utf8))
        } else {
            #expect(throws: AuthError.self) { try read.get() }
            if case .failure(let error) = read { #expect(error.message.contains("UnknownMethod"), "\(error)") }
        }
        #expect(standIn.callsByCaller == [2], "\(standIn.calls)")
    }

    @Test("a session declined twice is the command's error, never an item that is gone: forget and verify are 69 and delete nothing")
    func sessionDeclinedTwice() async throws {
        let standIn = try await StandIn(refusals: 2, of: "OpenSession")
        let forget = try await standIn.scenario.authctl("forget", "alice")
        let verify = try await standIn.scenario.authctl("verify", "--password-stdin", stdin: "pw")
        await standIn.stop()
        for run in [forget, verify] {
            #expect(run.status == 69, "\(run)")
            #expect(run.stderr.hasSuffix(": GDBus.Error:org.freedesktop.DBus.Error.UnknownMethod: "
                + "Method OpenSession is not implemented on interface org.freedesktop.Secret.Service\n"), "\(run)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(run)")
        }
        #expect(standIn.deletes.isEmpty, "\(standIn.deletes)")
        #expect(standIn.callsByCaller == [2, 2], "\(standIn.calls)")
    }

    @Test("the Service's own words in an error are cut at 200 characters, without controls, line separators or direction overrides")
    func hostileRefusalText() async throws {
        let text = "\u{202E}gnikcah\u{2028}authctl: a forged line\u{1B}[31m\u{2066}" + String(repeating: "x", count: 50_000)
        let standIn = try await StandIn(refusals: 2, text: text)
        let run = try await standIn.scenario.authctl("accounts")
        await standIn.stop()
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.hasPrefix("authctl: could not search the keyring: GDBus.Error:org.freedesktop.DBus.Error.UnknownMethod: gnikcahauthctl: a forged line[31m"),
                "\(run)")
        #expect(run.stderr.hasSuffix("x…\n"), "\(run.stderr.suffix(40))")
        #expect(run.stderr.count < 300, "\(run.stderr.count) characters")
        #expect(run.stderr.split(separator: "\n").count == 1)
    }

    @Test("a Service that lists the item it created at another path than its CreateItem answered: the write is kept, and not undone")
    func createdItemListedElsewhere() async throws {
        let standIn = try await StandIn(refusals: 0, of: "CreateItem")
        let signIn = try await standIn.scenario.authctl("sign-in", "bob", "--password-stdin", stdin: "pw")
        let verify = try await standIn.scenario.authctl("verify", "--password-stdin", stdin: "pw")
        await standIn.stop()
        #expect(signIn.status == 0, "\(signIn)")
        #expect(verify.status == 0, "\(verify)")
        #expect(standIn.calls.filter { $0.hasPrefix("CreateItem ") }.count == 1, "\(standIn.calls)")
        #expect(standIn.deletes.isEmpty, "\(standIn.deletes)")
    }
}
