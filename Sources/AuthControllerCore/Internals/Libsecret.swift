// SPDX-License-Identifier: Apache-2.0
internal import CGLib
internal import CLibsecret
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Adapters over libsecret-1 (loaded by the first call, see `CLibsecret/shim.h`), one per
/// operation authctl hands it: storing, searching, reading an item's secret,
/// deleting, unlocking. libsecret performs every prompt the service returns — KeePassXC's for each
/// new item, its confirmations of access and deletion, any service's unlock prompt — negotiates
/// its sessions, and serves its file keyring when `SECRET_BACKEND=file` (as inside Flatpak and
/// Snap). It always talks on the process's session bus: its `SecretService` is made for the bus
/// type, not for a connection of the caller's.
///
/// Every call blocks its thread (libsecret's `_sync` functions run a main loop of their own) until
/// the answer comes or the deadline cancels it, which dismisses a prompt that is showing.
enum Libsecret {
    /// libsecret is there, or the error that says which package brings it.
    static func load() throws(AuthError) {
        guard authctl_secret_load() == 0 else {
            throw .unavailable("libsecret-1 (0.20 or later) could not be loaded, and authctl stores, deletes and unlocks keyring items through it; install the Debian package libsecret-1-0")
        }
    }

    /// The list libsecret answered a search with, owned: freed when the last of its items goes.
    fileprivate final class List {
        let pointer: UnsafeMutablePointer<GList>?
        init(taking pointer: UnsafeMutablePointer<GList>?) { self.pointer = pointer }
        deinit { authctl_secret_items_free(pointer) }
    }

    /// One item libsecret found, with what the search learnt of it.
    struct Item {
        /// Keeps the list, and so the item, alive.
        private let list: List
        fileprivate let pointer: OpaquePointer
        /// Its D-Bus object path; `nil` in libsecret's file keyring.
        let path: String?
        /// Whether the service keeps it locked (its collection is, or the item asks for a
        /// confirmation of access, as KeePassXC's do).
        let locked: Bool
        let attributes: [String: String]
        /// What a keyring manager shows for it.
        var label: String { takeString(authctl_secret_item_label(pointer)) ?? "" }

        fileprivate init(_ pointer: OpaquePointer, in list: List) {
            self.list = list
            self.pointer = pointer
            path = authctl_secret_item_path(pointer).map { String(cString: $0) }
            locked = authctl_secret_item_locked(pointer) != 0
            attributes = Libsecret.attributes(of: pointer)
        }
    }

    private static func attributes(of item: OpaquePointer) -> [String: String] {
        final class Collected { var attributes: [String: String] = [:] }
        let collected = Collected()
        withExtendedLifetime(collected) {
            authctl_secret_item_each_attribute(item, { name, value, data in
                guard let name, let value, let data else { return }
                Unmanaged<Collected>.fromOpaque(data).takeUnretainedValue().attributes[String(cString: name)] = String(cString: value)
            }, Unmanaged.passUnretained(collected).toOpaque())
        }
        return collected.attributes
    }

    /// Every item whose attributes include `attributes` (not matched by schema), locked or not;
    /// never prompts. The corresponding C function is `secret_password_searchv_sync`.
    static func search(_ attributes: [(String, String)], _ deadline: Deadline) throws(GLibError) -> [Item] {
        let list = List(taking: try withAttributes(attributes) { names, values, count throws(GLibError) in
            try withGError { authctl_secret_search(names, values, count, deadline.cancellable, $0) }
        })
        var items: [Item] = []
        var node = list.pointer
        while let current = node {
            items.append(Item(OpaquePointer(current.pointee.data!), in: list))
            node = current.pointee.next
        }
        return items
    }

    /// The item's secret. The corresponding C function is `secret_retrievable_retrieve_secret_sync`.
    static func secret(of item: Item, _ deadline: Deadline) throws(GLibError) -> [UInt8] {
        var bytes: UnsafeMutablePointer<guint8>?
        var length: gsize = 0
        _ = try withGError { authctl_secret_item_secret(item.pointer, &bytes, &length, deadline.cancellable, $0) }
        defer { authctl_secret_wipe_free(bytes, length) }
        guard let bytes else { return [] }
        return Array(UnsafeBufferPointer(start: bytes, count: Int(length)))
    }

    /// The secret of the item at `path`, found anew through a service object of its own, with a
    /// new session; the default service and the items found through it stay as they are. The
    /// corresponding C functions are `secret_service_open_sync`, `secret_item_new_for_dbus_path_sync`
    /// and `secret_retrievable_retrieve_secret_sync`.
    static func secret(ofItemAt path: String, _ deadline: Deadline) throws(GLibError) -> [UInt8] {
        var bytes: UnsafeMutablePointer<guint8>?
        var length: gsize = 0
        _ = try withGError { authctl_secret_item_secret_at(path, &bytes, &length, deadline.cancellable, $0) }
        defer { authctl_secret_wipe_free(bytes, length) }
        guard let bytes else { return [] }
        return Array(UnsafeBufferPointer(start: bytes, count: Int(length)))
    }

