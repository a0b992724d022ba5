// SPDX-License-Identifier: Apache-2.0
internal import CGLib
internal import CAuthctlBus
import Synchronization

/// GDBus's own object machinery for `authctl serve`: owning a well-known name, the skeletons
/// gdbus-codegen generated from the interface files in `data/` (`Sources/CAuthctlBus`), and
/// `GDBusObjectManagerServer`. GDBus answers `Introspect`, `Properties.Get/GetAll` and
/// `GetManagedObjects` itself, and batches property changes into `PropertiesChanged`.
///
/// Everything here that registers or changes an object must run on the thread of the
/// ``MainLoopThread`` that owns the connection (``MainLoopThread/perform(_:)``): GDBus
/// dispatches an object's calls, and a skeleton emits its `PropertiesChanged`, on the main
/// context that was the thread default when it was made.
enum BusObjects {
    // MARK: - Owning a name

    /// Receives the outcome of owning a name, on the main loop's thread.
    final class NameHandler: Sendable {
        let acquired: @Sendable () -> Void
        let lost: @Sendable () -> Void
        init(acquired: @escaping @Sendable () -> Void, lost: @escaping @Sendable () -> Void) {
            self.acquired = acquired
            self.lost = lost
        }
    }

    /// Asks the bus for `name`, never queueing for it: when another connection owns it, `lost`
    /// is called at once (unless `replace` and the owner allows replacement). Later, `lost`
    /// means another process took the name over. Returns the id for ``unownName(_:)``.
    /// The corresponding C function is `g_bus_own_name_on_connection`.
    static func ownName(_ connection: GDBus.Connection, _ name: String, replace: Bool, _ handler: NameHandler) -> UInt32 {
        var flags = G_BUS_NAME_OWNER_FLAGS_ALLOW_REPLACEMENT.rawValue | G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE.rawValue
        if replace { flags |= G_BUS_NAME_OWNER_FLAGS_REPLACE.rawValue }
        return g_bus_own_name_on_connection(
            connection.pointer, name, GBusNameOwnerFlags(rawValue: flags),
            { _, _, userData in Unmanaged<NameHandler>.fromOpaque(userData!).takeUnretainedValue().acquired() },
            { _, _, userData in Unmanaged<NameHandler>.fromOpaque(userData!).takeUnretainedValue().lost() },
            Unmanaged.passRetained(handler).toOpaque(),
            { userData in if let userData { Unmanaged<NameHandler>.fromOpaque(userData).release() } })
    }

    /// Releases the name: when this returns, the bus routes new calls to the name elsewhere
    /// (or activates a new owner). The corresponding C function is `g_bus_unown_name`, which
    /// waits for the bus's answer to `ReleaseName`.
    static func unownName(_ id: UInt32) {
        g_bus_unown_name(id)
    }

    /// Calls `handler` with the unique name of a peer when it leaves the bus.
    /// The corresponding C function is `g_bus_watch_name_on_connection`.
    static func watchPeer(_ connection: GDBus.Connection, _ uniqueName: String, vanished: GDBus.Callback) -> UInt32 {
        g_bus_watch_name_on_connection(
            connection.pointer, uniqueName, G_BUS_NAME_WATCHER_FLAGS_NONE, nil,
            { _, _, userData in Unmanaged<GDBus.Callback>.fromOpaque(userData!).takeUnretainedValue().receive() },
            Unmanaged.passRetained(vanished).toOpaque(),
            { userData in if let userData { Unmanaged<GDBus.Callback>.fromOpaque(userData).release() } })
    }

    /// The corresponding C function is `g_bus_unwatch_name`.
    static func unwatchPeer(_ id: UInt32) {
        g_bus_unwatch_name(id)
    }

    // MARK: - Method calls

    /// One method call to answer, from any thread, exactly once.
    final class Invocation: @unchecked Sendable {
        // Sendable: GIO lets a GDBusMethodInvocation be answered from any thread, and each
        // answer consumes it; `answered` makes a second answer a no-op instead of a crash.
        private let skeleton: OpaquePointer
        private let pointer: OpaquePointer
        private let answered = Atomic<Bool>(false)
        /// The unique bus name of the caller.
        let sender: String

        /// The corresponding C function is `g_dbus_method_invocation_get_sender`.
        init(skeleton: OpaquePointer, pointer: OpaquePointer) {
            self.skeleton = skeleton
            self.pointer = pointer
            sender = String(cString: g_dbus_method_invocation_get_sender(pointer))
        }

