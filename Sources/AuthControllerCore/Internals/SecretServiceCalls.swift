internal import CGLib

/// The Secret Service's D-Bus API (freedesktop.org Secret Service specification), one adapter
/// per method, each one round trip on the connection it is given.
///
/// authctl speaks the D-Bus API itself instead of going through libsecret's proxies: libsecret's
/// `SecretService` always connects to the bus named by the environment (its constructor forces
/// `G_BUS_TYPE_SESSION`), loads every property of every object it touches, and negotiates a
/// Diffie-Hellman session per process; authctl needs one connection whose address is a
/// parameter, reads that never prompt, and a deadline on every call.
enum SecretServiceCalls {
    static let busName = "org.freedesktop.secrets"
    static let servicePath = "/org/freedesktop/secrets"
    static let serviceInterface = "org.freedesktop.Secret.Service"
    /// The spec's fixed path of the collection behind the `default` alias.
    static let defaultCollectionPath = "/org/freedesktop/secrets/aliases/default"
    /// How many calls of a batch may await their reply at once.
    static let maximumInFlight = 64
    /// The attribute under which libsecret and Seahorse record an item's schema.
    static let schemaAttribute = "xdg:schema"

    /// `Service.SearchItems(a{ss}) → (ao unlocked, ao locked)`. Works while locked.
    static func searchItems(_ connection: GDBus.Connection, attributes: [(String, String)],
                            _ deadline: Deadline) throws(GLibError) -> (unlocked: [String], locked: [String]) {
        let parameters = variantTuple([GVariant.stringDictionary(attributes)])
        let reply = try call(connection, path: servicePath, interface: serviceInterface, method: "SearchItems",
                             parameters: parameters, replyType: "(aoao)", deadline)
        defer { g_variant_unref(reply) }
        return (GVariant.strings(in: reply, at: 0), GVariant.strings(in: reply, at: 1))
    }

    /// `Properties.Get(Collection, "Locked")` of the collection at `path`.
    static func collectionIsLocked(_ connection: GDBus.Connection, path: String, _ deadline: Deadline) throws(GLibError) -> Bool {
        let value = try property(connection, path: path, interface: "org.freedesktop.Secret.Collection", name: "Locked", deadline)
        defer { g_variant_unref(value) }
        return GVariant.boolean(value) ?? false
    }

    /// `SearchItems` and `Properties.Get(Collection, "Locked")` of the collection at `path`, sent
    /// together: what a status read needs, in one round trip.
    static func searchItemsAndCollectionLock(_ connection: GDBus.Connection, attributes: [(String, String)], collection path: String,
                                             _ deadline: Deadline) throws(GLibError) -> (found: (unlocked: [String], locked: [String]), locked: Bool) {
        let lockedProperty = variantTuple([g_variant_new_string("org.freedesktop.Secret.Collection"), g_variant_new_string("Locked")])
        let replies = try pipelined(connection, [
            (servicePath, serviceInterface, "SearchItems", variantTuple([GVariant.stringDictionary(attributes)]), "(aoao)"),
            (path, "org.freedesktop.DBus.Properties", "Get", lockedProperty, "(v)"),
        ], deadline).map { $0! }  // without skippingGoneObjects, every reply is there
        defer { for reply in replies { g_variant_unref(reply) } }
        let boxed = g_variant_get_child_value(replies[1], 0)!
        defer { g_variant_unref(boxed) }
        let value = g_variant_get_variant(boxed)!
        defer { g_variant_unref(value) }
        return ((GVariant.strings(in: replies[0], at: 0), GVariant.strings(in: replies[0], at: 1)), GVariant.boolean(value) ?? false)
    }

