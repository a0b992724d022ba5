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

/// `authctl serve` (`authctl.serve(1)`) with many bound services whose tokens are due at once:
/// their refreshes run side by side (a few at a time per token server), not one after another,
/// and SIGTERM starts no refresh that has not sent its request yet, so serve ends promptly.
@Suite("serve with many refreshes due: side by side, and none started after SIGTERM")
struct ServeShutdownTests {
    /// Enough services to show a queue on a two-core machine, few enough to sign in quickly.
    static let serviceCount = 40
    /// How long the token server takes to answer each refresh: a refresh that reached it is
    /// still under way when SIGTERM comes.
    static let refreshDelay = 3.0

    /// A private bus and keyring, `count` services sharing one settings folder, each with alice
    /// signed in at `server` with an access token that is already due.
    func signedIn(at server: TokenServer, count: Int = serviceCount) async throws -> (DesktopSandbox, Scenario, [String]) {
        let sandbox = try await DesktopSandbox.started()
        let base = try await Scenario(sandbox: sandbox)
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 3600, "refresh_lifetime": 3600])
        let services = (0..<count).map { "\(base.service)-\($0)" }
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
        // Every access token has expired, so that serve finds every one of them due as soon as it
        // starts.
        for service in services { try base.expireAccessToken(service: service) }
        return (sandbox, base, services)
    }

    /// The arrival times (seconds since the epoch) of the refresh requests the server logged.
    func refreshArrivals(_ server: TokenServer) throws -> [Double] {
        try server.log().filter { $0["endpoint"] as? String == "refresh" }.compactMap { $0["time"] as? Double }.sorted()
    }

    /// The refresh tokens of every service's keyring item in the sandbox.
    func storedRefreshTokens(_ scenario: Scenario) async throws -> [String] {
        let run = try await scenario.secretTool("search", "--all", "account", "alice")
        return run.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("secret = "),
                  let object = try? JSONSerialization.jsonObject(with: Data(line.dropFirst("secret = ".count).utf8)) as? [String: Any]
            else { return nil }
            return object["refreshToken"] as? String
        }
    }

    @Test("forty services due at once: their refreshes overlap; SIGTERM starts no more, and ends serve within 5 s plus the refreshes under way, which store what they got")
    func sigtermWithManyRefreshesDue() async throws {
        let server = try await TokenServer()
        let (sandbox, scenario, services) = try await signedIn(at: server)
        defer { sandbox.stop() }
        // Refreshed tokens last an hour: each service is refreshed once.
        try server.configure(["refresh_delay": Self.refreshDelay, "access_lifetime": 3600])

        let monitor = try await BusMonitor(scenario, rules: ["type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(ServeBus.name)'"])
        let (serve, _) = try await scenario.startServe()
        defer { serve.signal(SIGKILL) }
        let started = try await eventually(within: .seconds(30)) { try refreshArrivals(server).count >= 1 }
        try #require(started, "no refresh reached the server: \(serve.stderr)")
        let first = try #require(try refreshArrivals(server).first)
        // Refreshes that run side by side reach the server before its first answer, which takes
        // `refreshDelay`: as many as serve sends one server at once. One after another, a few
        // at a time, they did not.
        let sideBySide = ServePolicy.refreshesPerServer
        _ = try await eventually(within: .seconds(Self.refreshDelay - (Date().timeIntervalSince1970 - first))) {
            try refreshArrivals(server).count >= sideBySide
        }
        let together = try refreshArrivals(server).filter { $0 < first + Self.refreshDelay }

        let signalled = Date()
        serve.signal(SIGTERM)
        let ended = await serve.wait(timeout: 120)
        let exitTime = Date().timeIntervalSince(signalled)
        // Serve gives up its name first when it stops.
        let released = monitor.messages.first { $0.strings.count == 3 && $0.strings[0] == ServeBus.name && $0.strings[2].isEmpty }
        let arrivals = try refreshArrivals(server)
        // Serve handles SIGTERM within milliseconds; the second is for a loaded machine, where
        // a request sent before it may arrive a little later.
        let late = arrivals.filter { $0 > signalled.timeIntervalSince1970 + 1 }
        print("serve: \(together.count) of \(services.count) refreshes reached the server before its first answer;",
              "exit \(exitTime) s after SIGTERM, its name released \(released.map { $0.time - signalled.timeIntervalSince1970 } ?? -1) s after it;",
              "\(arrivals.count) refreshes in all, \(late.count) more than 1 s after SIGTERM")
        #expect(ended.status == 0, "\(ended)")
        #expect(together.count >= sideBySide, "\(together.count) of \(services.count)")
        // Stopping waits for the refreshes under way (their answers take `refreshDelay`) and
        // starts none of those waiting for their turn: a queue of them took 10 s and more.
        #expect(exitTime < 5 + Self.refreshDelay, "\(exitTime) s\n\(ended.stderr)")
        #expect(released != nil, "\(monitor.messages)")
        #expect(late.isEmpty, "\(late.count) refreshes reached the server more than 1 s after SIGTERM")
        // The server retired each old refresh token when it answered: the answers were stored,
        // and the refreshes never sent left the old tokens in place.
        let live = Set(try server.liveRefreshTokens())
        let stored = try await storedRefreshTokens(scenario)
        #expect(stored.count == services.count, "\(stored.count) items")
        #expect(stored.allSatisfy(live.contains), "\(stored.filter { !live.contains($0) }.count) stored refresh tokens are no longer live")
    }

    @Test("a refresh that has not sent its request when SIGTERM comes sends none")
    func sigtermBeforeTheRequest() async throws {
        let server = try await TokenServer()
        let (sandbox, scenario, services) = try await signedIn(at: server, count: 2)
        defer { sandbox.stop() }
        // Another process is refreshing the first service (it holds its refresh lock), so
        // serve's refresh of it waits for the lock, its request not sent.
        let lock = open(scenario.settingsDirectory + "/refresh-\(GLibText.md5Hex(services[0])).lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(lock >= 0)
        var lockHeld = flock(lock, LOCK_EX) == 0
        try #require(lockHeld)
        defer { if lockHeld { close(lock) } }

        let (serve, _) = try await scenario.startServe()
        defer { serve.signal(SIGKILL) }
        // Both tokens were due when serve started: the second one's refresh reached the server,
        // so the first one's is under way too, waiting for the lock.
        let started = try await eventually(within: .seconds(30)) { try refreshArrivals(server).count >= 1 }
        try #require(started, "no refresh reached the server: \(serve.stderr)")

        serve.signal(SIGTERM)
        // Serve handled SIGTERM (it releases its name when it stops); only then does the other
        // process finish, and the lock is free.
        let released = try await eventually(within: .seconds(30)) { try await scenario.nameOwner() == nil }
        #expect(released, "serve still owns its name: \(serve.stderr)")
        close(lock)
        lockHeld = false
        let freed = Date()
        let ended = await serve.wait(timeout: 120)
        let exitTime = Date().timeIntervalSince(freed)
        let arrivals = try refreshArrivals(server)
        print("serve: exit \(exitTime) s after the other process's refresh ended, which was after SIGTERM; \(arrivals.count) refreshes reached the server")
        #expect(ended.status == 0, "\(ended)")
        #expect(arrivals.count == 1, "\(arrivals.count) refreshes reached the server\n\(ended.stderr)")
        // Once the refresh it waited for is over, serve ends without sending its own.
        #expect(exitTime < 5, "\(exitTime) s\n\(ended.stderr)")
    }
}
