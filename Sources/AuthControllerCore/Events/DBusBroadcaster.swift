// SPDX-License-Identifier: Apache-2.0
/// Broadcasts `io.github.authctl.AuthController1.LoginStatusChanged (sssa{sv})` on the session bus.
public struct DBusBroadcaster: EventBroadcaster {
    /// The object path the signal is sent from.
    public static let objectPath = "/io/github/authctl/AuthController1"
    /// The interface of the signal.
    public static let interface = "io.github.authctl.AuthController1"
    /// The signal's member name.
    public static let signalName = "LoginStatusChanged"

    /// How long sending and flushing may take before the command gives up on listeners.
    package let flushTimeout: Double
    /// The bus to use; `nil` for the session bus.
    public var busAddress: String? { bus.address }
    private let bus: SessionBus

    /// A broadcaster on the bus at `busAddress` (`unix:path=…`), or on the session bus with `nil`,
    /// that gives each broadcast `flushTimeout` to leave. Does not connect yet: the
    /// connection, shared with the other users of that bus in this process, opens on the first
    /// broadcast.
    public init(busAddress: String? = nil, flushTimeout: Duration = .seconds(2)) {
        bus = SessionBus.shared(address: busAddress)
        self.flushTimeout = flushTimeout.seconds
    }

    /// Emits each event, flushes, and makes a round trip to the bus daemon (`GetId`), which
    /// handles a connection's messages in order: when it answers, the signals have been routed
    /// to every listener's queue, so events of processes that change one after another reach
    /// listeners in that order. The corresponding C function is `g_dbus_connection_emit_signal`.
    public func broadcast(_ events: [LoginEvent]) throws(AuthError) {
        guard !events.isEmpty else { return }
        do throws(AuthError) {
            try bus.call("send the signal", on: .bus, timeout: flushTimeout) { connection, deadline throws(GLibError) in
                for event in events {
                    try GDBus.connectionEmitSignal(connection, path: Self.objectPath, interface: Self.interface,
                                                   member: Self.signalName, strings: Self.strings(of: event),
                                                   details: Self.details(of: event))
                }
                try GDBus.connectionFlush(connection, deadline)
                try GDBus.connectionPingBus(connection, deadline)
            }
        } catch {
            throw .unavailable("listeners were not notified: \(error.message)", detail: error.detail)
        }
    }

    /// `service`, `status`, `user`: the first three arguments, so listeners can match on them.
    static func strings(of event: LoginEvent) -> [String] {
        [event.service.rawValue, event.status.rawValue, event.account?.rawValue ?? ""]
    }

    /// The `a{sv}` details.
    static func details(of event: LoginEvent) -> [(String, GDBus.Value)] {
        var details: [(String, GDBus.Value)] = [
            ("reason", .string(event.reason.rawValue)),
            ("name", .string(event.name)),
            ("timestamp", .uint64(Timestamp.microseconds(event.timestamp))),
            ("sequence", .uint64(event.sequence)),
        ]
        if let previous = event.previousAccount { details.append(("previous-user", .string(previous.rawValue))) }
        return details
    }
}
