import Synchronization
import SystemPackage

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
/// work (keyring, settings, servers) runs in tasks, and the one loop in ``run(signals:)``
/// decides, one trigger at a time, what to re-read and when to stop.
public final class LoginService: Sendable {
    /// The well-known name.
    public static let busName = "io.github.authctl"
    /// The object path of the methods and the object manager.
    public static let objectPath = DBusBroadcaster.objectPath
    /// The interface of the per-service objects.
    public static let sessionInterface = "io.github.authctl.Session1"

    /// Why ``run(signals:)`` returned.
    public enum Ending: Sendable, Equatable {
        /// SIGINT or SIGTERM.
        case signalled
        /// Another `serve --replace` took the name over.
        case replaced
        /// `--idle-exit` seconds passed with nothing to do.
        case idle
    }

    private let settings: any SettingsStore
    private let settingsFile: String?
    private let busAddress: String?
    private let replace: Bool
    private let idleExit: Double?
    private let makeController: @Sendable (ServiceName) -> AuthController
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
    ///   - controller: makes the controller of a service (one per service is kept, so that its
    ///     in-process refresh is shared by every caller).
    public init(settings: any SettingsStore, settingsFile: String?, busAddress: String? = nil, replace: Bool = false,
                idleExit: Double? = nil, controller: @escaping @Sendable (ServiceName) -> AuthController) {
        self.settings = settings
        self.settingsFile = settingsFile
        self.busAddress = busAddress
        self.replace = replace
        self.idleExit = idleExit
        makeController = controller
    }

