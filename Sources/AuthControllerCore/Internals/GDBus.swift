// SPDX-License-Identifier: Apache-2.0
internal import CGLib
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Thin adapters over GIO's D-Bus API. Named after the C function without its `g_` prefix.
enum GDBus {
    /// An owned `GDBusConnection`.
    final class Connection: @unchecked Sendable {
        // Sendable: the pointer never changes, and GIO documents `GDBusConnection` as
        // thread-safe (its calls may be made from any thread; its worker thread does the I/O).
        let pointer: OpaquePointer
        init(taking pointer: OpaquePointer) { self.pointer = pointer }
        deinit { authctl_object_unref(UnsafeMutableRawPointer(pointer)) }
    }

    /// A value inside an `a{sv}` dictionary: a signal's details, `GetStatus`'s fields.
    enum Value: Sendable, Equatable {
        case string(String)
        case uint64(UInt64)
        case boolean(Bool)
    }

    /// The D-Bus timeout of every call (`G_MAXINT`: none). Each call's `Deadline` cancels it
    /// instead, so there is one clock and one message when time runs out.
    static let noTimeout = Int32.max

    /// The address of the session bus: `DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`
    /// (GIO applies the rules). The corresponding C function is `g_dbus_address_get_for_bus_sync`.
    static func sessionBusAddress(_ deadline: Deadline) throws(GLibError) -> String {
        takeString(try withGError { g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, deadline.cancellable, $0) }) ?? ""
    }

    /// The corresponding C function is `g_dbus_connection_is_closed`.
    static func connectionIsClosed(_ connection: Connection) -> Bool {
        g_dbus_connection_is_closed(connection.pointer) != 0
    }

    /// Builds `(s…sa{sv})` and emits it as a broadcast signal (no destination).
    /// The corresponding C function is `g_dbus_connection_emit_signal`.
    static func connectionEmitSignal(_ connection: Connection, path: String, interface: String, member: String,
                                     strings: [String], details: [(String, Value)]) throws(GLibError) {
        // The tuple is floating: emit_signal sinks and releases it.
        let tuple = variantTuple(strings.map { g_variant_new_string($0) } + [GVariant.dictionary(details)])
        _ = try withGError {
            g_dbus_connection_emit_signal(connection.pointer, nil, path, interface, member, tuple, $0)
        }
    }

    /// Writes out everything queued on the connection.
    /// The corresponding C function is `g_dbus_connection_flush_sync`.
    static func connectionFlush(_ connection: Connection, _ deadline: Deadline) throws(GLibError) {
        _ = try withGError { g_dbus_connection_flush_sync(connection.pointer, deadline.cancellable, $0) }
    }

    /// A round trip to the bus daemon (`org.freedesktop.DBus.GetId`). The daemon handles a
    /// connection's messages in order, so when this returns every signal sent before it has
    /// been routed to the listeners' queues — which orders signals across processes.
    /// The corresponding C function is `g_dbus_connection_call_sync`.
    static func connectionPingBus(_ connection: Connection, _ deadline: Deadline) throws(GLibError) {
        let reply = try withGError {
            g_dbus_connection_call_sync(connection.pointer, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                        "org.freedesktop.DBus", "GetId", nil, nil, G_DBUS_CALL_FLAGS_NONE,
                                        GDBus.noTimeout, deadline.cancellable, $0)
        }
        if let reply { g_variant_unref(reply) }
    }
}

extension GDBus {
    /// A private connection to the bus at `address` (not GIO's shared one).
    /// The corresponding C function is `g_dbus_connection_new_for_address_sync`.
    /// The connection is made on the calling thread's default main context: signal handlers
    /// and the ``connectionOnClosed(_:_:)`` callback run there.
    static func connectionNewForAddress(_ address: String, _ deadline: Deadline) throws(GLibError) -> Connection {
        let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
                                         | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        let connection = try withGError {
            g_dbus_connection_new_for_address_sync(address, flags, nil, deadline.cancellable, $0)
        }
        // GIO's default for bus connections is to raise SIGTERM in this process when the bus
        // goes away; authctl reports it as an error instead.
        g_dbus_connection_set_exit_on_close(connection, 0)
        return Connection(taking: connection!)
    }

    /// GIO's shared connection to the session bus, which libsecret uses too.
    /// The corresponding C function is `g_bus_get_sync`.
    static func busGetSession(_ deadline: Deadline) throws(GLibError) -> Connection {
        let connection = try withGError { g_bus_get_sync(G_BUS_TYPE_SESSION, deadline.cancellable, $0) }
        // As for a connection of authctl's own: an error, not SIGTERM, when the bus goes away.
        g_dbus_connection_set_exit_on_close(connection, 0)
        return Connection(taking: connection!)
    }

    /// Receives word that something happened, with nothing to pass on: a connection closed
    /// (the bus went away), a peer left the bus, a watched file changed. C callbacks carry it
    /// as their user data.
    final class Callback: Sendable {
        let receive: @Sendable () -> Void
        init(_ receive: @escaping @Sendable () -> Void) { self.receive = receive }
    }