        /// The corresponding C function is `authctl_auth_controller1_complete_get_status`.
        func returnStatus(_ fields: [(String, GDBus.Value)]) {
            guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
            authctl_auth_controller1_complete_get_status(skeleton, pointer, GVariant.dictionary(fields))
        }

        /// The corresponding C function is `authctl_auth_controller1_complete_list_accounts`.
        func returnAccounts(_ accounts: [String]) {
            guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
            var copies: [UnsafePointer<gchar>?] = accounts.map { UnsafePointer(g_strdup($0)) }
            copies.append(nil)
            copies.withUnsafeBufferPointer { authctl_auth_controller1_complete_list_accounts(skeleton, pointer, $0.baseAddress) }
            for copy in copies { g_free(UnsafeMutableRawPointer(mutating: copy)) }
        }

        /// The corresponding C function is `authctl_auth_controller1_complete_get_token`.
        func returnToken(_ token: String, expiresAt: UInt64) {
            guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
            authctl_auth_controller1_complete_get_token(skeleton, pointer, token, guint64(expiresAt))
        }

        /// The corresponding C function is `authctl_auth_controller1_complete_sign_out`.
        func returnSignedOut() {
            guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
            authctl_auth_controller1_complete_sign_out(skeleton, pointer)
        }

        /// A D-Bus error `name` with a one-line message.
        /// The corresponding C function is `g_dbus_method_invocation_return_dbus_error`.
        func returnError(name: String, message: String) {
            guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
            g_dbus_method_invocation_return_dbus_error(pointer, name, message)
        }
    }

    /// What to do with each method of `io.github.authctl.AuthController1`. Each handler is
    /// called on the main loop's thread and must answer its invocation later, from any thread.
    struct MethodHandlers: Sendable {
        var getStatus: @Sendable (Invocation, String) -> Void
        var listAccounts: @Sendable (Invocation, String) -> Void
        var getToken: @Sendable (Invocation, String, UInt32) -> Void
        var signOut: @Sendable (Invocation, String) -> Void
    }

    private final class HandlerBox: Sendable {
        let handlers: MethodHandlers
        init(_ handlers: MethodHandlers) { self.handlers = handlers }
        static func from(_ userData: UnsafeMutableRawPointer?) -> MethodHandlers {
            Unmanaged<HandlerBox>.fromOpaque(userData!).takeUnretainedValue().handlers
        }
    }

    /// The `io.github.authctl.AuthController1` skeleton: its methods go to the handlers.
    final class ControllerObject: @unchecked Sendable {
        // Sendable: only the loop's thread touches it after creation (see the type's note).
        let skeleton: OpaquePointer

        /// The corresponding C functions are `authctl_auth_controller1_skeleton_new` and
        /// `g_signal_connect_data` on its `handle-*` signals.
        init(_ handlers: MethodHandlers) {
            skeleton = authctl_auth_controller1_skeleton_new()
            typealias OneString = @convention(c) (OpaquePointer?, OpaquePointer?, UnsafePointer<gchar>?, UnsafeMutableRawPointer?) -> gboolean
            typealias StringAndNumber = @convention(c) (OpaquePointer?, OpaquePointer?, UnsafePointer<gchar>?, guint, UnsafeMutableRawPointer?) -> gboolean
            let getStatus: OneString = { skeleton, invocation, service, userData in
                HandlerBox.from(userData).getStatus(Invocation(skeleton: skeleton!, pointer: invocation!), String(cString: service!))
                return 1
            }
            let listAccounts: OneString = { skeleton, invocation, service, userData in
                HandlerBox.from(userData).listAccounts(Invocation(skeleton: skeleton!, pointer: invocation!), String(cString: service!))
                return 1
            }
            let signOut: OneString = { skeleton, invocation, service, userData in
                HandlerBox.from(userData).signOut(Invocation(skeleton: skeleton!, pointer: invocation!), String(cString: service!))
                return 1
            }
            let getToken: StringAndNumber = { skeleton, invocation, service, minValid, userData in
                HandlerBox.from(userData).getToken(Invocation(skeleton: skeleton!, pointer: invocation!), String(cString: service!), UInt32(minValid))
                return 1
            }
            let box = HandlerBox(handlers)
            func connect(_ signal: String, _ callback: GCallback) {
                g_signal_connect_data(UnsafeMutableRawPointer(skeleton), signal, callback, Unmanaged.passRetained(box).toOpaque(),
                                      { userData, _ in if let userData { Unmanaged<HandlerBox>.fromOpaque(userData).release() } },
                                      GConnectFlags(rawValue: 0))
            }
            connect("handle-get-status", unsafeBitCast(getStatus, to: GCallback.self))
            connect("handle-list-accounts", unsafeBitCast(listAccounts, to: GCallback.self))
            connect("handle-sign-out", unsafeBitCast(signOut, to: GCallback.self))
            connect("handle-get-token", unsafeBitCast(getToken, to: GCallback.self))
        }

