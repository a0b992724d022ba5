internal import CLibsecret

/// Raw Secret Service calls over GDBus, for the reads that need no secret: one round trip
/// each, with no libsecret proxies (which load every property of every object they touch).
/// The D-Bus API is the freedesktop.org Secret Service specification.
enum SecretServiceCalls {
    static let busName = "org.freedesktop.secrets"
    static let servicePath = "/org/freedesktop/secrets"
    /// The spec's fixed path of the collection behind the `default` alias.
    static let defaultCollectionPath = "/org/freedesktop/secrets/aliases/default"
    /// How many calls of a batch may await their reply at once.
    static let maximumInFlight = 64

    /// `Service.SearchItems(a{ss}) → (ao unlocked, ao locked)`. Works while locked.
    static func searchItems(_ connection: GDBus.Connection, attributes: KeyValuePairs<String, String>,
                            _ deadline: Deadline) throws(GLibError) -> (unlocked: [String], locked: [String]) {
        let builder = g_variant_builder_new(variantType("a{ss}"))
        defer { g_variant_builder_unref(builder) }
        for (key, value) in attributes {
            g_variant_builder_add_value(builder, g_variant_new_dict_entry(g_variant_new_string(key), g_variant_new_string(value)))
        }
        let parameters = variantTuple([g_variant_builder_end(builder)])
        let reply = try call(connection, path: servicePath, interface: "org.freedesktop.Secret.Service", method: "SearchItems",
                             parameters: parameters, replyType: "(aoao)", deadline)
        defer { g_variant_unref(reply) }
        return (strings(in: reply, at: 0), strings(in: reply, at: 1))
    }

    /// `Properties.Get(Collection, "Locked")` of the collection at `path`.
    static func collectionIsLocked(_ connection: GDBus.Connection, path: String, _ deadline: Deadline) throws(GLibError) -> Bool {
        let value = try property(connection, path: path, interface: "org.freedesktop.Secret.Collection", name: "Locked", deadline)
        defer { g_variant_unref(value) }
        return g_variant_is_of_type(value, variantType("b")) != 0 && g_variant_get_boolean(value) != 0
    }