    /// What ``searchItemsAndCollectionLock(_:attributes:collection:_:)`` asks (only the
    /// property without `attributes`), without GIO (see ``SessionBus/callWithoutGIO(_:timeout:_:)``):
    /// whether the search found an item, and whether the collection is locked.
    static func searchItemsAndCollectionLockWithoutGIO(_ bus: SessionBus, attributes: [(String, String)]?, collection path: String,
                                                       what: String, timeout: Double) throws(AuthError) -> SessionBus.CallWithoutGIO<(found: Bool, locked: Bool)> {
        var calls = [BareBusConnection.MethodCall(destination: busName, path: path, interface: "org.freedesktop.DBus.Properties", member: "Get",
                                                  arguments: [.string("org.freedesktop.Secret.Collection"), .string("Locked")])]
        if let attributes {
            calls.insert(.init(destination: busName, path: servicePath, interface: serviceInterface, member: "SearchItems",
                               arguments: [.stringDictionary(attributes)]), at: 0)
        }
        switch try bus.callWithoutGIO(what, timeout: timeout, calls) {
        case .notMade: return .notMade
        case .refused: return .refused
        case .answered(let replies):
            do throws(BusMessageError) {
                let locked = try replies[replies.count - 1].booleanInVariant()
                guard attributes != nil else { return .answered((false, locked)) }
                let found = try replies[0].objectPathArrays()
                return .answered((!found.first.isEmpty || !found.second.isEmpty, locked))
            } catch {
                // Not the reply asked for: as GIO's check of the reply type fails.
                return .refused
            }
        }
    }

    /// `Properties.Get(Item, "Label")` of the item at `path`.
    static func itemLabel(_ connection: GDBus.Connection, item path: String, _ deadline: Deadline) throws(GLibError) -> String {
        let value = try property(connection, path: path, interface: "org.freedesktop.Secret.Item", name: "Label", deadline)
        defer { g_variant_unref(value) }
        return GVariant.string(value) ?? ""
    }

    /// `Service.ReadAlias(s) → o`: the collection behind `alias`, `nil` when it resolves to nothing.
    static func readAlias(_ connection: GDBus.Connection, _ alias: String, _ deadline: Deadline) throws(GLibError) -> String? {
        let reply = try call(connection, path: servicePath, interface: serviceInterface, method: "ReadAlias",
                             parameters: variantTuple([g_variant_new_string(alias)]), replyType: "(o)", deadline)
        defer { g_variant_unref(reply) }
        let path = GVariant.strings(inTuple: reply).first ?? "/"
        return path == "/" ? nil : path
    }

    /// `org.freedesktop.DBus.Peer.Ping` of the Secret Service, starting it if the bus can.
    static func ping(_ connection: GDBus.Connection, _ deadline: Deadline) throws(GLibError) {
        let reply = try withGError {
            g_dbus_connection_call_sync(connection.pointer, busName, servicePath, "org.freedesktop.DBus.Peer", "Ping", nil, nil,
                                        G_DBUS_CALL_FLAGS_NONE, GDBus.noTimeout, deadline.cancellable, $0)
        }
        if let reply { g_variant_unref(reply) }
    }

    /// The secret of the item at `path`, through a `plain` session.
    /// `OpenSession`, `Item.GetSecret`, then `Session.Close` without waiting for its reply.
    static func secret(_ connection: GDBus.Connection, item path: String, _ deadline: Deadline) throws(GLibError) -> [UInt8] {
        try withPlainSession(connection, deadline) { (session) throws(GLibError) in
            try getSecret(connection, item: path, session: session, deadline)
        }
    }

    /// `Item.GetSecret(o session) → ((oayays))`: the value's bytes.
    private static func getSecret(_ connection: GDBus.Connection, item path: String, session: String,
                                  _ deadline: Deadline) throws(GLibError) -> [UInt8] {
        let reply = try call(connection, path: path, interface: "org.freedesktop.Secret.Item", method: "GetSecret",
                             parameters: variantTuple([g_variant_new_object_path(session)]), replyType: "((oayays))", deadline)
        defer { g_variant_unref(reply) }
        return GVariant.secretValue(in: reply)
    }