        deinit { authctl_object_unref(UnsafeMutableRawPointer(skeleton)) }

        /// The corresponding C function is `g_dbus_interface_skeleton_export`.
        func export(on connection: GDBus.Connection, at path: String) throws(GLibError) {
            _ = try withGError { g_dbus_interface_skeleton_export(UnsafeMutablePointer(skeleton), connection.pointer, path, $0) }
        }

        /// The corresponding C function is `g_dbus_interface_skeleton_unexport`.
        func unexport() {
            g_dbus_interface_skeleton_unexport(UnsafeMutablePointer(skeleton))
        }
    }

    // MARK: - Service objects

    /// The `io.github.authctl.Session1` properties of one service.
    struct SessionProperties: Equatable, Sendable {
        var service = ""
        var signedIn = false
        var user = ""
        var name = ""
        var signedInAt: UInt64 = 0
        var sequence: UInt64 = 0
        var server = ""
        var accessTokenExpiresAt: UInt64 = 0
        var refreshTokenExpiresAt: UInt64 = 0
    }

    /// An object with the `io.github.authctl.Session1` skeleton, for the object manager.
    final class SessionObject: @unchecked Sendable {
        // Sendable: only the loop's thread touches it after creation (see the type's note).
        let path: String
        let object: UnsafeMutablePointer<GDBusObjectSkeleton>
        private let session: OpaquePointer

        /// The corresponding C functions are `g_dbus_object_skeleton_new`,
        /// `authctl_session1_skeleton_new` and `g_dbus_object_skeleton_add_interface`.
        init(path: String) {
            self.path = path
            object = g_dbus_object_skeleton_new(path)
            session = authctl_session1_skeleton_new()
            g_dbus_object_skeleton_add_interface(object, UnsafeMutablePointer(session))
        }

        deinit {
            authctl_object_unref(UnsafeMutableRawPointer(session))
            authctl_object_unref(UnsafeMutableRawPointer(object))
        }

        /// Sets every property; the skeleton compares each with its old value and emits one
        /// `PropertiesChanged` with those that differ, from an idle callback of the loop.
        /// The corresponding C functions are the generated `authctl_session1_set_*`.
        func update(_ properties: SessionProperties) {
            authctl_session1_set_service(session, properties.service)
            authctl_session1_set_signed_in(session, properties.signedIn ? 1 : 0)
            authctl_session1_set_user(session, properties.user)
            authctl_session1_set_name(session, properties.name)
            authctl_session1_set_signed_in_at(session, guint64(properties.signedInAt))
            authctl_session1_set_sequence(session, guint64(properties.sequence))
            authctl_session1_set_server(session, properties.server)
            authctl_session1_set_access_token_expires_at(session, guint64(properties.accessTokenExpiresAt))
            authctl_session1_set_refresh_token_expires_at(session, guint64(properties.refreshTokenExpiresAt))
        }
    }

    /// `org.freedesktop.DBus.ObjectManager` at `path`: lists the exported objects and announces
    /// new ones (`InterfacesAdded`) and removed ones (`InterfacesRemoved`).
    final class ObjectManager: @unchecked Sendable {
        // Sendable: only the loop's thread touches it after creation (see the type's note).
        private let manager: UnsafeMutablePointer<GDBusObjectManagerServer>

        /// The corresponding C function is `g_dbus_object_manager_server_new`.
        init(path: String) {
            manager = g_dbus_object_manager_server_new(path)
        }

        deinit { authctl_object_unref(UnsafeMutableRawPointer(manager)) }

        /// Exports the manager and every object on `connection` (`nil`: unexports them).
        /// The corresponding C function is `g_dbus_object_manager_server_set_connection`.
        func setConnection(_ connection: GDBus.Connection?) {
            g_dbus_object_manager_server_set_connection(manager, connection?.pointer)
        }

        /// The corresponding C function is `g_dbus_object_manager_server_export`.
        func export(_ object: SessionObject) {
            g_dbus_object_manager_server_export(manager, object.object)
        }

