// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Testing

/// `serve`'s decisions as a value: refreshes, wake-ups, back-off and idleness, with the clock
/// given, no timer and no bus.
@Suite("serve policy: refreshes, wake-ups, back-off, idleness")
struct ServePolicyTests {
    let service = ServiceName(rawValue: "io.example.app")!
    let start = ContinuousClock.now

    func policy(idleExit: Duration? = nil, _ schedules: [ServiceName: Schedule] = [:]) -> ServePolicy {
        var policy = ServePolicy(idleExit: idleExit, now: start)
        policy.reschedule(schedules)
        return policy
    }

    @Test("a service wakes the loop at the earlier of its refresh time and its session's end")
    func wakeUpAtTheEarlierMoment() {
        let policy = policy([service: Schedule(refreshAt: 2_000, endsAt: 1_000)])
        #expect(policy.wakeUps == [service: 1_000])
    }

    @Test("a service with nothing scheduled sets no wake-up")
    func nothingScheduled() {
        #expect(policy([service: Schedule()]).wakeUps.isEmpty)
    }

    @Test("a wake-up at or after the refresh time starts one refresh")
    func refreshWhenDue() {
        var policy = policy([service: Schedule(refreshAt: 1_000)])
        let refresh = policy.shouldRefresh(service, now: 1_000)
        #expect(refresh)
    }

    @Test("a wake-up before the refresh time (the longest sleep passed) starts none")
    func noRefreshBeforeDue() {
        var policy = policy([service: Schedule(refreshAt: 1_000)])
        let refresh = policy.shouldRefresh(service, now: 999)
        #expect(!refresh)
    }

    @Test("no second refresh while one is under way, and no wake-up for that service meanwhile")
    func oneRefreshAtATime() {
        var policy = policy([service: Schedule(refreshAt: 1_000, endsAt: 9_000)])
        _ = policy.shouldRefresh(service, now: 1_000)
        let second = policy.shouldRefresh(service, now: 1_001)
        #expect(!second)
        #expect(policy.wakeUps.isEmpty)
    }

    @Test("after a refresh, the next is not before a second has passed, however soon the token is due")
    func pauseAfterSuccess() {
        var policy = policy([service: Schedule(refreshAt: 1_000)])
        _ = policy.shouldRefresh(service, now: 1_000)
        policy.refreshEnded(service, retry: false, now: 1_000)
        #expect(policy.wakeUps == [service: 1_000 + 1_000_000])
    }

    @Test("failed refreshes are tried again after 4, 8, 16, 32, then 60 s, never sooner")
    func backoff() {
        var policy = policy([service: Schedule(refreshAt: 0)])
        var pauses: [UInt64] = []
        for _ in 0..<6 {
            _ = policy.shouldRefresh(service, now: 0)
            policy.refreshEnded(service, retry: true, now: 0)
            pauses.append(policy.wakeUps[service] ?? 0)
        }
        #expect(pauses == [4, 8, 16, 32, 60, 60].map { $0 * 1_000_000 })
    }

    @Test("a success ends the back-off: the next failure pauses 4 s again")
    func backoffResets() {
        var policy = policy([service: Schedule(refreshAt: 0)])
        for retry in [true, true, false, true] {
            _ = policy.shouldRefresh(service, now: 0)
            policy.refreshEnded(service, retry: retry, now: 0)
        }
        #expect(policy.wakeUps == [service: 4_000_000])
    }

    @Test("a timer sleeps until its moment, a few milliseconds late, and never longer than a minute",
          arguments: [(UInt64(10_000_000), UInt64(0), UInt64(10_005_000)), (5, 10, 5_000), (3_600_000_000, 0, 60_005_000)])
    func sleeps(moment: UInt64, now: UInt64, sleep: UInt64) {
        #expect(ServePolicy.sleep(until: moment, now: now) == sleep)
    }

    @Test("without --idle-exit, never idle")
    func neverIdleWithoutIdleExit() {
        #expect(!policy().isIdle(now: start + .seconds(86_400), callsRunning: 0))
    }

    @Test("idle once --idle-exit has passed since the last activity with nothing to do")
    func idleAfterIdleExit() {
        #expect(policy(idleExit: .seconds(5)).isIdle(now: start + .seconds(5), callsRunning: 0))
    }

    @Test("not idle before --idle-exit has passed")
    func notIdleTooSoon() {
        #expect(!policy(idleExit: .seconds(5)).isIdle(now: start + .seconds(4), callsRunning: 0))
    }

    @Test("not idle while a call runs")
    func notIdleWhileCalling() {
        #expect(!policy(idleExit: .seconds(5)).isIdle(now: start + .seconds(10), callsRunning: 1))
    }

    @Test("not idle while a token is kept fresh or a session is to be ended")
    func notIdleWithSchedules() {
        let policy = policy(idleExit: .seconds(5), [service: Schedule(endsAt: 1)])
        #expect(!policy.isIdle(now: start + .seconds(10), callsRunning: 0))
    }

    @Test("not idle while a caller is still on the bus; idle again once it leaves and the time passes")
    func callers() {
        var policy = policy(idleExit: .seconds(5))
        _ = policy.callerArrived(":1.7", at: start)
        #expect(!policy.isIdle(now: start + .seconds(10), callsRunning: 0))
        policy.callerLeft(":1.7", at: start + .seconds(10))
        #expect(!policy.isIdle(now: start + .seconds(14), callsRunning: 0))
        #expect(policy.isIdle(now: start + .seconds(15), callsRunning: 0))
    }

    @Test("a caller is watched once, and no more than 256 are")
    func callerWatchLimit() {
        var policy = policy(idleExit: .seconds(5))
        let first = policy.callerArrived(":1.1", at: start)
        #expect(first)
        let again = policy.callerArrived(":1.1", at: start)
        #expect(!again)
        for index in 2...256 { _ = policy.callerArrived(":1.\(index)", at: start) }
        let beyond = policy.callerArrived(":1.999", at: start)
        #expect(!beyond)
    }

    @Test("the idle check is set for --idle-exit after the last activity")
    func idleCheck() {
        var policy = policy(idleExit: .seconds(5))
        policy.noteActivity(at: start + .seconds(2))
        #expect(policy.idleCheck(now: start + .seconds(3)) == start + .seconds(7))
    }

    @Test("an idle check whose time has passed is set a few milliseconds from now")
    func idleCheckOverdue() {
        let policy = policy(idleExit: .seconds(5))
        #expect(policy.idleCheck(now: start + .seconds(9)) == start + .seconds(9) + .milliseconds(10))
    }
}