    /// The object path of a service's `Session1` object: each byte outside `[A-Za-z0-9]` is
    /// written as `_` and two lower-case hex digits (`io.github.authctl` →
    /// `…/services/io_2egithub_2eauthctl`).
    public static func objectPath(of service: ServiceName) -> String {
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
            if knownServices.withLock({ $0.contains(service) }) { controllers[service] = controller }
            return controller
        }
    }

    private let knownServices = Mutex<Set<ServiceName>>([])

    /// What the run loop reacts to.
    enum Trigger: Sendable {
        /// Something may have changed: re-read every service.
        case changed
        /// A re-read finished (`nil`: the settings could not be read; nothing changed).
        case synced([ServiceName: Schedule]?)
        /// The timer a service set for `at` fired: its token is due for refresh, or its
        /// session ends (or the timer's longest sleep passed; see ``longestSleep``).
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
    }

    /// The longest a timer sleeps before the loop looks again. Timers are set from the wall
    /// clock but sleep on the monotonic one: after the wall clock steps (NTP after a resume),
    /// a refresh or a session's end is still noticed within this.
    static let longestSleep: UInt64 = 60_000_000

    /// When a service needs the loop again: its token's refresh time and its session's end.
    struct Schedule: Sendable, Equatable {
        var refreshAt: UInt64?
        var endsAt: UInt64?
        var minValid: UInt64 = 60
        var next: UInt64? { [refreshAt, endsAt].compactMap { $0 }.min() }
    }

    /// Serves until SIGINT/SIGTERM (from `signals`), a takeover, or idleness. Throws
    /// ``AuthError/unavailable(_:detail:)`` when the name is taken (without `replace`) or the
    /// bus goes away, so that a supervisor restarts it.
    public func run(signals: AsyncStream<ProcessSignal>) async throws(AuthError) -> Ending {
        let bus = SessionBus.shared(address: busAddress)
        let loop = MainLoopThread()
        // The process's connection to the bus (shared with the controllers, so that their signals
        // come from the name's owner), made here on the loop's context so that its `closed`
        // notification arrives on the loop. Had the process connected before, it would come
        // elsewhere; the name's loss, which GDBus reports too, still ends serve (69).
        let connection = try loop.withContext { () throws(AuthError) in try bus.connection(timeout: 5) }
        let (triggers, trigger) = AsyncStream<Trigger>.makeStream()
        GDBus.connectionOnClosed(connection, GDBus.Callback { trigger.yield(.busClosed) })
        loop.start()
        let forwarding = Task {
            for await _ in signals { trigger.yield(.signalled) }
        }
        defer { forwarding.cancel() }

        let calls = InFlight()
        let exported = await loop.performAndWait { () -> Result<Exported, AuthError> in
            Result { () throws(AuthError) in try self.export(on: connection, loop: loop, calls: calls, trigger: trigger) }
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

        var state = RunState(idleExit: idleExit)
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
                    ending = .failure(.unavailable("\(Self.busName) is already owned on the session bus (another `authctl serve`?); stop it, or take the name over with `authctl serve --replace`"))
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
            case .synced(let schedules):
                state.sync = nil
                if let schedules { reschedule(&state, schedules, trigger: trigger) }
                if state.dirty { state.dirty = false; startSync(&state, trigger: trigger) }
                rearmIdleTimer(&state, trigger: trigger)
            case .wake(let service, let at):
                // A timer replaced after it fired is not this one: that one stays set.
                if state.timers[service]?.at == at { state.timers[service] = nil }
                if let schedule = state.schedules[service], let refreshAt = schedule.refreshAt, refreshAt <= Posix.wallClockMicroseconds(),
                   !state.refreshing.contains(service) {
                    state.refreshing.insert(service)
                    startRefresh(service, minValid: schedule.minValid, calls: calls, trigger: trigger)
                }
                requestSync(&state, trigger: trigger)
            case .refreshed(let service, let retry):
                state.refreshing.remove(service)
                if retry {
                    let backoff = min(state.backoff[service, default: 2] * 2, 60)
                    state.backoff[service] = backoff
                    state.notBefore[service] = Posix.wallClockMicroseconds().addingClamped(UInt64(backoff * 1_000_000))
                } else {
                    // However short the lifetime a server grants, at most one background
                    // refresh a second.
                    state.backoff[service] = nil
                    state.notBefore[service] = Posix.wallClockMicroseconds().addingClamped(1_000_000)
                }
                requestSync(&state, trigger: trigger)
            case .called(let sender):
                state.lastActivity = .now
                if !state.callers.contains(sender) && state.callers.count < 256 {
                    state.callers.insert(sender)
                    let vanished = GDBus.Callback { trigger.yield(.callerLeft(sender)) }
                    loop.perform { objects.watchCaller(sender, connection: connection, vanished) }
                }
            case .callEnded:
                state.lastActivity = .now
                rearmIdleTimer(&state, trigger: trigger)
            case .callerLeft(let sender):
                state.callers.remove(sender)
                loop.perform { objects.unwatchCaller(sender) }
                state.lastActivity = .now
                rearmIdleTimer(&state, trigger: trigger)
            case .idleTimer:
                state.idleTimer = nil
                if state.isIdle(calls: calls.count) {
                    ending = .success(.idle)
                    break loop
                }
                rearmIdleTimer(&state, trigger: trigger)
            default:
                break
            }
        }
        await stop(objects, state: state, calls: calls, loop: loop, connection: connection, replaced: (try? ending.get()) == .replaced)
        return try ending.get()
    }

    static let busGone = AuthError.unavailable("the session bus went away; `authctl serve` stops (D-Bus activation or its systemd unit starts it again)")

    // MARK: - Steps of the run loop

    /// What ``run(signals:)`` keeps between triggers.
    struct RunState {
        let idleExit: Double?
        var ownsName = false
        /// The re-read under way, if any; `stop` waits for it.
        var sync: Task<Void, Never>?
        var dirty = false
        var schedules: [ServiceName: Schedule] = [:]
        /// Each service's pending wake-up and the moment it is for.
        var timers: [ServiceName: (at: UInt64, task: Task<Void, Never>)] = [:]
        var refreshing: Set<ServiceName> = []
        var backoff: [ServiceName: Double] = [:]
        var notBefore: [ServiceName: UInt64] = [:]
        var callers: Set<String> = []
        var lastActivity = ContinuousClock.now
        var idleTimer: Task<Void, Never>?

        init(idleExit: Double?) { self.idleExit = idleExit }

        /// Idle: no call for `idleExit` seconds, none running, no caller still connected, and
        /// no token to keep fresh.
        func isIdle(calls: Int) -> Bool {
            guard let idleExit else { return false }
            return calls == 0 && callers.isEmpty && schedules.values.allSatisfy { $0.refreshAt == nil && $0.endsAt == nil }
                && ContinuousClock.now - lastActivity >= .seconds(idleExit)
        }
    }

    /// Re-reads now, or — when a re-read is under way — once more after it, however many
    /// triggers came meanwhile (a flood of signals is one re-read at a time).
    private func requestSync(_ state: inout RunState, trigger: AsyncStream<Trigger>.Continuation) {
        if state.sync != nil { state.dirty = true } else { startSync(&state, trigger: trigger) }
    }

    private func startSync(_ state: inout RunState, trigger: AsyncStream<Trigger>.Continuation) {
        state.sync = Task { trigger.yield(.synced(await self.syncAll())) }
    }

    private func reschedule(_ state: inout RunState, _ schedules: [ServiceName: Schedule], trigger: AsyncStream<Trigger>.Continuation) {
        state.schedules = schedules
        for (service, timer) in state.timers where schedules[service]?.next == nil {
            timer.task.cancel()
            state.timers[service] = nil
        }
        for (service, var schedule) in schedules {
            // A refresh under way ends with a re-read that sets the next timer; a timer now
            // would find the token still due and wake the loop at once, again and again.
            if state.refreshing.contains(service) {
                state.timers[service]?.task.cancel()
                state.timers[service] = nil
                continue
            }
            // A refresh that failed is tried again after a pause, never in a tight loop.
            if let refreshAt = schedule.refreshAt, let notBefore = state.notBefore[service] {
                schedule.refreshAt = max(refreshAt, notBefore)
            }
            // A wake-up already set for that moment stays: a cancelled sleep keeps its timer
            // until the moment it was for, so re-arming on every re-read would pile them up.
            guard let next = schedule.next, state.timers[service]?.at != next else { continue }
            state.timers[service]?.task.cancel()
            let now = Posix.wallClockMicroseconds()
            let delay = min(next > now ? next - now : 0, Self.longestSleep)
            // A few milliseconds late rather than early: the session's end is judged by the clock.
            state.timers[service] = (next, Task {
                try? await Task.sleep(for: .microseconds(Int64(clamping: delay) + 5_000))
                if !Task.isCancelled { trigger.yield(.wake(service, at: next)) }
            })
        }
    }

    /// Sets the idle check for `idleExit` after the last activity, unless one is set: when it
    /// fires early (there was activity since), the next is set for the time that remains. One
    /// timer at a time, never cancelled (see ``reschedule(_:_:trigger:)``).
    private func rearmIdleTimer(_ state: inout RunState, trigger: AsyncStream<Trigger>.Continuation) {
        guard let idleExit = state.idleExit, state.idleTimer == nil else { return }
        let remaining = Duration.seconds(idleExit) - (ContinuousClock.now - state.lastActivity)
        state.idleTimer = Task {
            try? await Task.sleep(for: max(remaining, .milliseconds(10)))
            if !Task.isCancelled { trigger.yield(.idleTimer) }
        }
    }

    /// A background refresh counts as a call: stopping waits for it, because a server that
    /// rotates refresh tokens has retired the old one once it answers, and a refresh abandoned
    /// before the new tokens are stored would end the session.
    private func startRefresh(_ service: ServiceName, minValid: UInt64, calls: InFlight,
                              trigger: AsyncStream<Trigger>.Continuation) {
        let controller = controller(for: service)
        calls.begin()
        Task {
            defer { calls.end() }
            var retry = false
            do throws(AuthError) {
                let token = try await controller.accessToken(minValid: minValid)
                // A still-valid token handed out because the server could not be reached.
                retry = !token.warnings.isEmpty
            } catch {
                // A refused refresh token ended the session (its event is out); anything else
                // is tried again later.
                if case .denied = error {} else if case .notSignedIn = error {} else { retry = true }
            }
            trigger.yield(.refreshed(service, retry: retry))
        }
    }

    // MARK: - Re-reading the state

    /// Ends sessions that are over (with `endingSessions`), then reads every service's state
    /// into its object. Returns when each needs the loop again; `nil` when the settings
    /// cannot be read (unsafe, corrupt, unreadable): the objects then stay as they were, and
    /// GetStatus says why.
    ///
    /// The settings are read once, not once per service, and the keyring is asked only about
    /// signed-in services: a change re-reads everything, and a settings file with hundreds of
    /// services made each re-read cost seconds of CPU and PropertiesChanged come late.
    ///
    /// State that cannot be read (the keyring gone) is unknown, not absent: the service keeps
    /// its object as it was (SPEC §11) and nothing is scheduled for it until a later re-read.
    private func syncAll(endingSessions: Bool = true) async -> [ServiceName: Schedule]? {
        // One read of the file for every service: a re-read costs one parse however many
        // services there are, and a keyring search only for those with someone signed in.
        guard let objects = exportedObjects.withLock({ $0 }), let reads = try? settings.readAll() else { return nil }
        knownServices.withLock { $0 = Set(reads.keys) }
        var schedules: [ServiceName: Schedule] = [:]
        var properties: [ServiceName: BusObjects.SessionProperties?] = [:]
        for (service, first) in reads {
            let controller = controller(for: service)
            var read: SettingsRead? = first
            var status = first.corruption == nil ? try? controller.status(of: first.record, keyringLocked: false) : nil
            // The record names a user the status does not: the item was removed or the refresh
            // token expired. The event goes out now, and the record is read again.
            if endingSessions, first.record.user != nil, status?.isSignedIn == false,
               let ended = try? controller.endSessionIfOver(), !ended.events.isEmpty {
                read = try? settings.read(service: service)
                status = read.flatMap { $0.corruption == nil ? try? controller.status(of: $0.record, keyringLocked: false) : nil }
            }
            guard let read, let status else {
                properties[service] = .some(nil)
                continue
            }
            properties[service] = Self.properties(status)
            schedules[service] = Self.schedule(status, read.record)
        }
        let values = properties
        await objects.loop.performAndWait { objects.show(values) }
        return schedules
    }

    static func properties(_ status: LoginStatus) -> BusObjects.SessionProperties {
        BusObjects.SessionProperties(
            service: status.service.rawValue, signedIn: status.isSignedIn, user: status.user?.rawValue ?? "",
            name: status.name ?? "",
            signedInAt: status.signedInAt.flatMap(Timestamp.microseconds(rfc3339:)) ?? 0, sequence: status.sequence,
            server: status.server?.rawValue ?? "", accessTokenExpiresAt: status.accessTokenExpiresAt ?? 0,
            refreshTokenExpiresAt: status.refreshTokenExpiresAt ?? 0)
    }

    /// A signed-in bound service's access token is refreshed at about 80% of its lifetime (a
    /// minute before its expiry when the lifetime is unknown); its session ends at the refresh
    /// token's expiry.
    static func schedule(_ status: LoginStatus, _ record: SessionRecord) -> Schedule {
        guard status.isSignedIn, status.server != nil, let times = record.tokenTimes else { return Schedule() }
        var schedule = Schedule(endsAt: times.refreshExpiresAt)
        if let expiresAt = times.accessExpiresAt {
            if let lifetime = times.accessLifetime, lifetime > 0 {
                schedule.refreshAt = expiresAt - min(expiresAt, lifetime.multipliedClamped(by: 200_000))
                // `token`'s threshold is capped at half the lifetime: at 80% the token is due.
                schedule.minValid = lifetime
            } else {
                schedule.refreshAt = expiresAt - min(expiresAt, 60_000_000)
            }
        }
        return schedule
    }

    // MARK: - Exporting

    private let exportedObjects = Mutex<Exported?>(nil)

    /// The objects on the bus. Touched on the loop's thread only, except ``loop``.
    final class Exported: @unchecked Sendable {
        // Sendable: every member but `loop` is used on the loop's thread only (through
        // `MainLoopThread.perform`), where GDBus wants them.
        let loop: MainLoopThread
        let controllerObject: BusObjects.ControllerObject
        let manager: BusObjects.ObjectManager
        var sessions: [ServiceName: BusObjects.SessionObject] = [:]
        var subscriptions: [UInt32] = []
        var filter: UInt32 = 0
        var fileWatch: BusObjects.FileWatch?
        var folderWatch: BusObjects.FileWatch?
        var nameOwner: UInt32 = 0
        var callerWatches: [String: UInt32] = [:]

        init(loop: MainLoopThread, controllerObject: BusObjects.ControllerObject, manager: BusObjects.ObjectManager) {
            self.loop = loop
            self.controllerObject = controllerObject
            self.manager = manager
        }

        /// Exports new services' objects (the manager announces them), updates the others
        /// (their skeletons emit `PropertiesChanged` for what differs), and unexports those
        /// whose settings group is gone. A service whose state is unknown (`nil`) keeps what
        /// its object shows; a new one shows its name only.
        func show(_ properties: [ServiceName: BusObjects.SessionProperties?]) {
            for (service, object) in sessions where properties[service] == nil {
                manager.unexport(object)
                sessions[service] = nil
            }
            for (service, values) in properties {
                if let object = sessions[service] {
                    if let values { object.update(values) }
                } else {
                    let object = BusObjects.SessionObject(path: LoginService.objectPath(of: service))
                    object.update(values ?? BusObjects.SessionProperties(service: service.rawValue))
                    manager.export(object)
                    sessions[service] = object
                }
            }
        }

        func watchCaller(_ sender: String, connection: GDBus.Connection, _ vanished: GDBus.Callback) {
            callerWatches[sender] = BusObjects.watchPeer(connection, sender, vanished: vanished)
        }

        func unwatchCaller(_ sender: String) {
            if let id = callerWatches.removeValue(forKey: sender) { BusObjects.unwatchPeer(id) }
        }
    }

    /// On the loop's thread: exports the objects and subscribes to what may change the state.
    private func export(on connection: GDBus.Connection, loop: MainLoopThread, calls: InFlight,
                        trigger: AsyncStream<Trigger>.Continuation) throws(AuthError) -> Exported {
        let handlers = BusObjects.MethodHandlers(
            getStatus: { invocation, service in
                self.answer(invocation, service, calls: calls, trigger: trigger) { controller throws(AuthError) in
                    invocation.returnStatus(Self.statusFields(try controller.status()))
                }
            },
            listAccounts: { invocation, service in
                self.answer(invocation, service, calls: calls, trigger: trigger) { controller throws(AuthError) in
                    invocation.returnAccounts(try controller.accounts().map(\.id.rawValue))
                }
            },
            getToken: { invocation, service, minValid in
                self.answer(invocation, service, changing: true, calls: calls, trigger: trigger) { controller throws(AuthError) in
                    let token = try await controller.accessToken(minValid: UInt64(minValid))
                    invocation.returnToken(token.token, expiresAt: token.expiresAt ?? 0)
                }
            },
            signOut: { invocation, service in
                self.answer(invocation, service, changing: true, calls: calls, trigger: trigger) { controller throws(AuthError) in
                    try await controller.signOut(keepingCredentials: false)
                    invocation.returnSignedOut()
                }
            })
        let controllerObject = BusObjects.ControllerObject(handlers)
        do throws(GLibError) {
            try controllerObject.export(on: connection, at: Self.objectPath)
        } catch {
            throw .unavailable("cannot export \(Self.objectPath) on the session bus: \(error.message)")
        }
        let objects = Exported(loop: loop, controllerObject: controllerObject,
                               manager: BusObjects.ObjectManager(path: Self.objectPath))
        objects.manager.setConnection(connection)
        let changed = GDBus.SignalHandler { _ in trigger.yield(.changed) }
        objects.subscriptions = [
            GDBus.connectionSignalSubscribe(connection, interface: DBusBroadcaster.interface, path: DBusBroadcaster.objectPath,
                                            handler: changed),
            // ItemCreated, ItemDeleted, ItemChanged of any collection, from any sender: a forged
            // one only makes serve look at the keyring itself.
            GDBus.connectionSignalSubscribe(connection, interface: "org.freedesktop.Secret.Collection", handler: changed),
            // A keyring daemon that (re)starts announces no items: what it holds is read again.
            GDBus.connectionSignalSubscribe(connection, sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus",
                                            member: "NameOwnerChanged", path: "/org/freedesktop/DBus",
                                            arg0: "org.freedesktop.secrets", handler: changed),
        ]
        if let settingsFile {
            // Without the watch (no inotify left), changes that send no event show at the next
            // one; the rest of serve works, so it is not a reason to stop.
            let fileChanged = GDBus.Callback { trigger.yield(.changed) }
            objects.fileWatch = try? BusObjects.FileWatch(path: settingsFile, fileChanged)
            // A watch on a file whose folder is missing (no settings yet, or the folder
            // removed) is GLib's poll every 4 s: the folder's parent is watched too, and when
            // the folder comes or goes the file's watch is made again, at once (on the loop's
            // thread, where the watch reports).
            let folder = FilePath(settingsFile).removingLastComponent()
            objects.folderWatch = try? BusObjects.FileWatch(path: folder.removingLastComponent().string,
                                                            child: folder.lastComponent?.string ?? "", GDBus.Callback {
                [weak objects] in
                guard let objects else { return }
                objects.fileWatch?.cancel()
                objects.fileWatch = try? BusObjects.FileWatch(path: settingsFile, fileChanged)
                // What was written before the new watch began.
                trigger.yield(.changed)
            })
        }
        objects.filter = BusObjects.observeIncomingCalls(connection, BusObjects.PeerHandler { trigger.yield(.called($0)) })
        exportedObjects.withLock { $0 = objects }
        return objects
    }

    /// Runs one method call in a task of its own and answers it: its result, or the D-Bus error
    /// of its failure's family.
    private func answer(_ invocation: BusObjects.Invocation, _ service: String, changing: Bool = false, calls: InFlight,
                        trigger: AsyncStream<Trigger>.Continuation,
                        _ body: @escaping @Sendable (AuthController) async throws(AuthError) -> Void) {
        calls.begin()
        Task {
            do throws(AuthError) {
                try await body(self.controller(for: try ServiceName(validating: service)))
            } catch {
                invocation.returnError(name: error.dbusErrorName, message: error.message.controlCharactersEscaped)
            }
            calls.end()
            trigger.yield(.callEnded)
            // A sign-out or a refresh may have changed the state: the objects show it now, not
            // only after the signal or the file watch. A read changes nothing.
            if changing { trigger.yield(.changed) }
        }
    }

    /// `GetStatus`'s fields: those of `status --json`, times in µs, null fields left out.
    static func statusFields(_ status: LoginStatus) -> [(String, GDBus.Value)] {
        var fields: [(String, GDBus.Value)] = [("service", .string(status.service.rawValue)), ("signedIn", .boolean(status.isSignedIn))]
        if let user = status.user {
            fields.append(("user", .string(user.rawValue)))
            fields.append(("name", .string(status.name ?? "")))
        }
        if let signedInAt = status.signedInAt.flatMap(Timestamp.microseconds(rfc3339:)) {
            fields.append(("signedInAt", .uint64(signedInAt)))
        }
        fields.append(("sequence", .uint64(status.sequence)))
        fields.append(("keyringLocked", .boolean(status.keyringLocked)))
        if let avatar = status.avatarURL { fields.append(("avatarURL", .string(avatar))) }
        if let server = status.server { fields.append(("server", .string(server.rawValue))) }
        if let expiry = status.accessTokenExpiresAt { fields.append(("accessTokenExpiresAt", .uint64(expiry))) }
        if let expiry = status.refreshTokenExpiresAt { fields.append(("refreshTokenExpiresAt", .uint64(expiry))) }
        return fields
    }

    // MARK: - Stopping

    /// Releases the name first — from then on a call to it starts a new `serve` — then answers
    /// the calls that reached this one, lets a background refresh under way store its tokens,
    /// and leaves the bus tidy.
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
        // Released from this thread: `g_bus_unown_name` waits for the bus's answer, which the
        // loop's thread must not do; GLib allows it from any thread.
        if owner != 0 && !replaced { BusObjects.unownName(owner) }
        // Calls routed here before the name was released are dispatched on the loop by now.
        await loop.performAndWait {}
        await calls.drained(within: .seconds(30))
        await loop.performAndWait {
            for id in objects.subscriptions { GDBus.connectionSignalUnsubscribe(connection, id) }
            for id in objects.callerWatches.values { BusObjects.unwatchPeer(id) }
            objects.fileWatch?.cancel()
            objects.folderWatch?.cancel()
            objects.controllerObject.unexport()
            objects.manager.setConnection(nil)
            GDBus.connectionRemoveFilter(connection, objects.filter)
        }
        try? GDBus.connectionFlush(connection, Deadline(seconds: 2))
        exportedObjects.withLock { $0 = nil }
        loop.stop()
    }
}

