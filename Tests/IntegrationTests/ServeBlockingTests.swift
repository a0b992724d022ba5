// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `authctl serve` while what it reads blocks: a keyring daemon that does not answer, a
/// settings lock another process holds. Blocking work runs off the cooperative pool, so other
/// calls and SIGTERM are not kept waiting. Each test has a sandbox of its own (its keyring is
/// stopped, and serve owns one name per bus).
@Suite("serve while the keyring or the settings lock blocks")
struct ServeBlockingTests {
    /// A private bus and keyring, a scenario in it where alice is signed in, and a running
    /// `serve` whose object shows her (its state is known).
    func servingAlice() async throws -> (DesktopSandbox, Scenario, Spawned) {
        let sandbox = try await DesktopSandbox.started()
        let scenario = try await Scenario(sandbox: sandbox)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let (serve, _) = try await scenario.startServe()
        let shown = await eventually(within: .seconds(20)) { ((try? await scenario.sessionProperties(scenario.service)) ?? [:])["User"] == "alice" }
        #expect(shown, "serve's object does not show alice: \(serve.stderr)")
        return (sandbox, scenario, serve)
    }

    /// `gdbus call` of `method` on serve, started without waiting for it.
    func startCall(_ scenario: Scenario, _ method: String, _ arguments: String...) async throws -> Spawned {
        try await Spawned(try which("gdbus", package: "libglib2.0-bin"),
                          ["call", "--session", "--dest", ServeBus.name, "--object-path", ServeBus.path,
                           "--method", ServeBus.interface + "." + method] + arguments,
                          input: nil, environment: scenario.environment)
    }

    /// Runs `body` with ``servingAlice()``'s scenario and serve while the sandbox's keyring
    /// daemon is stopped (SIGSTOP: it holds its bus name and answers nothing).
    func withKeyringStopped(_ body: (Scenario, Spawned) async throws -> Void) async throws {
        let (sandbox, scenario, serve) = try await servingAlice()
        defer { sandbox.stop() }
        defer { serve.signal(SIGKILL) }
        let daemon = try #require(sandbox.keyringProcessID)
        kill(daemon, SIGSTOP)
        defer { kill(daemon, SIGCONT) }
        try await body(scenario, serve)
    }

    @Test("with the keyring daemon stopped, GetStatus of a known service and Ping are answered at once")
    func answersWhileTheKeyringIsStopped() async throws {
        try await withKeyringStopped { scenario, serve in
            let status = try await scenario.call("GetStatus", scenario.service)
            #expect(status.status == 0, "\(status)\n\(serve.stderr)")
            #expect(GVariantText.dictionary(status.stdout)["user"] == "alice", "\(status)")
            // A keyring call's deadline is 5 s: an answer sooner did not wait for the keyring
            // (the rest of the margin is for starting gdbus on a loaded machine).
            #expect(status.seconds < 4, "\(status)")
            let ping = try await scenario.call("Ping", interface: "org.freedesktop.DBus.Peer")
            #expect(ping.status == 0, "\(ping)")
            #expect(ping.seconds < 4, "\(ping)")
        }
    }

    @Test("SIGTERM ends serve within 5 s with ten calls waiting for a stopped keyring, which are answered with an error")
    func terminatesWithCallsQueuedBehindTheKeyring() async throws {
        try await withKeyringStopped { scenario, serve in
            let monitor = try await BusMonitor(scenario, rules: ["type='method_call',interface='\(ServeBus.interface)',member='ListAccounts'"])
            var calls: [Spawned] = []
            for _ in 0..<10 { calls.append(try await startCall(scenario, "ListAccounts", scenario.service)) }
            let queued = await monitor.wait(for: 10) { $0.kind == "method call" && $0.member == "ListAccounts" }
            #expect(queued.count == 10)

            let signalled = Date()
            serve.signal(SIGTERM)
            let ended = await serve.wait(timeout: 30)
            #expect(ended.status == 0, "\(ended)")
            #expect(Date().timeIntervalSince(signalled) < 5)
            for call in calls {
                let answered = await call.wait(timeout: 30)
                #expect(answered.dbusError?.name == "io.github.authctl.Error.Unavailable", "\(answered)")
            }
        }
    }

    @Test("GetStatus is answered at once while another process holds the settings lock and sign-outs wait for it")
    func answersWhileTheSettingsLockIsHeld() async throws {
        let (sandbox, scenario, serve) = try await servingAlice()
        defer { sandbox.stop() }
        defer { serve.signal(SIGKILL) }
        let holder = try await Spawned(try which("flock", package: "util-linux"),
                                       ["--exclusive", scenario.settingsDirectory + "/settings.lock", "--command", "echo locked; exec sleep 600"],
                                       input: nil, environment: scenario.environment)
        defer { holder.signal(SIGKILL) }
        #expect(await holder.waitForLines(1) == ["locked"])

        // Each sign-out waits up to 5 s for the lock: before blocking work left the cooperative
        // pool, two of them held both of a two-core machine's threads.
        let monitor = try await BusMonitor(scenario, rules: ["type='method_call',interface='\(ServeBus.interface)',member='SignOut'"])
        var signOuts: [Spawned] = []
        for _ in 0..<4 { signOuts.append(try await startCall(scenario, "SignOut", scenario.service)) }
        let queued = await monitor.wait(for: 4) { $0.kind == "method call" && $0.member == "SignOut" }
        #expect(queued.count == 4)

        let status = try await scenario.call("GetStatus", scenario.service)
        #expect(status.status == 0, "\(status)\n\(serve.stderr)")
        // The lock's wait is 5 s: an answer sooner waited neither for it nor for the sign-outs.
        #expect(status.seconds < 4, "\(status)")
        for signOut in signOuts { _ = await signOut.wait(timeout: 30) }
    }
}

/// `GetStatus` answers from serve's last re-read only while nothing may have changed the state.
@Suite("serve: GetStatus from the last re-read")
struct ServeKnownStateTests {
    @Test("the keyring locked after the re-read: GetStatus says so at once")
    func keyringLockedAfterTheReread() async throws {
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let (serve, _) = try await scenario.startServe()
        defer { serve.signal(SIGKILL) }
        var status = try await scenario.call("GetStatus", scenario.service)
        #expect(GVariantText.dictionary(status.stdout)["keyringLocked"] == "false", "\(status)")
        try await scenario.lockKeyring()
        status = try await scenario.call("GetStatus", scenario.service)
        #expect(GVariantText.dictionary(status.stdout)["keyringLocked"] == "true", "\(status)\n\(serve.stderr)")
    }
}