    /// The secret of the item at `path`, through a `plain` session: the socket is local and the
    /// secret is a hash, so the Diffie-Hellman exchange libsecret negotiates buys nothing here.
    /// `OpenSession`, `Item.GetSecret`, then `Session.Close` without waiting for its reply.
    static func secret(_ connection: GDBus.Connection, item path: String, _ deadline: Deadline) throws(GLibError) -> [UInt8] {
        let openParameters = variantTuple([g_variant_new_string("plain"), g_variant_new_variant(g_variant_new_string(""))])
        let opened = try call(connection, path: servicePath, interface: "org.freedesktop.Secret.Service", method: "OpenSession",
                              parameters: openParameters, replyType: "(vo)", deadline)
        let sessionValue = g_variant_get_child_value(opened, 1)!
        let session = String(cString: g_variant_get_string(sessionValue, nil))
        g_variant_unref(sessionValue)
        g_variant_unref(opened)
        defer {
            g_dbus_connection_call(connection.pointer, busName, session, "org.freedesktop.Secret.Session", "Close", nil, nil,
                                   G_DBUS_CALL_FLAGS_NONE, -1, nil, nil, nil)
        }
        let getParameters = variantTuple([g_variant_new_object_path(session)])
        let reply = try call(connection, path: path, interface: "org.freedesktop.Secret.Item", method: "GetSecret",
                             parameters: getParameters, replyType: "((oayays))", deadline)
        defer { g_variant_unref(reply) }
        let structure = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(structure) }
        let value = g_variant_get_child_value(structure, 2)!
        defer { g_variant_unref(value) }
        var count: gsize = 0
        guard let bytes = g_variant_get_fixed_array(value, &count, 1) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: Int(count)))
    }

    /// The `Attributes` of many items at once: every `Properties.Get` is sent before the
    /// first reply is awaited, so a thousand items cost about one round trip, not a thousand.
    /// The corresponding C functions are `g_dbus_connection_call` and `_call_finish`, run on
    /// a private main context.
    static func itemsAttributes(_ connection: GDBus.Connection, paths: [String], _ deadline: Deadline) throws(GLibError) -> [[String: String]] {
        final class Batch {
            var replies: [OpaquePointer?]
            var failure: GLibError?
            var pending: Int
            init(count: Int) {
                replies = Array(repeating: nil, count: count)
                pending = count
            }
        }
        final class Slot {
            let batch: Batch
            let index: Int
            init(_ batch: Batch, _ index: Int) {
                self.batch = batch
                self.index = index
            }
        }
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        let batch = Batch(count: paths.count)
        func send(_ index: Int) {
            let path = paths[index]
            let parameters = variantTuple([g_variant_new_string("org.freedesktop.Secret.Item"), g_variant_new_string("Attributes")])
            let slot = Unmanaged.passRetained(Slot(batch, index)).toOpaque()
            g_dbus_connection_call(connection.pointer, busName, path, "org.freedesktop.DBus.Properties", "Get", parameters,
                                   variantType("(v)"), G_DBUS_CALL_FLAGS_NONE, GDBus.noTimeout,
                                   deadline.cancellable, { source, result, userData in
                let slot = Unmanaged<Slot>.fromOpaque(userData!).takeRetainedValue()
                var error: UnsafeMutablePointer<GError>?
                let reply = g_dbus_connection_call_finish(OpaquePointer(source), result, &error)
                if let error {
                    let failure = GLibError.take(error)
                    if slot.batch.failure == nil { slot.batch.failure = failure }
                }
                slot.batch.replies[slot.index] = reply
                slot.batch.pending -= 1
            }, slot)
        }
        // A bus limits the replies one connection may await (dbus-daemon's default is 128).
        var next = 0
        while next < paths.count || batch.pending > 0 {
            while next < paths.count && next - (paths.count - batch.pending) < maximumInFlight {
                send(next)
                next += 1
            }
            g_main_context_iteration(context, 1)
        }
        defer { for reply in batch.replies { if let reply { g_variant_unref(reply) } } }
        if let failure = batch.failure { throw failure }
        return batch.replies.map { reply in
            guard let reply, let boxed = g_variant_get_child_value(reply, 0) else { return [:] }
            defer { g_variant_unref(boxed) }
            let value = g_variant_get_variant(boxed)!
            defer { g_variant_unref(value) }
            return dictionary(value)
        }
    }

    /// An `a{ss}` as a dictionary (empty for any other type).
    private static func dictionary(_ value: OpaquePointer) -> [String: String] {
        var attributes: [String: String] = [:]
        guard g_variant_is_of_type(value, variantType("a{ss}")) != 0 else { return attributes }
        for index in 0..<g_variant_n_children(value) {
            let entry = g_variant_get_child_value(value, index)!
            let key = g_variant_get_child_value(entry, 0)!, text = g_variant_get_child_value(entry, 1)!
            attributes[String(cString: g_variant_get_string(key, nil))] = String(cString: g_variant_get_string(text, nil))
            g_variant_unref(key)
            g_variant_unref(text)
            g_variant_unref(entry)
        }
        return attributes
    }

    private static func property(_ connection: GDBus.Connection, path: String, interface: String, name: String,
                                 _ deadline: Deadline) throws(GLibError) -> OpaquePointer {
        let parameters = variantTuple([g_variant_new_string(interface), g_variant_new_string(name)])
        let reply = try call(connection, path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
                             parameters: parameters, replyType: "(v)", deadline)
        defer { g_variant_unref(reply) }
        let boxed = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(boxed) }
        return g_variant_get_variant(boxed)
    }

    /// The corresponding C function is `g_dbus_connection_call_sync`; the reply is owned by the caller.
    private static func call(_ connection: GDBus.Connection, path: String, interface: String, method: String,
                             parameters: OpaquePointer?, replyType: StaticString, _ deadline: Deadline) throws(GLibError) -> OpaquePointer {
        let reply = try withGError {
            g_dbus_connection_call_sync(connection.pointer, busName, path, interface, method, parameters,
                                        variantType(replyType), G_DBUS_CALL_FLAGS_NONE, GDBus.noTimeout,
                                        deadline.cancellable, $0)
        }
        return reply!
    }

    private static func strings(in tuple: OpaquePointer, at index: Int) -> [String] {
        let array = g_variant_get_child_value(tuple, gsize(index))!
        defer { g_variant_unref(array) }
        return (0..<g_variant_n_children(array)).map { element in
            let child = g_variant_get_child_value(array, element)!
            defer { g_variant_unref(child) }
            return String(cString: g_variant_get_string(child, nil))
        }
    }
}
