// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// `authctl serve` (`authctl.serve(1)`): the login state as a D-Bus service that owns the name
/// `io.github.authctl`.
///
/// - Methods of `io.github.authctl.AuthController1` at ``objectPath``: `GetStatus`,
///   `ListAccounts`, `GetToken` (sharing the refresh lock with every `authctl token`), `SignOut`.
/// - One `io.github.authctl.Session1` object per service with a settings group, listed by the
///   `ObjectManager` at ``objectPath``, its properties kept current: the service re-reads a
///   service's state whenever anything may have changed it — a `LoginStatusChanged` signal
///   (any process), the settings file (a token refresh or a binding changes no event), or the
///   keyring (`ItemCreated`/`ItemDeleted`/`ItemChanged` of any collection).
/// - Background work: tokens of signed-in bound services are refreshed at about 80% of their
///   lifetime, and a session whose refresh token expires or whose item disappears is ended at
///   once, with its event sent from the well-known name.
///
/// The GDBus side (objects, subscriptions, the name) lives on one GLib main-loop thread; the
/// work (keyring, settings, servers) runs in tasks whose blocking steps run off the
/// cooperative pool, and the one loop in ``run(signals:)`` carries out, one trigger at a time,
/// what the serving policy decides: what to re-read, when to wake, and when to stop. `GetStatus`
/// answers from the last re-read while nothing may have changed the service's state since, so
/// a keyring that does not answer delays the re-read, not every caller.
package final class LoginService: Sendable {
    /// The well-known name.
    package static let busName = "io.github.authctl"
    /// The object path of the methods and the object manager.
    package static let objectPath = DBusBroadcaster.objectPath
    /// The interface of the per-service objects.
    package static let sessionInterface = "io.github.authctl.Session1"

    /// Why ``run(signals:)`` returned.
    package enum Ending: Sendable, Equatable {
        /// SIGINT or SIGTERM.
        case signalled
        /// Another `serve --replace` took the name over.
        case replaced
        /// `--idle-exit` seconds passed with nothing to do.
        case idle
    }

    let settings: any SettingsStore
    let settingsFile: String?
    private let busAddress: String?
    private let replace: Bool
    private let idleExit: Double?
    private let makeController: @Sendable (ServiceName) -> AuthController
    /// Whether sessions that end without the person asking are told on the desktop.
    let notifications: Bool
    /// The events of the kept controllers: the ends serve finds itself.
    let ownEvents: AsyncStream<LoginEvent>
    private let ownEventSink: AsyncStream<LoginEvent>.Continuation
    /// Where the warnings of calls and background refreshes go (a revocation that failed, a
    /// token handed out unrefreshed).
    let warn: @Sendable (AuthError.Message) -> Void
    private let controllers = Mutex<[ServiceName: AuthController]>([:])

    /// - Parameters:
    ///   - settings: where the services' records are.
    ///   - settingsFile: the file to watch for changes made without an event (a token refresh,
    ///     a new binding); `nil` to rely on `LoginStatusChanged` alone.
    ///   - busAddress: the bus to serve on (`nil`: the session bus). The controllers must use
    ///     the same bus, so that their signals come from the name's owner.
    ///   - replace: take the name over from a running `serve`.
    ///   - idleExit: return ``Ending/idle`` after that many seconds with no call, no peer that
    ///     called and is still connected, and no token to refresh.
    ///   - notifications: tell the person on the desktop, through its notification server, when
    ///     a session ends without their asking (`expired`, `removed`), offering the browser
    ///     sign-in for a service bound to an OpenID provider.
    ///   - warnings: told each warning of a call or a background refresh (a revocation that
    ///     failed, a token handed out unrefreshed); the service itself prints nothing.
    ///   - controller: makes the controller of a service (one per service is kept, so that its
    ///     in-process refresh is shared by every caller).
    package init(settings: any SettingsStore, settingsFile: String?, busAddress: String? = nil, replace: Bool = false,
                idleExit: Double? = nil, notifications: Bool = true, warnings: @escaping @Sendable (AuthError.Message) -> Void = { _ in },
                controller: @escaping @Sendable (ServiceName) -> AuthController) {
        self.notifications = notifications
        (ownEvents, ownEventSink) = AsyncStream<LoginEvent>.makeStream()
        self.settings = settings
        self.settingsFile = settingsFile
        self.busAddress = busAddress
        self.replace = replace
        self.idleExit = idleExit
        warn = warnings
        makeController = controller
    }

    /// The object path of a service's `Session1` object: each byte outside `[A-Za-z0-9]` is
    /// written as `_` and two lower-case hex digits (`io.github.authctl` →
    /// `…/services/io_2egithub_2eauthctl`).
    package static func objectPath(of service: ServiceName) -> String {
        var escaped = ""
        for byte in service.rawValue.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                escaped.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                escaped += "_" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
            }
        }
        return objectPath + "/services/" + escaped
    }

    /// The controller of `service`. Those of services with a settings group are kept (their
    /// in-process refresh is then shared by every call); a name any peer may send is not, so
    /// callers cannot make the process grow.
    func controller(for service: ServiceName) -> AuthController {
        controllers.withLock { controllers in
            if let controller = controllers[service] { return controller }
            let controller = makeController(service)
            if knownServices.withLock({ $0.contains(service) }) {
                controllers[service] = controller
                // Subscribed now, so that no event of the controller comes before the stream.
                let events = controller.events()
                let sink = ownEventSink
                Task { for await event in events { sink.yield(event) } }
            }
            return controller
        }
    }

    let knownServices = Mutex<Set<ServiceName>>([])
    let knownStates = KnownStates()
    let exportedObjects = Mutex<Exported?>(nil)

    /// What the run loop reacts to.
    enum Trigger: Sendable {
        /// Something may have changed: re-read every service.
        case changed
        /// A re-read finished (`nil`: the settings could not be read; nothing changed).
        case synced(Synced?)
        /// The timer a service set for `at` fired: its token is due for refresh, or its
        /// session ends (or the timer's longest sleep passed; see ``ServePolicy/longestSleep``).
        case wake(ServiceName, at: UInt64)
        /// A background refresh finished (`retry`: it failed, try again later).
        case refreshed(ServiceName, retry: Bool)
        /// A method call from `sender` reached this connection (any object and interface).
        case called(String)
        /// One of this service's method calls was answered.
        case callEnded
        /// A peer that had called left the bus.
        case callerLeft(String)
        /// The idle check's time came.
        case idleTimer
        /// The outcome of asking for the name: ours, or taken (at once, or later by a
        /// `serve --replace`).
        case nameAcquired, nameLost
        /// The bus connection closed.
        case busClosed
        /// SIGINT or SIGTERM arrived.
        case signalled
        /// An event of serve's own controllers.
        case ownEvent(LoginEvent)
        /// A `LoginStatusChanged` signal, from anyone.
        case loginSignal(LoginEvent)
        /// A signal of the notification server's interface, from anyone.
        case notificationSignal(DesktopNotificationCalls.ServerSignal)
        /// Another connection (or none) owns the notification server's name.
        case notificationServer(String?)
        /// `Notify` answered with an id, or failed (`nil`).
        case noticePosted(SessionEndNotices.Notice, UInt32?)
    }

    /// Serves until SIGINT/SIGTERM (from `signals`), a takeover, or idleness. Throws
    /// ``AuthError/unavailable(_:detail:)-enum.case`` when the name is taken (without `replace`) or the
    /// bus goes away, so that a supervisor restarts it.
    package func run(signals: AsyncStream<ProcessSignal>) async throws(AuthError) -> Ending {
        let bus = SessionBus.shared(address: busAddress)
        let loop = MainLoopThread()
        // The process's connection to the bus (shared with the controllers, so that their signals
        // come from the name's owner), made here on the loop's context so that its `closed`
        // notification arrives on the loop. Had the process connected before, it would come
        // elsewhere; the name's loss, which GDBus reports too, still ends serve (69). Made on a
        // thread of its own: connecting waits for the bus.
        let connection = try await offload { () throws(AuthError) in
            try loop.withContext { () throws(AuthError) in try bus.connection(timeout: 5) }
        }
        let (triggers, trigger) = AsyncStream<Trigger>.makeStream()
        GDBus.connectionOnClosed(connection, GDBus.Callback { trigger.yield(.busClosed) })
        loop.start()
        let forwarding = Task {
            for await _ in signals { trigger.yield(.signalled) }
        }
        defer { forwarding.cancel() }
        let ownEvents = self.ownEvents
        let forwardingEvents = Task {
            for await event in ownEvents { trigger.yield(.ownEvent(event)) }
        }
        defer { forwardingEvents.cancel() }

        let calls = InFlight()
        let gate = RefreshGate()
        let exported = await loop.performAndWait { () -> Result<Exported, AuthError> in
            Result { () throws(AuthError) in try self.export(on: connection, loop: loop, calls: calls, gate: gate, trigger: trigger) }
        }
        let objects: Exported
        switch exported {
        case .success(let value): objects = value
        case .failure(let error):
            loop.stop()
            throw error
        }
        // The services' objects are in place before the name is ours: the call that activated
        // serve (a proxy's `GetAll`, say) is routed here as soon as the name is, and must find
        // them. Sessions that are over are ended once the name is ours, so that their events
        // come from it.
        _ = await syncAll(endingSessions: false)
        await loop.performAndWait {
            objects.nameOwner = BusObjects.ownName(connection, Self.busName, replace: self.replace, BusObjects.NameHandler(
                acquired: { trigger.yield(.nameAcquired) }, lost: { trigger.yield(.nameLost) }))
        }

        var state = RunState(policy: ServePolicy(idleExit: idleExit.map { .seconds($0) }, now: .now))
        var ending: Result<Ending, AuthError> = .failure(.unavailable("the session bus went away"))
        // Until the name is ours, only the name's outcome, the bus and signals matter.
        loop: for await event in triggers {
            switch event {
            case .nameAcquired:
                state.ownsName = true
                startSync(&state, trigger: trigger)
                rearmIdleTimer(&state, trigger: trigger)
            case .nameLost:
                // GDBus also reports the name lost when the bus goes away.
                if GDBus.connectionIsClosed(connection) {
                    ending = .failure(Self.busGone)
                } else if state.ownsName {
                    state.ownsName = false
                    ending = .success(.replaced)
                } else {
                    ending = .failure(.unavailable("\(Self.busName) is already owned on the session bus (another \(hint: .loginService)?); stop it, or \(hint: .replaceLoginService)"))
                }
                break loop
            case .busClosed:
                ending = .failure(Self.busGone)
                break loop
            case .signalled:
                ending = .success(.signalled)
                break loop
            case .changed where state.ownsName:
                requestSync(&state, trigger: trigger)
            case .synced(let synced):
                state.sync = nil
                if let synced {
                    carryOut(state.notices.reread(synced.records), &state, connection: connection, trigger: trigger)
                    state.policy.reschedule(synced.schedules)
                    startWaitingRefreshes(&state, calls: calls, gate: gate, trigger: trigger)
                    rearmWakeUps(&state, trigger: trigger)
                }
                if state.dirty { state.dirty = false; startSync(&state, trigger: trigger) }
                rearmIdleTimer(&state, trigger: trigger)
            case .wake(let service, let at):
                // A timer replaced after it fired is not this one: that one stays set.
                if state.timers[service]?.at == at { state.timers[service] = nil }
                if state.policy.shouldRefresh(service, now: Posix.wallClockMicroseconds()) {
                    startRefresh(service, minValid: state.policy.schedules[service]?.minValid ?? 60, calls: calls, gate: gate,
                                 trigger: trigger)
                }
                requestSync(&state, trigger: trigger)
            case .refreshed(let service, let retry):
                state.policy.refreshEnded(service, retry: retry, now: Posix.wallClockMicroseconds())
                startWaitingRefreshes(&state, calls: calls, gate: gate, trigger: trigger)
                requestSync(&state, trigger: trigger)
            case .called(let sender):
                if state.policy.callerArrived(sender, at: .now) {
                    let vanished = GDBus.Callback { trigger.yield(.callerLeft(sender)) }
                    loop.perform { objects.watchCaller(sender, connection: connection, vanished) }
                }
            case .callEnded:
                state.policy.noteActivity(at: .now)
                rearmIdleTimer(&state, trigger: trigger)
            case .callerLeft(let sender):
                state.policy.callerLeft(sender, at: .now)
                loop.perform { objects.unwatchCaller(sender) }
                rearmIdleTimer(&state, trigger: trigger)
            case .ownEvent(let event):
                carryOut(state.notices.ownEvent(event), &state, connection: connection, trigger: trigger)
            case .loginSignal(let event):
                state.notices.signal(event)
            case .notificationSignal(let signal):
                if signal.member == "ActionInvoked" {
                    carryOut(state.notices.actionInvoked(id: signal.id, action: signal.action ?? "", sender: signal.sender,
                                                         owner: state.notificationServer),
                             &state, connection: connection, trigger: trigger)
                } else {
                    state.notices.closed(id: signal.id, sender: signal.sender, owner: state.notificationServer)
                }
            case .notificationServer(let owner):
                if owner != state.notificationServer { state.notices.serverChanged() }
                state.notificationServer = owner
            case .noticePosted(let notice, let id):
                if let id {
                    carryOut(state.notices.posted(notice, id: id), &state, connection: connection, trigger: trigger)
                } else {
                    state.notices.notPosted(notice)
                }
            case .idleTimer:
                state.idleTimer = nil
                if state.policy.isIdle(now: .now, callsRunning: calls.count) {
                    ending = .success(.idle)
                    break loop
                }
                rearmIdleTimer(&state, trigger: trigger)
            default:
                break
            }
        }
        // Before anything else: refreshes that have not sent their request yet send none.
        gate.close()
        await stop(objects, state: state, calls: calls, loop: loop, connection: connection, replaced: (try? ending.get()) == .replaced)
        return try ending.get()
    }

    static let busGone = AuthError.unavailable("the session bus went away; \(hint: .loginService) stops (D-Bus activation or its systemd unit starts it again)")

    // MARK: - Steps of the run loop

    /// What ``run(signals:)`` keeps between triggers: the policy's state, and the tasks that
    /// carry out its decisions.
    struct RunState {
        var policy: ServePolicy
        var ownsName = false
        /// The re-read under way, if any; `stop` waits for it.
        var sync: Task<Void, Never>?
        var dirty = false
        /// Each service's pending wake-up and the moment it is for.
        var timers: [ServiceName: (at: UInt64, task: Task<Void, Never>)] = [:]
        var idleTimer: Task<Void, Never>?
        /// What the person on the desktop has been told, and what is to tell.
        var notices = SessionEndNotices()
        /// The unique name of the notification server's connection, while there is one.
        var notificationServer: String?
    }

    /// Re-reads now, or — when a re-read is under way — once more after it, however many
    /// triggers came meanwhile (a flood of signals is one re-read at a time).
    private func requestSync(_ state: inout RunState, trigger: AsyncStream<Trigger>.Continuation) {
        if state.sync != nil { state.dirty = true } else { startSync(&state, trigger: trigger) }
    }

    private func startSync(_ state: inout RunState, trigger: AsyncStream<Trigger>.Continuation) {
        state.sync = Task { trigger.yield(.synced(await self.syncAll())) }
    }

    /// Sets the timers to the policy's wake-ups. A wake-up already set for its moment stays:
    /// a cancelled sleep keeps its timer until the moment it was for, so re-arming on every
    /// re-read would pile them up.
    private func rearmWakeUps(_ state: inout RunState, trigger: AsyncStream<Trigger>.Continuation) {
        let wakeUps = state.policy.wakeUps
        for (service, timer) in state.timers where wakeUps[service] != timer.at {
            timer.task.cancel()
            state.timers[service] = nil
        }
        for (service, moment) in wakeUps where state.timers[service] == nil {
            let delay = ServePolicy.sleep(until: moment, now: Posix.wallClockMicroseconds())
            state.timers[service] = (moment, Task {
                try? await Task.sleep(for: .microseconds(Int64(clamping: delay)))
                if !Task.isCancelled { trigger.yield(.wake(service, at: moment)) }
            })
        }
    }

    /// Sets the idle check for when the policy wants it, unless one is set: when it fires
    /// early (there was activity since), the next is set for the time that remains. One timer
    /// at a time, never cancelled (see ``rearmWakeUps(_:trigger:)``).
    private func rearmIdleTimer(_ state: inout RunState, trigger: AsyncStream<Trigger>.Continuation) {
        guard state.idleTimer == nil, let check = state.policy.idleCheck(now: .now) else { return }
        state.idleTimer = Task {
            try? await Task.sleep(until: check, clock: .continuous)
            if !Task.isCancelled { trigger.yield(.idleTimer) }
        }
    }

    /// Starts the refreshes that waited for their server to have room.
    private func startWaitingRefreshes(_ state: inout RunState, calls: InFlight, gate: RefreshGate,
                                       trigger: AsyncStream<Trigger>.Continuation) {
        for service in state.policy.startWaiting(now: Posix.wallClockMicroseconds()) {
            startRefresh(service, minValid: state.policy.schedules[service]?.minValid ?? 60, calls: calls, gate: gate, trigger: trigger)
        }
    }

    /// A background refresh counts as a change: stopping waits for it, because a server that
    /// rotates refresh tokens has retired the old one once it answers, and a refresh abandoned
    /// before the new tokens are stored would end the session.
    /// `gate` closes when serve stops: a refresh that has not sent its request by then sends none.
    private func startRefresh(_ service: ServiceName, minValid: UInt64, calls: InFlight, gate: RefreshGate,
                              trigger: AsyncStream<Trigger>.Continuation) {
        let controller = controller(for: service)
        // The known state is forgotten when the refresh is done, not before: until then
        // GetStatus answers from it, even while the refresh waits for the keyring (see `answer`).
        let ticket = calls.begin(.change)
        Task {
            var retry = false
            do throws(AuthError) {
                let token = try await gate.guarding { () async throws(AuthError) in
                    try await offload(async: { () async throws(AuthError) in try await controller.accessToken(minValid: .seconds(minValid)) })
                }
                // A still-valid token handed out because the server could not be reached.
                retry = !token.warnings.isEmpty
                for warning in token.warnings { self.warn("\(service): \(warning)") }
            } catch {
                // A refused refresh token ended the session (its event is out); anything else
                // is tried again later.
                if case .denied = error {} else if case .notSignedIn = error {} else { retry = true }
            }
            self.knownStates.forget(service)
            calls.end(ticket)
            trigger.yield(.refreshed(service, retry: retry))
        }
    }

    // MARK: - Stopping

    /// How long stopping waits for the changes under way (a sign-out, a refresh storing its
    /// rotated tokens).
    static let drainLimit = Duration.seconds(30)
    /// How long stopping lets the calls that only read finish before answering them with an
    /// error: enough for an answer from a keyring that works, well within the 5 s a stop takes.
    static let readGrace = Duration.seconds(1)

    /// Releases the name first — from then on a call to it starts a new `serve` — then gives the
    /// calls that only read ``readGrace`` and answers those still waiting (for a keyring that
    /// does not answer, say) with an error, lets the changes under way finish (a background refresh storing its
    /// tokens), and leaves the bus tidy.
    ///
    /// A name taken over (`replaced`) is not ours to release: GLib would ask the bus anyway and
    /// print a warning at its refusal, so its small record is left to the process's exit.
    private func stop(_ objects: Exported, state: RunState, calls: InFlight, loop: MainLoopThread,
                      connection: GDBus.Connection, replaced: Bool) async {
        state.idleTimer?.cancel()
        for timer in state.timers.values { timer.task.cancel() }
        // A re-read under way may end a session: its event must still come from the name, and
        // it must not find the loop stopped.
        await state.sync?.value
        let owner = await loop.performAndWait { () -> UInt32 in defer { objects.nameOwner = 0 }; return objects.nameOwner }
        // Released on a thread of its own: `g_bus_unown_name` waits for the bus's answer, which
        // neither the loop's thread nor the cooperative pool may do; GLib allows any thread.
        if owner != 0 && !replaced { _ = try? await offload { () throws(AuthError) in BusObjects.unownName(owner) } }
        // Calls routed here before the name was released are dispatched on the loop by now.
        await loop.performAndWait {}
        await calls.drained(within: Self.readGrace, includingReads: true)
        for invocation in calls.takeReads() {
            invocation.returnError(name: AuthError.unavailable("").dbusErrorName,
                                   message: "authctl serve is stopping; call again (D-Bus activation starts it again)")
        }
        await calls.drained(within: Self.drainLimit)
        await loop.performAndWait { objects.withdraw(from: connection) }
        _ = try? await offload { () throws(AuthError) in try? GDBus.connectionFlush(connection, Deadline(seconds: 2)) }
        exportedObjects.withLock { $0 = nil }
        loop.stop()
    }
}
