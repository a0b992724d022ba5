// SPDX-License-Identifier: Apache-2.0
/// When a service needs `serve`'s run loop again: its token's refresh time and its session's
/// end (wall clock, µs since the epoch).
struct Schedule: Sendable, Equatable {
    var refreshAt: UInt64?
    var endsAt: UInt64?
    /// The threshold the background refresh passes to `accessToken(minValid:)`, in seconds.
    var minValid: UInt64 = 60
    /// The token server the refresh asks.
    var server: ServerURL?
    /// The earlier of the two moments.
    var next: UInt64? { [refreshAt, endsAt].compactMap { $0 }.min() }

    /// A signed-in bound service's access token is refreshed at about 80% of its lifetime (a
    /// minute before its expiry when the lifetime is unknown); its session ends at the refresh
    /// token's expiry. When the server issued no refresh token, the access token is never
    /// refreshed and the session ends when it expires. Nothing is scheduled for a signed-out
    /// or local service.
    init(_ status: LoginStatus, _ record: SessionRecord) {
        guard status.isSignedIn, status.server != nil, let times = record.tokenTimes else { return }
        server = status.server
        endsAt = times.sessionEndsAt
        guard times.renewable, let expiresAt = times.accessExpiresAt else { return }
        if let lifetime = times.accessLifetime, lifetime > 0 {
            refreshAt = expiresAt - min(expiresAt, lifetime.multipliedClamped(by: 200_000))
            // `token`'s threshold is capped at half the lifetime: at 80% the token is due.
            minValid = lifetime
        } else {
            refreshAt = expiresAt - min(expiresAt, 60_000_000)
        }
    }

    init(refreshAt: UInt64? = nil, endsAt: UInt64? = nil, minValid: UInt64 = 60, server: ServerURL? = nil) {
        self.refreshAt = refreshAt
        self.endsAt = endsAt
        self.minValid = minValid
        self.server = server
    }
}

/// What `serve` decides about refreshes, wake-ups and idleness, as a value: the inputs are
/// moments and outcomes, the outputs are decisions ("refresh now", "wake at T", "idle: stop").
/// It sets no timer and touches no bus; the run loop in ``LoginService`` carries the decisions
/// out.
///
/// Wall-clock moments are µs since the epoch (token expiries are wall-clock facts); idleness is
/// measured on the monotonic clock.
struct ServePolicy: Sendable {
    /// The longest a timer sleeps before the loop looks again. Timers are set from the wall
    /// clock but sleep on the monotonic one: after the wall clock steps (NTP after a resume),
    /// a refresh or a session's end is still noticed within this.
    static let longestSleep: UInt64 = 60_000_000
    /// How late a wake-up is set after the moment it is for: a few milliseconds late rather
    /// than early, since the session's end is judged by the clock.
    static let wakeMargin: UInt64 = 5_000
    /// The pause after a successful background refresh: however short the lifetime a server
    /// grants, at most one refresh a second.
    static let pauseAfterRefresh: UInt64 = 1_000_000
    /// The first pause after a failed refresh, doubled at each further failure up to
    /// ``longestBackoff`` (seconds).
    static let firstBackoff: Double = 4
    static let longestBackoff: Double = 60
    /// How many background refreshes ask one token server at once. Refreshes of many services
    /// run side by side, not one after another, but not all at once: two hundred answers
    /// arriving together kept the settings lock busy with their stores for about 4.5 s of the
    /// 5 s a store waits for it, and a store that waits longer loses its rotated refresh token.
    /// The others wait for a refresh of their server to end.
    static let refreshesPerServer = 16
    /// How many callers are watched for leaving the bus; more are not tracked (a peer cannot
    /// make the process grow), and only keep serve from going idle while they call.
    static let maximumWatchedCallers = 256

    /// `--idle-exit`, or `nil` to serve until stopped.
    let idleExit: Duration?
    /// Each service's schedule, as the last re-read found it.
    private(set) var schedules: [ServiceName: Schedule] = [:]
    /// The services whose background refresh is under way.
    private(set) var refreshing: Set<ServiceName> = []
    /// The server each refresh under way asks.
    private var refreshingAt: [ServiceName: ServerURL] = [:]
    /// The due services waiting for a refresh of their server to end, with the refresh moment
    /// they were due at (a later re-read may have moved it: then they wait no more).
    private(set) var waiting: [ServiceName: UInt64] = [:]
    private var backoff: [ServiceName: Double] = [:]
    private var notBefore: [ServiceName: UInt64] = [:]
    /// The peers that called and are still on the bus.
    private(set) var callers: Set<String> = []
    private(set) var lastActivity: ContinuousClock.Instant

    init(idleExit: Duration?, now: ContinuousClock.Instant) {
        self.idleExit = idleExit
        lastActivity = now
    }

    // MARK: - Refreshes and wake-ups