/// The work under way that stopping waits for: method calls being answered and background
/// refreshes (whose rotated tokens must be stored before the process ends).
final class InFlight: Sendable {
    private let running = Mutex(0)

    var count: Int { running.withLock { $0 } }
    func begin() { running.withLock { $0 += 1 } }
    func end() { running.withLock { $0 -= 1 } }

    /// Returns when no call is running, or after `limit`.
    func drained(within limit: Duration) async {
        let deadline = ContinuousClock.now + limit
        while count > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}

extension AuthError {
    /// The D-Bus error of this failure's family, one per exit code family, as `authctl serve`
    /// answers a failed call with it.
    public var dbusErrorName: String {
        switch self {
        case .notSignedIn: "io.github.authctl.Error.NotSignedIn"
        case .usage, .invalidInput: "io.github.authctl.Error.InvalidInput"
        case .unavailable: "io.github.authctl.Error.Unavailable"
        case .temporaryFailure: "io.github.authctl.Error.Timeout"
        case .denied: "io.github.authctl.Error.Denied"
        case .protocolError: "io.github.authctl.Error.Protocol"
        case .settingsUnsafe: "io.github.authctl.Error.SettingsUnsafe"
        case .settingsIO: "io.github.authctl.Error.SettingsIO"
        }
    }
}
