internal import CLibsecret

/// Thin adapters over GIO's D-Bus API. Named after the C function without its `g_` prefix.
enum GDBus {
    /// An owned `GDBusConnection`.
    final class Connection: @unchecked Sendable {
        let pointer: OpaquePointer
        init(taking pointer: OpaquePointer) { self.pointer = pointer }
        deinit { authctl_object_unref(UnsafeMutableRawPointer(pointer)) }
    }

    /// A value inside the `a{sv}` details dictionary of a signal.
    enum Value: Sendable, Equatable {
        case string(String)
        case uint64(UInt64)
    }

    /// The session bus (GIO's shared connection, which libsecret uses too).
    /// The corresponding C function is `g_bus_get_sync`.
    static func busGet(_ deadline: Deadline) throws(GLibError) -> Connection {
        let connection = try withGError { g_bus_get_sync(G_BUS_TYPE_SESSION, deadline.cancellable, $0) }
        return Connection(taking: connection!)
    }

    /// Builds `(s…sa{sv})` and emits it as a broadcast signal (no destination).
    /// The corresponding C function is `g_dbus_connection_emit_signal`.
    static func connectionEmitSignal(_ connection: Connection, path: String, interface: String, member: String,
                                     strings: [String], details: [(String, Value)]) throws(GLibError) {
        let builder = g_variant_builder_new(authctl_variant_type("a{sv}"))
        defer { g_variant_builder_unref(builder) }
        for (key, value) in details {
            let boxed: OpaquePointer
            switch value {
            case .string(let text): boxed = g_variant_new_string(text)
            case .uint64(let number): boxed = g_variant_new_uint64(guint64(number))
            }
            g_variant_builder_add_value(builder, g_variant_new_dict_entry(g_variant_new_string(key), g_variant_new_variant(boxed)))
        }
        var children: [OpaquePointer?] = strings.map { g_variant_new_string($0) }
        children.append(g_variant_builder_end(builder))
        // The tuple is floating: emit_signal sinks and releases it.
        let tuple = children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
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
                                        Int32(deadline.seconds * 1000), deadline.cancellable, $0)
        }
        if let reply { g_variant_unref(reply) }
    }
}
