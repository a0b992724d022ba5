// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import Foundation
import Testing

/// A token server whose clock is more than ten years off (the longest span authctl keeps): its
/// absolute expiries are by that clock, and counted from its own `Date` header they are the
/// lifetimes it granted, so the session is as usable as with any other server.
@Suite("a json server whose clock is more than ten years off")
struct ServerClockTests {
    /// Eleven years, beyond `TokenTimes.maximumSpan`.
    static let elevenYears = 11 * 365 * 86_400

    @Test("sign-in gives a session that lasts as long as the server granted, by its clock eleven years ahead or behind",
          arguments: [elevenYears, -elevenYears])
    func clockBeyondTheLongestSpan(_ offset: Int) async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "clock_offset": offset, "access_lifetime": 600, "refresh_lifetime": 3600])
        let scenario = try await Scenario()
        let before = AuthController.systemClock()
        try await scenario.authctl("sign-in", "alice", "--server", server.json, "--protocol", "json", "--password-stdin", stdin: "pw").expect(0)
        let run = try await scenario.authctl("status", "--json")
        #expect(run.status == 0, "\(run)")
        let status = (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any] ?? [:]
        let accessExpiry = try #require(Timestamp.microseconds(rfc3339: status["accessTokenExpiresAt"] as? String ?? ""), "\(status)")
        let refreshExpiry = try #require(Timestamp.microseconds(rfc3339: status["refreshTokenExpiresAt"] as? String ?? ""), "\(status)")
        // Within the second the Date header cannot resolve, and the time the sign-in took.
        #expect(accessExpiry > before + 590_000_000, "\(status)")
        #expect(accessExpiry < AuthController.systemClock() + 610_000_000, "\(status)")
        #expect(refreshExpiry > before + 3_590_000_000, "\(status)")
        #expect(refreshExpiry < AuthController.systemClock() + 3_610_000_000, "\(status)")
        let token = try await scenario.authctl("token")
        #expect(token.status == 0, "\(token)")
        let requests = try server.log()
        #expect(try server.count("refresh") == 0, "\(token)\n\(requests)")
        #expect(try server.accepts(token.output), "\(token)")
    }
}
