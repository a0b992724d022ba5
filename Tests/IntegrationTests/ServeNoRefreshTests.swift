// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import Foundation
import Testing

/// `authctl serve` (`authctl.serve(1)`) with a token server that issues no refresh token.
@Suite("authctl serve: a server that issues no refresh token")
struct ServeNoRefreshTests {
    @Test("no refresh token: serve never refreshes, and sends `expired` within 1 s of the access token's expiry, not before")
    func expiredWithTheAccessToken() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 5, "issue_refresh": false])
        let (scenario, fixture) = try await SharedServe.scenario()
        let service = scenario.service
        let path = LoginService.objectPath(of: scenario.serviceName)
        let monitor = try await BusMonitor(scenario, rules: serveRules)
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        // The expiry as serve announced it (a `status` run later may find the session over already).
        let announced = await monitor.wait { $0.body.contains(path) || $0.path == path ? ($0.uint64("AccessTokenExpiresAt") ?? 0) > 0 : false }
        let ends = Double(try #require(announced.first?.uint64("AccessTokenExpiresAt"), "\(monitor.messages)")) / 1e6
        let events = await monitor.wait { BusMonitor.loginStatusChanged(service)($0) && $0.value("reason") == "expired" }
        let event = try #require(events.first, "\(monitor.messages)")
        print("serve: `expired` sent", event.time - ends, "s after the access token's expiry (no refresh token)")
        #expect(event.time >= ends - 0.01, "\(event.time - ends)")
        #expect(event.time - ends < 1, "\(event.time - ends)")
        #expect(event.sender == fixture.owner, "\(event)")
        #expect(event.strings.prefix(3) == [service, "signed-out", "alice"], "\(event)")
        #expect(try server.count("refresh") == 0)
        try await scenario.authctl("status").expect(1)
        #expect(try await scenario.secretTool("search", "service", service).stdout.isEmpty)
    }
}
