// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import TestSupport
import Testing

/// `LoginStatusChanged` as a real subscriber on the bus receives it.
@Suite("D-Bus events")
struct EventTests {
    @Test("sign-in, switch, sign-out and forget arrive with the exact arguments; no-ops send nothing")
    func signalArguments() async throws {
        let scenario = try await Scenario()
        let listener = try scenario.listener()
        let before = UInt64(Date().timeIntervalSince1970 * 1_000_000)
        try await scenario.authctl("sign-in", "alice@example.org", "--name", "Alice", "--password-stdin", stdin: "a").expect(0)
        try await scenario.authctl("sign-in", "alice@example.org", "--password-stdin", stdin: "a").expect(0)  // no change
        try await scenario.authctl("sign-in", "alice@example.org", "--password-stdin", stdin: "wrong").expect(77)
        try await scenario.authctl("sign-in", "bob@example.org", "--name", "Bob", "--password-stdin", stdin: "b").expect(0)
        try await scenario.authctl("sign-out").expect(0)
        try await scenario.authctl("sign-out").expect(0)  // nobody: no event
        try await scenario.authctl("sign-in", "carol", "--name", "", "--password-stdin", stdin: "c").expect(0)
        try await scenario.authctl("forget", "carol").expect(0)
        let events = try await collect(6, from: listener)
        let after = UInt64(Date().timeIntervalSince1970 * 1_000_000)
        #expect(events.map { "\($0.status.rawValue) \($0.account?.rawValue ?? "-") \($0.reason.rawValue) \($0.name) #\($0.sequence) \($0.previousAccount?.rawValue ?? "")" } == [
            "signed-in alice@example.org sign-in Alice #1 ",
            "signed-out alice@example.org switch Alice #2 ",
            "signed-in bob@example.org switch Bob #3 alice@example.org",
            "signed-out bob@example.org sign-out Bob #4 ",
            "signed-in carol sign-in  #5 ",
            "signed-out carol forget  #6 ",
        ])
        #expect(events.allSatisfy { $0.service == scenario.serviceName })
        #expect(events.allSatisfy { (before...after).contains(Timestamp.microseconds($0.timestamp)) })
    }

    @Test("the signal is a broadcast (sssa{sv}) with typed details, as dbus-monitor decodes it")
    func signalAsMonitorSeesIt() async throws {
        let scenario = try await Scenario()
        let monitor = try await Spawned(try which("dbus-monitor", package: "dbus-bin"),
                                        ["--address", scenario.sandbox.busAddress,
                                         "type='signal',interface='io.github.authctl.AuthController1',arg0='\(scenario.service)'"],
                                        input: nil, environment: scenario.environment)
        defer { monitor.signal(SIGTERM) }
        // dbus-monitor reports losing its own name once it has become a monitor.
        let monitoring = await eventually(within: .seconds(30)) { monitor.stdout.contains("member=NameLost") }
        try #require(monitoring, "dbus-monitor did not start: \(monitor.stderr)")
        try await scenario.authctl("sign-in", "sig@example.org", "--name", "Sig", "--password-stdin", stdin: "pw").expect(0)
        _ = await eventually(within: .seconds(30)) { monitor.stdout.contains("uint64 1\n") }
        let seen = monitor.stdout
        let expected = """
               string "\(scenario.service)"
               string "signed-in"
               string "sig@example.org"
               array [
                  dict entry(
                     string "reason"
                     variant             string "sign-in"
                  )
                  dict entry(
                     string "name"
                     variant             string "Sig"
                  )
                  dict entry(
                     string "timestamp"
                     variant             uint64
            """
        #expect(seen.contains("destination=(null destination)"), "\(seen)")
        #expect(seen.contains("path=/io/github/authctl/AuthController1; interface=io.github.authctl.AuthController1; member=LoginStatusChanged"))
        #expect(seen.contains(expected), "\(seen)")
        #expect(seen.contains("      string \"sequence\"\n         variant             uint64 1\n"), "\(seen)")
    }

    @Test("other services' events never reach a listener")
    func serviceFilter() async throws {
        let scenario = try await Scenario()
        let other = try await Scenario(service: scenario.service + ".other")
        let listener = try scenario.listener()
        try await other.authctl("sign-in", "x", "--password-stdin", stdin: "pw").expect(0)
        try await scenario.authctl("sign-in", "mine", "--password-stdin", stdin: "pw").expect(0)
        let events = try await collect(1, from: listener)
        #expect(events.first?.account?.rawValue == "mine")
    }

    @Test("12 parallel sign-ins: no lost update, sequence strictly increasing without gaps, events in the order of the changes")
    func parallelSignIns() async throws {
        let scenario = try await Scenario()
        let listener = try scenario.listener()
        let runs = try await withThrowingTaskGroup(of: Run.self) { group in
            for index in 0..<12 {
                group.addTask { try await scenario.authctl("sign-in", "user\(index)@example.org", "--password-stdin", stdin: "pw\(index)") }
            }
            return try await group.reduce(into: [Run]()) { $0.append($1) }
        }
        #expect(runs.allSatisfy { $0.status == 0 }, "\(runs.filter { $0.status != 0 })")
        let events = try await collect(23, from: listener, timeout: 60)
        #expect(events.map(\.sequence) == Array(1...23))
        #expect(events.first?.reason == .signIn)
        // Each switch signs out exactly the account the previous event signed in.
        var current: AccountID?
        for event in events {
            if event.status == .signedOut {
                #expect(event.account == current)
                #expect(event.reason == .switch)
            }
            else {
                #expect(event.previousAccount == current)
                current = event.account
            }
        }
        let json = try await scenario.authctl("status", "--json").stdout
        #expect(json.contains(#""sequence":23"#))
        #expect(json.contains(#""user":"\#(current?.rawValue ?? "")""#))
        #expect(try await scenario.authctl("accounts").stdout.split(separator: "\n").count == 12)
    }

    @Test("25 sign-in/sign-out cycles: 50 events, none lost, in order")
    func cycles() async throws {
        let scenario = try await Scenario()
        let listener = try scenario.listener()
        for cycle in 0..<25 {
            try await scenario.authctl("sign-in", "cycler", "--password-stdin", stdin: "pw\(cycle)").expect(0)
            try await scenario.authctl("sign-out").expect(0)
        }
        let events = try await collect(50, from: listener, timeout: 60)
        #expect(events.map(\.sequence) == Array(1...50))
        #expect(events.enumerated().allSatisfy { $0.element.status == ($0.offset % 2 == 0 ? .signedIn : .signedOut) })
    }

    @Test("in-process events: NotificationCenter and AsyncStream, with the real keyring")
    func inProcess() async throws {
        let scenario = try await Scenario()
        let controller = try await scenario.controller()
        let stream = controller.events()
        let listener = try scenario.listener()
        try controller.signIn(User(name: "Dee", email: "dee@example.org"), password: "pw")
        try controller.signOut()
        var streamed: [LoginEvent] = []
        for await event in stream {
            streamed.append(event)
            if streamed.count == 2 { break }
        }
        let broadcast = try await collect(2, from: listener)
        #expect(streamed == broadcast)
        #expect(streamed.map(\.reason) == [.signIn, .signOut])
    }
}
