// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Testing

/// What `serve` schedules for a signed-in bound service, from the times its settings keep.
@Suite("serve policy: the schedule of a bound session")
struct ServePolicyScheduleTests {
    let service = ServiceName(rawValue: "io.example.app")!
    let arrivedAt: UInt64 = 1_795_000_000_000_000

    /// The schedule of alice's session after the server answered with `tokens`, an access token
    /// of 300 s and a refresh token of an hour (when there is one).
    func schedule(_ tokens: TokenSet) throws -> Schedule {
        let grant = TokenGrant(tokens: tokens, accessExpiry: .after(seconds: 300),
                               refreshExpiry: tokens.refreshToken == nil ? nil : .after(seconds: 3600), arrivedAt: arrivedAt)
        var status = LoginStatus(service: service, account: AccountID(rawValue: "alice"), sequence: 1, keyringLocked: false)
        status.server = try ServerURL(validating: "https://auth.test/token")
        let record = SessionRecord(user: AccountID(rawValue: "alice"), sequence: 1,
                                   binding: ServerBinding(server: status.server!), tokenTimes: grant.times())
        return Schedule(status, record)
    }

    @Test("with a refresh token: refreshed at 80% of the access token's life, ended at the refresh token's expiry")
    func renewableSession() throws {
        let schedule = try schedule(TokenSet(accessToken: "a", refreshToken: "r"))
        #expect(schedule.refreshAt == arrivedAt + 240_000_000)
        #expect(schedule.endsAt == arrivedAt + 3_600_000_000)
    }

    @Test("without a refresh token: never refreshed, ended when the access token expires")
    func sessionWithoutRefreshToken() throws {
        let schedule = try schedule(TokenSet(accessToken: "a"))
        #expect(schedule.refreshAt == nil)
        #expect(schedule.endsAt == arrivedAt + 300_000_000)
    }
}
