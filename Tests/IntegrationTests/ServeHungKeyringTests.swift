// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `authctl serve` while a `GetToken` waits for a keyring daemon that does not answer: the
/// refresh has changed nothing yet, so `GetStatus` of the same service still answers from what
/// serve knows, at once.
@Suite("serve: GetStatus while a GetToken of the same service waits for a stopped keyring")
struct ServeHungKeyringTests {
    @Test("with the keyring stopped, GetStatus of a bound service is answered at once while its GetToken waits")
    func getStatusWhileGetTokenWaits() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"]])
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        // The keyring announces the new item a moment after it answered (on a loaded machine,
        // seconds after): a serve that hears it forgets what it knows and reads again. So the
        // announcement is awaited before serve starts.
        let created = try await BusMonitor(scenario, rules: ["type='signal',interface='org.freedesktop.Secret.Collection',member='ItemCreated'"])
        try await scenario.authctl("sign-in", "alice", "--server", server.json, "--protocol", "json", "--password-stdin", stdin: "pw").expect(0)
        #expect(await created.wait { $0.member == "ItemCreated" }.count == 1, "\(created.messages)")
        // Keyring calls get 30 s, so the GetToken is still waiting when the GetStatus comes,
        // however long a loaded machine takes to start gdbus for it.
        let (serve, _) = try await scenario.startServe(["--keyring-timeout", "30"])
        defer { serve.signal(SIGKILL) }
        // Serve answers GetStatus from the state a re-read stored, which its object shows once
        // it is stored: the keyring is stopped only after that.
        let known = await eventually(within: .seconds(20)) { ((try? await scenario.sessionProperties(scenario.service)) ?? [:])["User"] == "alice" }
        try #require(known, "serve's object does not show alice: \(serve.stderr)")

        let daemon = try #require(sandbox.keyringProcessID)
        kill(daemon, SIGSTOP)
        defer { kill(daemon, SIGCONT) }
        let monitor = try await BusMonitor(scenario, rules: ["type='method_call',interface='\(ServeBus.interface)',member='GetToken'"])
        // It reads the tokens from the keyring, which answers nothing: the call waits for the
        // keyring's deadline, 30 s.
        let getToken = try await Spawned(try which("gdbus", package: "libglib2.0-bin"),
                                         ["call", "--session", "--dest", ServeBus.name, "--object-path", ServeBus.path,
                                          "--method", ServeBus.interface + ".GetToken", scenario.service, "60"],
                                         input: nil, environment: scenario.environment)
        // Serve received the GetToken before the GetStatus: the bus delivers them in this order.
        let sent = await monitor.wait { $0.kind == "method call" && $0.member == "GetToken" }
        #expect(sent.count == 1, "\(monitor.messages)")

        // At once, not behind the suite's limit on processes running together.
        let status = await (try Spawned(try which("gdbus", package: "libglib2.0-bin"),
                                        ["call", "--session", "--dest", ServeBus.name, "--object-path", ServeBus.path,
                                         "--method", ServeBus.interface + ".GetStatus", scenario.service],
                                        input: nil, environment: scenario.environment)).wait(timeout: 60)
        #expect(status.status == 0, "\(status)\n\(serve.stderr)")
        #expect(GVariantText.dictionary(status.stdout)["user"] == "alice", "\(status)")
        // A keyring call's deadline is 30 s: an answer within 4 s did not wait for the keyring
        // (the margin is for starting gdbus on a loaded machine).
        #expect(status.seconds < 4, "\(status)")
        print("serve: GetStatus answered in \(status.seconds) s while GetToken waited for the stopped keyring")
        kill(daemon, SIGCONT)
        _ = await getToken.wait(timeout: 60)
    }
}