    /// `SearchItems` and `OpenSession` sent together (one round trip, not two), then the first
    /// unlocked item's `GetSecret`: the read of `authctl token`. Returns the search's result and
    /// the secret (`nil` when no unlocked item matched, or the item found was deleted before
    /// its secret could be read).
    static func searchAndReadSecret(_ connection: GDBus.Connection, attributes: [(String, String)],
                                    _ deadline: Deadline) throws(GLibError) -> (found: (unlocked: [String], locked: [String]), secret: [UInt8]?) {
        let openParameters = variantTuple([g_variant_new_string("plain"), g_variant_new_variant(g_variant_new_string(""))])
        let replies = try pipelined(connection, [
            (servicePath, serviceInterface, "SearchItems", variantTuple([GVariant.stringDictionary(attributes)]), "(aoao)"),
            (servicePath, serviceInterface, "OpenSession", openParameters, "(vo)"),
        ], deadline)
        defer { for reply in replies { if let reply { g_variant_unref(reply) } } }
        let found = (GVariant.strings(in: replies[0]!, at: 0), GVariant.strings(in: replies[0]!, at: 1))
        let session = GVariant.string(in: replies[1]!, at: 1)
        defer {
            g_dbus_connection_call(connection.pointer, busName, session, "org.freedesktop.Secret.Session", "Close", nil, nil,
                                   G_DBUS_CALL_FLAGS_NONE, -1, nil, nil, nil)
        }
        guard let item = found.0.first else { return (found, nil) }
        do {
            return (found, try getSecret(connection, item: item, session: session, deadline))
        } catch {
            // Another process deleted the item between the search and the read.
            if error.isMissingObject { return (found, nil) }
            throw error
        }
    }

    /// Sends the calls without awaiting each reply — at most ``maximumInFlight`` at a time, since
    /// a bus limits the replies one connection may await (dbus-daemon's default is 128) — on a
    /// private main context; returns the replies in order (owned by the caller) or the first
    /// failure. With `skippingGoneObjects`, a call on an object that is gone
    /// (``GLibError/isMissingObject``) is a `nil` reply, not a failure; otherwise every reply
    /// is there. A call to the Service that it declines as unknown is sent once more
    /// (``GLibError/isDeclinedAsUnknown``). The corresponding C functions are
    /// `g_dbus_connection_call` and `_call_finish`.
    private static func pipelined(_ connection: GDBus.Connection,
                                  _ calls: [(path: String, interface: String, method: String, parameters: OpaquePointer, replyType: StaticString)],
                                  skippingGoneObjects: Bool = false,
                                  _ deadline: Deadline) throws(GLibError) -> [OpaquePointer?] {
        final class Replies {
            var values: [OpaquePointer?]
            var failure: GLibError?
            var pending: Int
            /// Calls declined as unknown, to be sent again.
            var toSendAgain: [Int] = []
            let skippingGoneObjects: Bool
            init(_ count: Int, skippingGoneObjects: Bool) {
                values = Array(repeating: nil, count: count)
                pending = count
                self.skippingGoneObjects = skippingGoneObjects
            }
        }
        final class Slot {
            let replies: Replies
            let index: Int
            let interface: String
            /// Whether this is the call sent again after the Service declined it.
            let isSentAgain: Bool
            init(_ replies: Replies, _ index: Int, _ interface: String, isSentAgain: Bool) {
                self.replies = replies
                self.index = index
                self.interface = interface
                self.isSentAgain = isSentAgain
            }
        }
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        // Held, not floating, so that a call sent again sends them again.
        let parameters = calls.map { g_variant_ref_sink($0.parameters)! }
        defer { for parameter in parameters { g_variant_unref(parameter) } }
        let replies = Replies(calls.count, skippingGoneObjects: skippingGoneObjects)
        func send(_ index: Int, again: Bool = false) {
            let call = calls[index]
            let slot = Unmanaged.passRetained(Slot(replies, index, call.interface, isSentAgain: again)).toOpaque()
            g_dbus_connection_call(connection.pointer, busName, call.path, call.interface, call.method, parameters[index],
                                   variantType(call.replyType), G_DBUS_CALL_FLAGS_NONE, GDBus.noTimeout, deadline.cancellable,
                                   { source, result, userData in
                let slot = Unmanaged<Slot>.fromOpaque(userData!).takeRetainedValue()
                let replies = slot.replies
                var error: UnsafeMutablePointer<GError>?
                let reply = g_dbus_connection_call_finish(OpaquePointer(source), result, &error)
                if let error {
                    var failure = GLibError.take(error)
                    failure.interface = slot.interface
                    if !slot.isSentAgain && failure.isDeclinedAsUnknown {
                        replies.toSendAgain.append(slot.index)
                        return
                    }
                    let gone = replies.skippingGoneObjects && failure.isMissingObject
                    if !gone && replies.failure == nil { replies.failure = failure }
                }
                replies.values[slot.index] = reply
                replies.pending -= 1
            }, slot)
        }
        var next = 0
        while next < calls.count || replies.pending > 0 {
            while let index = replies.toSendAgain.popLast() { send(index, again: true) }
            while next < calls.count && next - (calls.count - replies.pending) < maximumInFlight {
                send(next)
                next += 1
            }
            g_main_context_iteration(context, 1)
        }
        if let failure = replies.failure {
            for value in replies.values { if let value { g_variant_unref(value) } }
            throw failure
        }
        return replies.values
    }

