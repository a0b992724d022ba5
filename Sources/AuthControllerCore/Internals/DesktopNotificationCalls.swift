// SPDX-License-Identifier: Apache-2.0
internal import CGLib

/// The desktop's notification server (`org.freedesktop.Notifications`, the Desktop
/// Notifications Specification 1.2: GNOME Shell, KDE Plasma, dunst, …), on a GDBus connection.
/// Calls block until their deadline: run them off the loop's thread and the cooperative pool.
enum DesktopNotificationCalls {
    static let name = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"
    static let interface = "org.freedesktop.Notifications"

    /// What the server can do (`GetCapabilities`): `body-markup`, `actions`, …
    static func capabilities(_ connection: GDBus.Connection, _ deadline: Deadline) throws(GLibError) -> [String] {
        let reply = try call(connection, "GetCapabilities", variantTuple([]), replyType: variantType("(as)"), deadline)
        defer { g_variant_unref(reply) }
        return GVariant.strings(in: reply, at: 0)
    }

    /// Posts a notification that stays until it is dismissed or closed (`expire_timeout` 0),
    /// with `actions` as (key, label) pairs and the `desktop-entry` hint; returns its id.
    static func notify(_ connection: GDBus.Connection, appName: String, summary: String, body: String,
                       actions: [(key: String, label: String)], desktopEntry: String, _ deadline: Deadline) throws(GLibError) -> UInt32 {
        var actionStrings: [OpaquePointer?] = actions.flatMap { [g_variant_new_string($0.key), g_variant_new_string($0.label)] }
        let actionArray = actionStrings.withUnsafeMutableBufferPointer {
            g_variant_new_array(variantType("s"), $0.baseAddress, gsize($0.count))
        }
        let hints = GVariant.dictionary([("desktop-entry", .string(desktopEntry))])
        let parameters = variantTuple([g_variant_new_string(appName), g_variant_new_uint32(0), g_variant_new_string(""),
                                       g_variant_new_string(summary), g_variant_new_string(body), actionArray, hints,
                                       g_variant_new_int32(0)])
        let reply = try call(connection, "Notify", parameters, replyType: variantType("(u)"), deadline)
        defer { g_variant_unref(reply) }
        let id = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(id) }
        return g_variant_get_uint32(id)
    }

    /// Withdraws notification `id` (`CloseNotification`).
    static func close(_ connection: GDBus.Connection, id: UInt32, _ deadline: Deadline) throws(GLibError) {
        g_variant_unref(try call(connection, "CloseNotification", variantTuple([g_variant_new_uint32(id)]), replyType: nil, deadline))
    }

    /// A signal of the server's interface as received: who sent it, and its arguments.
    struct ServerSignal: Sendable {
        /// The unique name of the sender.
        let sender: String
        /// `ActionInvoked` or `NotificationClosed`.
        let member: String
        let id: UInt32
        /// `ActionInvoked`'s action key.
        let action: String?
    }

    /// Receives the server's signals on the loop's thread.
    final class SignalHandler: Sendable {
        let receive: @Sendable (ServerSignal) -> Void
        init(_ receive: @escaping @Sendable (ServerSignal) -> Void) { self.receive = receive }
    }

    /// Subscribes to `ActionInvoked` and `NotificationClosed` at the server's path, whoever sends
    /// them: servers send them to the connection that posted, not through a match rule, so the
    /// sender is the handler's to check. The corresponding C function is
    /// `g_dbus_connection_signal_subscribe`.
    static func subscribe(_ connection: GDBus.Connection, _ handler: SignalHandler) -> UInt32 {
        g_dbus_connection_signal_subscribe(
            connection.pointer, nil, interface, nil, path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, sender, _, _, member, parameters, userData in
                guard let sender, let member, let parameters, let userData else { return }
                let memberName = String(cString: member)
                let isAction = memberName == "ActionInvoked" && g_variant_is_of_type(parameters, variantType("(us)")) != 0
                guard isAction || (memberName == "NotificationClosed" && g_variant_is_of_type(parameters, variantType("(uu)")) != 0) else { return }
                let id = g_variant_get_child_value(parameters, 0)!
                defer { g_variant_unref(id) }
                let signal = ServerSignal(sender: String(cString: sender), member: memberName, id: g_variant_get_uint32(id),
                                          action: isAction ? GVariant.string(in: parameters, at: 1) : nil)
                Unmanaged<SignalHandler>.fromOpaque(userData).takeUnretainedValue().receive(signal)
            },
            Unmanaged.passRetained(handler).toOpaque(),
            { userData in if let userData { Unmanaged<SignalHandler>.fromOpaque(userData).release() } })
    }

    /// Receives the unique name of the server's connection whenever it changes (`nil`: none).
    final class OwnerHandler: Sendable {
        let receive: @Sendable (String?) -> Void
        init(_ receive: @escaping @Sendable (String?) -> Void) { self.receive = receive }
    }

    /// Watches who owns the server's name, without starting one. The corresponding C function
    /// is `g_bus_watch_name_on_connection`; undone by `BusObjects.unwatchPeer`.
    static func watchOwner(_ connection: GDBus.Connection, _ handler: OwnerHandler) -> UInt32 {
        g_bus_watch_name_on_connection(
            connection.pointer, name, G_BUS_NAME_WATCHER_FLAGS_NONE,
            { _, _, owner, userData in
                Unmanaged<OwnerHandler>.fromOpaque(userData!).takeUnretainedValue().receive(owner.map { String(cString: $0) })
            },
            { _, _, userData in Unmanaged<OwnerHandler>.fromOpaque(userData!).takeUnretainedValue().receive(nil) },
            Unmanaged.passRetained(handler).toOpaque(),
            { userData in if let userData { Unmanaged<OwnerHandler>.fromOpaque(userData).release() } })
    }

    private static func call(_ connection: GDBus.Connection, _ method: String, _ parameters: OpaquePointer,
                             replyType: OpaquePointer?, _ deadline: Deadline) throws(GLibError) -> OpaquePointer {
        let reply = try withGError {
            g_dbus_connection_call_sync(connection.pointer, name, path, interface, method, parameters, replyType,
                                        G_DBUS_CALL_FLAGS_NONE, GDBus.noTimeout, deadline.cancellable, $0)
        }
        // GIO sets the error whenever it returns no reply.
        return reply!
    }
}
