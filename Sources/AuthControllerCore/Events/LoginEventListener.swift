// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// Listens for `LoginStatusChanged` signals of one service on the session bus (or the bus at
/// a given address). Only signals with the exact signature `(sssa{sv})` and a known status and
/// reason become events. Signals are hints, not proof: any peer on the bus can send one.
///
/// When the bus goes away, ``events`` finishes and ``failure`` says so: a listener is never
/// left deaf.
public final class LoginEventListener: Sendable {
    /// The events, in the order the bus delivered them. Finishes on ``stop()`` or when the
    /// bus goes away (then ``failure`` is set).
    public let events: AsyncStream<LoginEvent>
    private let continuation: AsyncStream<LoginEvent>.Continuation
    private let loop: MainLoopThread
    private let connection: GDBus.Connection
    private let subscription: UInt32
    private let state = State()

    private final class State: Sendable {
        let value = Mutex<(stopped: Bool, failure: AuthError?)>((false, nil))
        func withLock<T: Sendable>(_ body: (inout sending (stopped: Bool, failure: AuthError?)) -> sending T) -> T { value.withLock(body) }
    }

    /// Why ``events`` finished, when it was not ``stop()``: the bus went away.
    public var failure: AuthError? { state.withLock { $0.failure } }

    /// Subscribes (match rule on interface, member, path and `arg0` = service) and returns once
    /// the bus has the match rule, so no later signal is missed.
    /// - Parameters:
    ///   - service: the service whose signals become events (the signal's first argument).
    ///   - busAddress: a bus address, or `nil` for the session bus.
    ///   - timeout: how long connecting and subscribing may each take.
    public init(service: ServiceName, busAddress: String? = nil, timeout: Duration = .seconds(5)) throws(AuthError) {
        let timeout = timeout.seconds
        (events, continuation) = AsyncStream<LoginEvent>.makeStream()
        let bus = SessionBus.shared(address: busAddress)
        let loop = MainLoopThread()
        self.loop = loop
        // A connection of its own, made on the loop's context: its signals and its `closed`
        // notification are delivered on the loop's thread.
        let connection = try loop.withContext { () throws(AuthError) in try bus.privateConnection(timeout: timeout) }
        self.connection = connection
        let continuation = self.continuation
        let handler = GDBus.SignalHandler { signal in
            if let event = LoginEventListener.event(from: signal, service: service) { continuation.yield(event) }
        }
        subscription = loop.withContext {
            GDBus.connectionSignalSubscribe(connection, interface: DBusBroadcaster.interface, member: DBusBroadcaster.signalName,
                                            path: DBusBroadcaster.objectPath, arg0: service.rawValue, handler: handler)
        }
        let state = self.state
        GDBus.connectionOnClosed(connection, GDBus.Callback {
            state.withLock { state in
                if !state.stopped {
                    state.failure = .unavailable("the session bus went away; no more events can arrive (restart the listener when the bus is back)")
                }
            }
            continuation.finish()
        })
        loop.start()
        let deadline = Deadline(seconds: timeout)
        do throws(GLibError) {
            // AddMatch went out before this call; its reply means the rule is in place.
            try GDBus.connectionPingBus(connection, deadline)
        } catch {
            stop()
            throw ErrorMap.authError(error, from: .bus, while: "subscribe on the session bus", deadline: deadline)
        }
    }

    /// Unsubscribes and finishes ``events``.
    public func stop() {
        guard !state.withLock({ (state) -> Bool in defer { state.stopped = true }; return state.stopped }) else { return }
        // Any thread may unsubscribe; the handler is released on the loop's context.
        GDBus.connectionSignalUnsubscribe(connection, subscription)
        GDBus.connectionClose(connection)
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
        return LoginEvent(service: service, status: status, account: user, reason: reason, name: name,
                          timestamp: Timestamp.date(microseconds: timestamp), sequence: sequence, previousAccount: previous)
    }
}