    /// `Collection.CreateItem(a{sv} properties, (oayays) secret, b replace) → (o item, o prompt)`,
    /// with the label, the attributes plus `xdg:schema`, and the secret as `text/plain` (or the
    /// given content type). `replace` makes the service overwrite an item with the same
    /// attributes in place.
    static func createItem(_ connection: GDBus.Connection, collection: String, schema: String, label: String,
                           attributes: [(String, String)], secret: [UInt8], contentType: String,
                           _ deadline: Deadline) throws(GLibError) {
        let withSchema = attributes + [(schemaAttribute, schema)]
        try withPlainSession(connection, deadline) { (session) throws(GLibError) in
            let properties = g_variant_builder_new(variantType("a{sv}"))
            defer { g_variant_builder_unref(properties) }
            g_variant_builder_add_value(properties, g_variant_new_dict_entry(
                g_variant_new_string("org.freedesktop.Secret.Item.Label"), g_variant_new_variant(g_variant_new_string(label))))
            g_variant_builder_add_value(properties, g_variant_new_dict_entry(
                g_variant_new_string("org.freedesktop.Secret.Item.Attributes"), g_variant_new_variant(GVariant.stringDictionary(withSchema))))
            let parameters = variantTuple([g_variant_builder_end(properties), GVariant.secretStruct(session, secret, contentType),
                                           g_variant_new_boolean(1)])
            let reply = try call(connection, path: collection, interface: "org.freedesktop.Secret.Collection", method: "CreateItem",
                                 parameters: parameters, replyType: "(oo)", deadline)
            g_variant_unref(reply)
        }
    }

    /// `Item.SetSecret((oayays))`: replaces the secret of an existing item in place.
    static func setSecret(_ connection: GDBus.Connection, item path: String, secret: [UInt8], contentType: String,
                          _ deadline: Deadline) throws(GLibError) {
        try withPlainSession(connection, deadline) { (session) throws(GLibError) in
            let reply = try call(connection, path: path, interface: "org.freedesktop.Secret.Item", method: "SetSecret",
                                 parameters: variantTuple([GVariant.secretStruct(session, secret, contentType)]), replyType: "()", deadline)
            g_variant_unref(reply)
        }
    }

