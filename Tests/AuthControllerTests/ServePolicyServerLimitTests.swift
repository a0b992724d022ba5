// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Testing

/// `serve`'s background refreshes of many services: side by side, but at most
/// `ServePolicy.refreshesPerServer` at once against one token server.
@Suite("serve policy: refreshes per token server")
struct ServePolicyServerLimitTests {
    let server = ServerURL(rawValue: "https://tokens.example/")!
    let other = ServerURL(rawValue: "https://other.example/")!
    let limit = ServePolicy.refreshesPerServer

    func services(_ count: Int, _ prefix: String = "app") -> [ServiceName] {
        (0..<count).map { ServiceName(rawValue: "io.example.\(prefix)\($0)")! }
    }

    func policy(_ schedules: [ServiceName: Schedule]) -> ServePolicy {
        var policy = ServePolicy(idleExit: nil, now: .now)
        policy.reschedule(schedules)
        return policy
    }

    /// A policy whose server has as many refreshes under way as it allows, and `others`
    /// scheduled besides; returns the busy services too.
    func busyPolicy(_ others: [ServiceName: Schedule]) -> (ServePolicy, [ServiceName]) {
        let busy = services(limit)
        var policy = policy(Dictionary(uniqueKeysWithValues: busy.map { ($0, Schedule(refreshAt: 1_000, server: server)) })
                                .merging(others) { _, other in other })
        for service in busy { _ = policy.shouldRefresh(service, now: 1_000) }
        return (policy, busy)
    }

    @Test("services due at once at one server: that many refreshes start, the others wait without a wake-up")
    func limitPerServer() {
        let due = services(limit + 3)
        var policy = policy(Dictionary(uniqueKeysWithValues: due.map { ($0, Schedule(refreshAt: 1_000, server: server)) }))
        let started = due.filter { policy.shouldRefresh($0, now: 1_000) }
        #expect(started.count == limit)
        #expect(policy.waiting.count == 3)
        #expect(policy.wakeUps.isEmpty)
    }

    @Test("another server's refreshes do not wait for this one's")
    func serversAreIndependent() {
        let elsewhere = ServiceName(rawValue: "io.example.elsewhere")!
        var (policy, _) = busyPolicy([elsewhere: Schedule(refreshAt: 1_000, server: other)])
        let started = policy.shouldRefresh(elsewhere, now: 1_000)
        #expect(started)
    }

    @Test("a refresh that ends starts the earliest due of those waiting")
    func endingStartsTheNext() {
        let later = ServiceName(rawValue: "io.example.later")!
        let earlier = ServiceName(rawValue: "io.example.earlier")!
        var (policy, busy) = busyPolicy([later: Schedule(refreshAt: 900, server: server), earlier: Schedule(refreshAt: 800, server: server)])
        _ = policy.shouldRefresh(later, now: 1_000)
        _ = policy.shouldRefresh(earlier, now: 1_000)
        policy.refreshEnded(busy[0], retry: false, now: 1_000)
        let started = policy.startWaiting(now: 1_000)
        #expect(started == [earlier])
        #expect(Array(policy.waiting.keys) == [later])
    }

    @Test("a waiting service whose refresh a re-read moved (another process refreshed it) waits no more and gets its wake-up")
    func movedRefreshWaitsNoMore() {
        let waiting = ServiceName(rawValue: "io.example.waiting")!
        var (policy, busy) = busyPolicy([waiting: Schedule(refreshAt: 1_000, server: server)])
        _ = policy.shouldRefresh(waiting, now: 1_000)
        var schedules = Dictionary(uniqueKeysWithValues: busy.map { ($0, Schedule(refreshAt: 1_000, server: server)) })
        schedules[waiting] = Schedule(refreshAt: 50_000, server: server)
        policy.reschedule(schedules)
        #expect(policy.wakeUps == [waiting: 50_000])
        let started = policy.startWaiting(now: 1_000)
        #expect(started.isEmpty)
        #expect(policy.waiting.isEmpty)
    }
}
