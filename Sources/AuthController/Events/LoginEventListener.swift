import Synchronization

/// Listens for `LoginStatusChanged` signals of one service on the session bus (or the bus at
/// a given address). Only signals with the exact signature `(sssa{sv})` and a known status and
/// reason become events. Signals are hints, not proof: any peer on the bus can send one.
public final class LoginEventListener: Sendable {
    /// The events, in the order the bus delivered them.
    public let events: AsyncStream<LoginEvent>
    private let continuation: AsyncStream<LoginEvent>.Continuation
    private let loop: MainLoopThread
    private let connection: GDBus.Connection
    private let subscription: UInt32
    private let stopped = Mutex(false)

    /// Subscribes (match rule on interface, member, path and `arg0` = service) and returns once
    /// the bus has the match rule, so no later signal is missed.
    /// - Parameter busAddress: a bus address, or `nil` for the session bus.
    public init(service: ServiceName, busAddress: String? = nil, timeout: Double = 5) throws(AuthError) {
        (events, continuation) = AsyncStream<LoginEvent>.makeStream()
        let deadline = Deadline(seconds: timeout)
        do throws(GLibError) {
            connection = try GDBus.connect(address: busAddress, deadline)
        } catch {
            throw .unavailable("no session bus (\(error.message)); run inside a desktop session, under `dbus-run-session`, or in `authctl sandbox`",
                               detail: error.debugDescription)
        }
        let loop = MainLoopThread()
        self.loop = loop
        let connection = self.connection
        let continuation = self.continuation
        let handler = GDBus.SignalHandler { signal in
            if let event = LoginEventListener.event(from: signal, service: service) { continuation.yield(event) }
        }
        subscription = loop.withContext {
            GDBus.connectionSignalSubscribe(connection, interface: DBusBroadcaster.interface, member: DBusBroadcaster.signalName,
                                            path: DBusBroadcaster.objectPath, arg0: service.rawValue, handler: handler)
        }
        loop.start()
        do {
            // AddMatch went out before this call; its reply means the rule is in place.
            try GDBus.connectionPingBus(connection, deadline)
        } catch {
            stop()
            throw .unavailable("could not subscribe on the session bus: \(error.message)", detail: error.debugDescription)
        }
    }

    /// Unsubscribes and finishes ``events``.
    public func stop() {
        guard !stopped.withLock({ (stopped: inout Bool) -> Bool in defer { stopped = true }; return stopped }) else { return }
        // Any thread may unsubscribe; the handler is released on the loop's context.
        GDBus.connectionSignalUnsubscribe(connection, subscription)
        loop.stop()
        continuation.finish()
    }

    deinit { stop() }

    static func event(from signal: GDBus.ReceivedSignal, service: ServiceName) -> LoginEvent? {
        guard signal.signature == "(sssa{sv})", signal.strings.count == 3, signal.strings[0] == service.rawValue,
              let status = LoginEvent.Status(rawValue: signal.strings[1]),
              let user = AccountID(rawValue: signal.strings[2]),
              case .string(let reasonText)? = signal.details["reason"],
              let reason = LoginEvent.Reason(rawValue: reasonText), reason != .initial,
              case .uint64(let timestamp)? = signal.details["timestamp"],
              case .uint64(let sequence)? = signal.details["sequence"] else { return nil }
        var name = ""
        if case .string(let text)? = signal.details["name"] {
            guard let valid = try? DisplayName.validate(text) else { return nil }
            name = valid
        }
        var previous: AccountID?
        if case .string(let text)? = signal.details["previous-user"] { previous = AccountID(rawValue: text) }
        return LoginEvent(service: service, status: status, user: user, reason: reason, name: name,
                          timestamp: timestamp, sequence: sequence, previousUser: previous)
    }
}