    /// `Item.Delete() → o prompt`. gnome-keyring never prompts for a delete in an unlocked
    /// collection; a prompt it does ask for is run like an unlock prompt.
    static func deleteItem(_ connection: GDBus.Connection, item path: String, _ deadline: Deadline) throws(GLibError) {
        let reply = try call(connection, path: path, interface: "org.freedesktop.Secret.Item", method: "Delete",
                             parameters: nil, replyType: "(o)", deadline)
        let prompt = GVariant.strings(inTuple: reply).first ?? "/"
        g_variant_unref(reply)
        if prompt != "/" { _ = try runPrompt(connection, prompt, deadline) }
    }

    /// `Service.Unlock(ao) → (ao unlocked, o prompt)`, then the prompt if the service wants one:
    /// `Prompt.Prompt("")` and its `Completed(b dismissed, v result)` signal. Returns whether
    /// the object is unlocked afterwards (`false`: the prompt was dismissed). When the deadline
    /// passes the prompt is dismissed (`Prompt.Dismiss`) and the cancellation is thrown.
    static func unlock(_ connection: GDBus.Connection, object path: String, _ deadline: Deadline) throws(GLibError) -> Bool {
        let array = GVariant.objectPathArray([path])
        let reply = try call(connection, path: servicePath, interface: serviceInterface, method: "Unlock",
                             parameters: variantTuple([array]), replyType: "(aoo)", deadline)
        defer { g_variant_unref(reply) }
        if !GVariant.strings(in: reply, at: 0).isEmpty { return true }
        let prompt = GVariant.string(in: reply, at: 1)
        if prompt == "/" { return false }
        return try runPrompt(connection, prompt, deadline)
    }