        /// The corresponding C function is `g_dbus_object_manager_server_unexport`.
        func unexport(_ object: SessionObject) {
            _ = g_dbus_object_manager_server_unexport(manager, object.path)
        }
    }

    // MARK: - Watching what changes

    /// A watch on a file (through inotify): the handler runs when it is created, changed,
    /// replaced by a rename or deleted. With `child`, `path` is a folder and the handler runs
    /// only for events about its entry named `child`.
    /// The corresponding C functions are `g_file_monitor_file` and `g_file_monitor_directory`.
    final class FileWatch: @unchecked Sendable {
        // Sendable: only the loop's thread touches it after creation (see the type's note).
        private let monitor: UnsafeMutablePointer<GFileMonitor>

        private final class Receiver: Sendable {
            let handler: GDBus.Callback
            let child: String?
            init(_ handler: GDBus.Callback, child: String?) {
                self.handler = handler
                self.child = child
            }
        }

        /// The corresponding C functions are `g_file_new_for_path`, `g_file_monitor_file` (or
        /// `g_file_monitor_directory`) and `g_signal_connect_data` on its `changed` signal.
        init(path: String, child: String? = nil, _ handler: GDBus.Callback) throws(GLibError) {
            let file = g_file_new_for_path(path)
            defer { authctl_object_unref(UnsafeMutableRawPointer(file)) }
            guard let monitor = try withGError({
                child == nil ? g_file_monitor_file(file, G_FILE_MONITOR_WATCH_MOVES, nil, $0)
                    : g_file_monitor_directory(file, G_FILE_MONITOR_WATCH_MOVES, nil, $0)
            }) else {
                throw GLibError(domain: .io, code: 0, message: "cannot watch \(path)", remoteName: nil)
            }
            self.monitor = monitor
            typealias Changed = @convention(c) (OpaquePointer?, OpaquePointer?, OpaquePointer?, GFileMonitorEvent, UnsafeMutableRawPointer?) -> Void
            let changed: Changed = { _, file, otherFile, _, userData in
                let receiver = Unmanaged<Receiver>.fromOpaque(userData!).takeUnretainedValue()
                if let child = receiver.child {
                    func named(_ file: OpaquePointer?) -> Bool {
                        guard let file, let name = g_file_get_basename(file) else { return false }
                        defer { g_free(name) }
                        return String(cString: name) == child
                    }
                    guard named(file) || named(otherFile) else { return }
                }
                receiver.handler.receive()
            }
            g_signal_connect_data(UnsafeMutableRawPointer(monitor), "changed", unsafeBitCast(changed, to: GCallback.self),
                                  Unmanaged.passRetained(Receiver(handler, child: child)).toOpaque(),
                                  { userData, _ in if let userData { Unmanaged<Receiver>.fromOpaque(userData).release() } },
                                  GConnectFlags(rawValue: 0))
        }

        /// The corresponding C function is `g_file_monitor_cancel`.
        func cancel() {
            _ = g_file_monitor_cancel(monitor)
        }

        deinit { authctl_object_unref(UnsafeMutableRawPointer(monitor)) }
    }

    /// Calls `handler` with the sender of every method call that reaches this connection
    /// (any object and interface, `Properties.Get` included), so that `serve` knows when it was
    /// last used and by whom. It runs on GDBus's worker thread and must be quick.
    /// The corresponding C function is `g_dbus_connection_add_filter`.
    static func observeIncomingCalls(_ connection: GDBus.Connection, _ handler: PeerHandler) -> UInt32 {
        g_dbus_connection_add_filter(
            connection.pointer,
            { _, message, incoming, userData in
                if incoming != 0, let message, g_dbus_message_get_message_type(message) == G_DBUS_MESSAGE_TYPE_METHOD_CALL,
                   let sender = g_dbus_message_get_sender(message), let userData {
                    Unmanaged<PeerHandler>.fromOpaque(userData).takeUnretainedValue().receive(String(cString: sender))
                }
                return message
            },
            Unmanaged.passRetained(handler).toOpaque(),
            { userData in if let userData { Unmanaged<PeerHandler>.fromOpaque(userData).release() } })
    }

    /// Receives a peer's unique bus name.
    final class PeerHandler: Sendable {
        let receive: @Sendable (String) -> Void
        init(_ receive: @escaping @Sendable (String) -> Void) { self.receive = receive }
    }
}