    /// Stores `secret` as an item of `schema` with `attributes` (and `xdg:schema`), in the
    /// collection at `collection` (`nil`: the default), performing any prompt the service
    /// returns. The service's own `replace` applies, which implementations read differently: the
    /// caller deals with other items of the same attributes. The corresponding C function is
    /// `secret_password_storev_binary_sync`.
    static func store(_ secret: [UInt8], contentType: String, schema: String, attributes: [(String, String)], collection: String?,
                      label: String, _ deadline: Deadline) throws(GLibError) {
        _ = try withAttributes(attributes) { names, values, count throws(GLibError) in
            try secret.withUnsafeBufferPointer { bytes throws(GLibError) in
                try withGError {
                    authctl_secret_store(schema, names, values, count, collection, label, bytes.baseAddress, gsize(bytes.count), contentType,
                                         deadline.cancellable, $0)
                }
            }
        }
    }

    /// Creates a new item of `schema` with `attributes` (and `xdg:schema`) in the collection at
    /// `collection`, never replacing one, performing any prompt the service returns; returns its
    /// object path. The corresponding C function is `secret_service_create_item_dbus_path_sync`.
    static func createItem(_ secret: [UInt8], contentType: String, schema: String, attributes: [(String, String)], collection: String,
                           label: String, _ deadline: Deadline) throws(GLibError) -> String {
        let path = try withAttributes(attributes) { names, values, count throws(GLibError) in
            try secret.withUnsafeBufferPointer { bytes throws(GLibError) in
                try withGError {
                    authctl_secret_create_item(collection, schema, names, values, count, label, bytes.baseAddress, gsize(bytes.count),
                                               contentType, deadline.cancellable, $0)
                }
            }
        }
        return takeString(path) ?? ""
    }

    /// Deletes the item, performing any prompt the service returns (KeePassXC may ask a person to
    /// confirm). The corresponding C functions are `secret_item_delete_sync`, and for the file
    /// keyring `secret_password_clearv_sync`.
    static func delete(_ item: Item, _ deadline: Deadline) throws(GLibError) {
        _ = try withGError { authctl_secret_item_delete(item.pointer, deadline.cancellable, $0) }
    }

    /// Unlocks the collection or item at `path` through the service's prompt; `false` when the
    /// prompt was dismissed. The corresponding C function is `secret_service_unlock_dbus_paths_sync`.
    static func unlock(_ path: String, _ deadline: Deadline) throws(GLibError) -> Bool {
        try withGError { authctl_secret_unlock(path, deadline.cancellable, $0) } > 0
    }

    /// Drops libsecret's cached connection to the Secret Service and its cached backend (its file
    /// keyring's items): the next call starts afresh. The corresponding C function is
    /// `secret_service_disconnect`.
    static func disconnect() {
        authctl_secret_disconnect()
    }

    /// Runs `body` (a libsecret call) on a thread of its own and waits at most `seconds` for it:
    /// `nil` when it did not return by then, and the thread is left to it. libsecret heeds its
    /// cancellable until the service behind a prompt goes away or stops; then its call waits for a
    /// `Completed` signal that never comes, and a command must still end.
    static func bounded<T>(by seconds: Double, _ body: @escaping () throws(GLibError) -> T) -> Result<T, GLibError>? {
        let handoff = BoundedCall(body)
        DispatchQueue.global().async {
            handoff.result = Result { () throws(GLibError) in try handoff.body() }
            handoff.done.signal()
        }
        guard handoff.done.wait(timeout: .now() + seconds) == .success else { return nil }
        return handoff.result
    }

    /// Counts the prompts this process shows on `connection` from now on (see ``promptsShown``).
    static func watchPrompts(on connection: GDBus.Connection) {
        authctl_secret_watch_prompts(connection.pointer)
    }

    /// How many prompts this process has shown: a call whose deadline passed after one was shown
    /// waited for a person. The corresponding C functions are `g_dbus_connection_add_filter`'s.
    static var promptsShown: UInt32 { authctl_secret_prompts_shown() }

    private static func withAttributes<T>(_ attributes: [(String, String)],
                                          _ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<UnsafePointer<CChar>?>, guint) throws(GLibError) -> T) throws(GLibError) -> T {
        let names = attributes.map { strdup($0.0) }, values = attributes.map { strdup($0.1) }
        defer { for pointer in names + values { free(pointer) } }
        let constNames = names.map { UnsafePointer($0) }, constValues = values.map { UnsafePointer($0) }
        return try constNames.withUnsafeBufferPointer { namePointers throws(GLibError) in
            try constValues.withUnsafeBufferPointer { valuePointers throws(GLibError) in
                try body(namePointers.baseAddress!, valuePointers.baseAddress!, guint(attributes.count))
            }
        }
    }
}

/// A libsecret call handed to a thread of its own (see ``Libsecret/bounded(by:_:)``).
// Sendable: the worker writes `result` before it signals, and the caller reads it only after the
// wait returned in time; an abandoned worker's result is never read.
private final class BoundedCall<T>: @unchecked Sendable {
    var result: Result<T, GLibError>?
    let body: () throws(GLibError) -> T
    let done = DispatchSemaphore(value: 0)
    init(_ body: @escaping () throws(GLibError) -> T) { self.body = body }
}