    /// Shows the prompt at `path` and waits for its `Completed` signal; `true` unless dismissed.
    private static func runPrompt(_ connection: GDBus.Connection, _ path: String, _ deadline: Deadline) throws(GLibError) -> Bool {
        final class Outcome {
            var dismissed: Bool?
        }
        let outcome = Outcome()
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        let box = Unmanaged.passRetained(outcome).toOpaque()
        // Subscribed on this private context, so the signal is delivered by the iteration below.
        let subscription = g_dbus_connection_signal_subscribe(
            connection.pointer, busName, "org.freedesktop.Secret.Prompt", "Completed", path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, parameters, userData in
                guard let parameters, let userData else { return }
                let outcome = Unmanaged<Outcome>.fromOpaque(userData).takeUnretainedValue()
                guard g_variant_is_of_type(parameters, variantType("(bv)")) != 0 else { return }
                let flag = g_variant_get_child_value(parameters, 0)!
                outcome.dismissed = g_variant_get_boolean(flag) != 0
                g_variant_unref(flag)
            },
            box, { userData in if let userData { Unmanaged<Outcome>.fromOpaque(userData).release() } })
        defer { g_dbus_connection_signal_unsubscribe(connection.pointer, subscription) }
        // Wakes the iteration below when the deadline cancels the call.
        let wake = g_cancellable_source_new(deadline.cancellable)!
        g_source_set_dummy_callback(wake)
        g_source_attach(wake, context)
        defer {
            g_source_destroy(wake)
            g_source_unref(wake)
        }
        let reply = try call(connection, path: path, interface: "org.freedesktop.Secret.Prompt", method: "Prompt",
                             parameters: variantTuple([g_variant_new_string("")]), replyType: "()", deadline)
        g_variant_unref(reply)
        while outcome.dismissed == nil && g_cancellable_is_cancelled(deadline.cancellable) == 0 {
            g_main_context_iteration(context, 1)
        }
        guard let dismissed = outcome.dismissed else {
            // Take the prompt off the screen; nobody waits for the answer.
            g_dbus_connection_call(connection.pointer, busName, path, "org.freedesktop.Secret.Prompt", "Dismiss", nil, nil,
                                   G_DBUS_CALL_FLAGS_NONE, -1, nil, nil, nil)
            _ = try withGError { g_cancellable_set_error_if_cancelled(deadline.cancellable, $0) }
            return false
        }
        return !dismissed
    }

    /// The `Attributes` of many items at once: the `Properties.Get`s are pipelined, so a
    /// thousand items cost about one round trip, not a thousand. `nil` for an item deleted since
    /// it was found.
    static func itemsAttributes(_ connection: GDBus.Connection, paths: [String], _ deadline: Deadline) throws(GLibError) -> [[String: String]?] {
        let replies = try pipelined(connection, paths.map { path in
            (path, "org.freedesktop.DBus.Properties", "Get",
             variantTuple([g_variant_new_string("org.freedesktop.Secret.Item"), g_variant_new_string("Attributes")]), "(v)")
        }, skippingGoneObjects: true, deadline)
        defer { for reply in replies { if let reply { g_variant_unref(reply) } } }
        return replies.map { reply in
            guard let reply else { return nil }
            guard let boxed = g_variant_get_child_value(reply, 0) else { return [:] }
            defer { g_variant_unref(boxed) }
            let value = g_variant_get_variant(boxed)!
            defer { g_variant_unref(value) }
            return GVariant.stringDictionary(reading: value)
        }
    }

    // MARK: - Sessions and calls

    /// Opens a `plain` session for `body` and closes it afterwards without waiting for the
    /// reply. Plain: the socket is local and only this user's processes reach the session bus,
    /// which is the same trust boundary the keyring itself has.
    private static func withPlainSession<T>(_ connection: GDBus.Connection, _ deadline: Deadline,
                                            _ body: (String) throws(GLibError) -> T) throws(GLibError) -> T {
        let openParameters = variantTuple([g_variant_new_string("plain"), g_variant_new_variant(g_variant_new_string(""))])
        let opened = try call(connection, path: servicePath, interface: serviceInterface, method: "OpenSession",
                              parameters: openParameters, replyType: "(vo)", deadline)
        let session = GVariant.string(in: opened, at: 1)
        g_variant_unref(opened)
        defer {
            g_dbus_connection_call(connection.pointer, busName, session, "org.freedesktop.Secret.Session", "Close", nil, nil,
                                   G_DBUS_CALL_FLAGS_NONE, -1, nil, nil, nil)
        }
        return try body(session)
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
    /// A call to the Service that it declines as unknown is asked once more
    /// (``GLibError/isDeclinedAsUnknown``).
    private static func call(_ connection: GDBus.Connection, path: String, interface: String, method: String,
                             parameters: OpaquePointer?, replyType: StaticString, _ deadline: Deadline) throws(GLibError) -> OpaquePointer {
        // Held, not floating, so that a call asked again sends them again.
        let parameters = parameters.map { g_variant_ref_sink($0)! }
        defer { if let parameters { g_variant_unref(parameters) } }
        var askedAgain = false
        while true {
            do {
                let reply = try withGError {
                    g_dbus_connection_call_sync(connection.pointer, busName, path, interface, method, parameters,
                                                variantType(replyType), G_DBUS_CALL_FLAGS_NONE, GDBus.noTimeout,
                                                deadline.cancellable, $0)
                }
                return reply!
            } catch {
                var failure = error
                failure.interface = interface
                guard !askedAgain, failure.isDeclinedAsUnknown else { throw failure }
                askedAgain = true
            }
        }
    }

}

extension GLibError {
    /// Whether this is the Service declining a call as an unknown method, which asked again is
    /// answered. gnome-keyring sets up what it knows of each caller when the caller's first
    /// message arrives, on its main loop; now and then it handles one of the caller's first
    /// calls before that, and its handler then declines the call, which GDBus answers with
    /// `UnknownMethod` ("Method SearchItems is not implemented on interface …"). No Secret
    /// Service means that answer otherwise: every method of the Service is in the
    /// specification. Once is enough: a service that truly lacks the method answers the same
    /// again, and that answer is the error. It is never an object that is gone
    /// (``isMissingObject``): the Service is always there.
    var isDeclinedAsUnknown: Bool {
        interface == SecretServiceCalls.serviceInterface && remoteName == "org.freedesktop.DBus.Error.UnknownMethod"
    }
}