    /// Calls `handler` when the connection closes. It runs on the main context that was the
    /// thread default when the connection was made.
    /// The corresponding C function is `g_signal_connect_data` on the `closed` signal.
    static func connectionOnClosed(_ connection: Connection, _ handler: Callback) {
        let userData = Unmanaged.passRetained(handler).toOpaque()
        let callback: @convention(c) (OpaquePointer?, gboolean, UnsafeMutablePointer<GError>?, UnsafeMutableRawPointer?) -> Void = { _, _, _, userData in
            guard let userData else { return }
            Unmanaged<Callback>.fromOpaque(userData).takeUnretainedValue().receive()
        }
        g_signal_connect_data(UnsafeMutableRawPointer(connection.pointer), "closed",
                              unsafeBitCast(callback, to: GCallback.self), userData,
                              { userData, _ in if let userData { Unmanaged<Callback>.fromOpaque(userData).release() } },
                              GConnectFlags(rawValue: 0))
    }

    /// Closes the connection now (its `closed` handlers run). The corresponding C function is
    /// `g_dbus_connection_close_sync`.
    static func connectionClose(_ connection: Connection) {
        _ = g_dbus_connection_close_sync(connection.pointer, nil, nil)
    }

    /// Calls a method whose arguments are strings and whose reply's first value is a string,
    /// object path or boolean (returned as `"true"`/`"false"`).
    /// The corresponding C function is `g_dbus_connection_call_sync`.
    static func connectionCall(_ connection: Connection, destination: String, path: String, interface: String,
                               method: String, strings: [String], autoStart: Bool = false,
                               _ deadline: Deadline) throws(GLibError) -> String? {
        let parameters = variantTuple(strings.map { g_variant_new_string($0) })
        let reply = try withGError {
            g_dbus_connection_call_sync(connection.pointer, destination, path, interface, method, parameters, nil,
                                        autoStart ? G_DBUS_CALL_FLAGS_NONE : G_DBUS_CALL_FLAGS_NO_AUTO_START,
                                        GDBus.noTimeout,
                                        deadline.cancellable, $0)
        }
        guard let reply else { return nil }
        defer { g_variant_unref(reply) }
        guard g_variant_n_children(reply) > 0, let first = g_variant_get_child_value(reply, 0) else { return nil }
        defer { g_variant_unref(first) }
        if g_variant_is_of_type(first, variantType("b")) != 0 {
            return g_variant_get_boolean(first) != 0 ? "true" : "false"
        }
        if g_variant_is_of_type(first, variantType("s")) != 0 || g_variant_is_of_type(first, variantType("o")) != 0 {
            return String(cString: g_variant_get_string(first, nil))
        }
        return nil
    }

    /// The process id of the connection that owns `name`, as the bus daemon knows it; `nil`
    /// when the bus does not say. The corresponding D-Bus method is
    /// `org.freedesktop.DBus.GetConnectionUnixProcessID`.
    static func connectionOwnerProcessID(_ connection: Connection, of name: String, _ deadline: Deadline) -> UInt32? {
        let answer = try? withGError {
            g_dbus_connection_call_sync(connection.pointer, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                        "GetConnectionUnixProcessID", variantTuple([g_variant_new_string(name)]), variantType("(u)"),
                                        G_DBUS_CALL_FLAGS_NONE, GDBus.noTimeout, deadline.cancellable, $0)
        }
        guard let reply = answer ?? nil else { return nil }
        defer { g_variant_unref(reply) }
        let value = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(value) }
        return g_variant_get_uint32(value)
    }

    /// A signal as received: its type signature and decoded arguments.
    struct ReceivedSignal: Sendable {
        let signature: String
        let strings: [String]
        let details: [String: Value]
    }
}

extension GDBus {
    /// Receives each matching signal's parameters; called on the main loop's thread.
    final class SignalHandler: Sendable {
        let receive: @Sendable (ReceivedSignal) -> Void
        init(_ receive: @escaping @Sendable (ReceivedSignal) -> Void) { self.receive = receive }
    }

    /// Subscribes to broadcast signals of `interface`; `sender`, `member`, `path` and `arg0`
    /// (each `nil` for any) narrow the match rule the bus applies. The handler runs on the main
    /// context that is the thread default here (call inside ``MainLoopThread/withContext(_:)``
    /// or on the loop's thread), with the decoded arguments.
    /// The corresponding C function is `g_dbus_connection_signal_subscribe`.
    static func connectionSignalSubscribe(_ connection: Connection, sender: String? = nil, interface: String,
                                          member: String? = nil, path: String? = nil, arg0: String? = nil,
                                          handler: SignalHandler) -> UInt32 {
        g_dbus_connection_signal_subscribe(
            connection.pointer, sender, interface, member, path, arg0, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, parameters, userData in
                guard let parameters, let userData else { return }
                Unmanaged<SignalHandler>.fromOpaque(userData).takeUnretainedValue().receive(GVariant.decodeSignal(parameters))
            },
            Unmanaged.passRetained(handler).toOpaque(),
            { userData in if let userData { Unmanaged<SignalHandler>.fromOpaque(userData).release() } })
    }

    /// The corresponding C function is `g_dbus_connection_remove_filter`.
    static func connectionRemoveFilter(_ connection: Connection, _ id: UInt32) {
        g_dbus_connection_remove_filter(connection.pointer, id)
    }

    /// The corresponding C function is `g_dbus_connection_signal_unsubscribe`.
    static func connectionSignalUnsubscribe(_ connection: Connection, _ id: UInt32) {
        g_dbus_connection_signal_unsubscribe(connection.pointer, id)
    }
}
