import AuthController
@testable import AuthControllerCore
import DesktopSandbox
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `authctl serve` (`authctl.serve(1)`) with many bound services whose tokens are due at once:
/// their refreshes run side by side, not one after another, and SIGTERM starts no refresh that
/// has not reached the server yet, so serve ends promptly.
@Suite("serve with many refreshes due: side by side, and none started after SIGTERM")
struct ServeShutdownTests {
    /// Enough services to show a queue on a two-core machine, few enough to sign in quickly.
    static let serviceCount = 40
    /// How long the token server takes to answer each refresh: a refresh that reached it is
    /// still under way when SIGTERM comes.
    static let refreshDelay = 2.0

    /// A private bus and keyring, `serviceCount` services sharing one settings folder, each with
    /// alice signed in at `server` with an access token that is already due.
    func signedIn(at server: TokenServer) async throws -> (DesktopSandbox, Scenario, [String]) {
        let sandbox = try await DesktopSandbox.started(startupTimeout: 20)
        let base = try await Scenario(sandbox: sandbox)
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 1, "refresh_lifetime": 3600])
        let services = (0..<Self.serviceCount).map { "\(base.service)-\($0)" }
        // A few at a time: forty sign-ins one after another take long on a loaded machine.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, service) in services.enumerated() {
                if index >= 4 { try await group.next() }
                var scenario = base
                scenario.extraEnvironment["AUTHCTL_SERVICE"] = service
                group.addTask {
                    try await scenario.authctl("sign-in", "alice", "--server", server.json, "--protocol", "json",
                                               "--password-stdin", stdin: "pw").expect(0)
                }
            }
            try await group.waitForAll()
        }
        // Every access token expires a second after its sign-in: wait until all have, so that
        // serve finds every one of them due as soon as it starts.
        try await sleepUntilWallClock(AuthController.systemClock() + 1_100_000)
        return (sandbox, base, services)
    }

    /// The arrival times (seconds since the epoch) of the refresh requests the server logged.
    func refreshArrivals(_ server: TokenServer) throws -> [Double] {
        try server.log().filter { $0["endpoint"] as? String == "refresh" }.compactMap { $0["time"] as? Double }.sorted()
    }

    @Test("forty services due at once: refreshes overlap; SIGTERM ends serve within 5 s and no refresh reaches the server after it")
    func sigtermWithManyRefreshesDue() async throws {
        let server = try await TokenServer()
        let (sandbox, scenario, services) = try await signedIn(at: server)
        defer { sandbox.stop() }
        try server.configure(["refresh_delay": Self.refreshDelay])

        let (serve, _) = try await scenario.startServe()
        defer { serve.signal(SIGKILL) }
        // Refreshes under way: the first reached the server, whose answers take `refreshDelay`.
        let started = try await eventually(within: .seconds(30)) { try refreshArrivals(server).count >= 1 }
        try #require(started, "no refresh reached the server: \(serve.stderr)")
        // Those that run side by side reach it together, before any answer came back.
        _ = try await eventually(within: .seconds(Self.refreshDelay / 2)) { try refreshArrivals(server).count >= Self.serviceCount }
        let beforeSignal = try refreshArrivals(server)

        let signalled = Date()
        serve.signal(SIGTERM)
        let ended = await serve.wait(timeout: 120)
        let exitTime = Date().timeIntervalSince(signalled)
        let arrivals = try refreshArrivals(server)
        let late = arrivals.filter { $0 > signalled.timeIntervalSince1970 }
        print("serve: \(beforeSignal.count) of \(services.count) refreshes reached the server within \(Self.refreshDelay / 2) s of the first;",
              "exit \(exitTime) s after SIGTERM; \(late.count) refreshes reached the server after it",
              "(\(late.map { String(format: "%.2f", $0 - signalled.timeIntervalSince1970) }))")
        #expect(ended.status == 0, "\(ended)")
        // Independent refreshes are not queued behind each other: all were sent before the
        // first answer came back.
        #expect(beforeSignal.count == services.count, "\(beforeSignal.count) of \(services.count)")
        // Stopping waits for the refreshes under way (their answers take `refreshDelay`), and
        // starts none: a queue of refreshes behind them took 10 s and more.
        #expect(exitTime < 5 + Self.refreshDelay, "\(exitTime) s\n\(ended.stderr)")
        #expect(late.isEmpty, "\(late.count) refreshes reached the server after SIGTERM")
    }
}