    /// A re-read's result replaces the schedules.
    mutating func reschedule(_ schedules: [ServiceName: Schedule]) {
        self.schedules = schedules
    }

    /// The moment each service wants the loop woken. None for a service whose refresh is under
    /// way: that refresh ends with a re-read that sets the next one, and a wake-up now would
    /// find the token still due and wake the loop at once, again and again. Likewise no refresh
    /// moment for a service waiting for its server (``startWaiting(now:)`` starts it). A refresh
    /// that failed is tried again after its pause, never in a tight loop.
    var wakeUps: [ServiceName: UInt64] {
        var moments: [ServiceName: UInt64] = [:]
        for (service, var schedule) in schedules where !refreshing.contains(service) {
            if let refreshAt = schedule.refreshAt, let notBefore = notBefore[service] {
                schedule.refreshAt = max(refreshAt, notBefore)
            }
            if let dueAt = waiting[service], dueAt == schedules[service]?.refreshAt { schedule.refreshAt = nil }
            if let next = schedule.next { moments[service] = next }
        }
        return moments
    }

    /// How long to sleep, in µs, for a wake-up at `moment` when it is `now`: at most
    /// ``longestSleep``, plus ``wakeMargin``.
    static func sleep(until moment: UInt64, now: UInt64) -> UInt64 {
        min(moment > now ? moment - now : 0, longestSleep) + wakeMargin
    }

    /// A wake-up of `service` came at `now`: whether to start its background refresh (its token
    /// is due, no refresh of it is under way, and fewer than ``refreshesPerServer`` of its
    /// server's; otherwise it waits for one to end). Starting one marks it under way.
    mutating func shouldRefresh(_ service: ServiceName, now: UInt64) -> Bool {
        guard let schedule = schedules[service], let refreshAt = schedule.refreshAt, refreshAt <= now,
              !refreshing.contains(service) else { return false }
        if let server = schedule.server {
            guard refreshingAt.values.count(where: { $0 == server }) < Self.refreshesPerServer else {
                waiting[service] = refreshAt
                return false
            }
            refreshingAt[service] = server
        }
        waiting[service] = nil
        refreshing.insert(service)
        return true
    }

    /// The waiting services whose refresh starts now that their server has room, earliest due
    /// first; each is marked under way. Those no longer due (a re-read moved their refresh, or
    /// their session is gone) wait no more, and get their wake-up again.
    mutating func startWaiting(now: UInt64) -> [ServiceName] {
        var started: [ServiceName] = []
        for (service, dueAt) in waiting.sorted(by: { ($0.value, $0.key.rawValue) < ($1.value, $1.key.rawValue) }) {
            guard schedules[service]?.refreshAt == dueAt else {
                waiting[service] = nil
                continue
            }
            if shouldRefresh(service, now: now) { started.append(service) }
        }
        return started
    }

    /// A background refresh of `service` ended at `now`; `retry`: it failed and is tried again
    /// after a pause that doubles with each failure.
    mutating func refreshEnded(_ service: ServiceName, retry: Bool, now: UInt64) {
        refreshing.remove(service)
        refreshingAt[service] = nil
        if retry {
            let pause = min(backoff[service].map { $0 * 2 } ?? Self.firstBackoff, Self.longestBackoff)
            backoff[service] = pause
            notBefore[service] = now.addingClamped(UInt64(pause * 1_000_000))
        } else {
            backoff[service] = nil
            notBefore[service] = now.addingClamped(Self.pauseAfterRefresh)
        }
    }

    // MARK: - Idleness

    /// Something happened that counts as activity (a call came or ended, a caller left).
    mutating func noteActivity(at now: ContinuousClock.Instant) {
        lastActivity = now
    }

    /// A call from `sender` came at `now`: whether to start watching it for leaving the bus.
    mutating func callerArrived(_ sender: String, at now: ContinuousClock.Instant) -> Bool {
        lastActivity = now
        guard !callers.contains(sender), callers.count < Self.maximumWatchedCallers else { return false }
        callers.insert(sender)
        return true
    }

    /// A caller left the bus at `now`.
    mutating func callerLeft(_ sender: String, at now: ContinuousClock.Instant) {
        callers.remove(sender)
        lastActivity = now
    }

    /// Idle: no call for `idleExit`, none running, no caller still connected, and no token to
    /// keep fresh or session to end.
    func isIdle(now: ContinuousClock.Instant, callsRunning: Int) -> Bool {
        guard let idleExit else { return false }
        return callsRunning == 0 && callers.isEmpty && schedules.values.allSatisfy { $0.next == nil }
            && now - lastActivity >= idleExit
    }

    /// When to look at idleness next: `idleExit` after the last activity (and not sooner than
    /// a few milliseconds from `now`); `nil` without `idleExit`.
    func idleCheck(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard let idleExit else { return nil }
        return max(lastActivity + idleExit, now + .milliseconds(10))
    }
}
