// SPDX-License-Identifier: Apache-2.0
internal import CGLib

/// The reads of the Secret Service's D-Bus API (freedesktop.org Secret Service specification)
/// that authctl makes itself, one adapter per method, each one round trip on the connection it is
/// given: whether the default collection is locked, which items match, an unlocked item's secret.
/// Everything that stores, deletes, unlocks or prompts goes through libsecret (``Libsecret``).
///
/// Why reads do not go through libsecret too: its `SecretService` loads every property of every
/// object it touches and negotiates a Diffie-Hellman session before the first search, which makes
/// a `secret_password_lookup_sync` as slow as `secret-tool`; `status`, `token` and
/// `git-credential get` are what scripts run in loops. These reads answer as libsecret does (a
/// test holds them side by side on every implementation), and hand anything unusual — a locked
/// item, a locked collection — to libsecret.
enum SecretServiceCalls {
    static let busName = "org.freedesktop.secrets"
    static let servicePath = "/org/freedesktop/secrets"
    static let serviceInterface = "org.freedesktop.Secret.Service"
    /// How many calls of a batch may await their reply at once.
    static let maximumInFlight = 64
    /// The attribute under which libsecret and Seahorse record an item's schema.
    static let schemaAttribute = "xdg:schema"

    /// ``SecretServiceRequest/searchItems(_:)``: the items found unlocked and locked.
    static func searchItems(_ connection: GDBus.Connection, attributes: [(String, String)],
                            _ deadline: Deadline) throws(GLibError) -> (unlocked: [String], locked: [String]) {
        let reply = try call(connection, .searchItems(attributes), deadline)
        defer { g_variant_unref(reply) }
        return (GVariant.strings(in: reply, at: 0), GVariant.strings(in: reply, at: 1))
    }

    /// ``SecretServiceRequest/collectionIsLocked(_:)`` of the collection at `path`.
    static func collectionIsLocked(_ connection: GDBus.Connection, path: String, _ deadline: Deadline) throws(GLibError) -> Bool {
        let reply = try call(connection, .collectionIsLocked(path), deadline)
        defer { g_variant_unref(reply) }
        guard let value = GVariant.valueInVariant(in: reply) else { return false }
        defer { g_variant_unref(value) }
        return GVariant.boolean(value) ?? false
    }

    /// What a status read asks, without GIO (see ``SessionBus/converseWithoutGIO(_:timeout:_:)``),
    /// in the order every implementation can answer: `ReadAlias("default")` (asked once more when
    /// it answers `/`), the collection's `Locked` at its own path, and only when it is unlocked the
    /// search by `attributes` (none without them). `found` is `nil` when nothing was searched.
    static func statusReadWithoutGIO(_ bus: SessionBus, attributes: [(String, String)]?, what: String,
                                     timeout: Double) throws(AuthError) -> SessionBus.CallWithoutGIO<(locked: Bool, found: Bool?)> {
        return try bus.converseWithoutGIO(what, timeout: timeout) { exchange throws(BareBusConnection.Failure) in
            // A reply that is not the one asked for is as a failed GIO call: GIO checks the reply type.
            func ask<Answer>(_ request: SecretServiceRequest,
                             _ reading: (BusMessage) throws(BusMessageError) -> Answer) throws(BareBusConnection.Failure) -> Answer {
                let reply = try exchange.ask([request.methodCall])[0]
                do { return try reading(reply) } catch { throw .refused("\(error)") }
            }
            let readAlias = { () throws(BareBusConnection.Failure) -> String in
                try ask(.readAlias("default")) { reply throws(BusMessageError) in try reply.objectPath() }
            }
            var collection = try readAlias()
            if collection == "/" { collection = try readAlias() }
            // No default collection: GIO asks again and words it.
            guard collection != "/" else { throw .refused("no default collection") }
            let locked = try ask(.collectionIsLocked(collection)) { reply throws(BusMessageError) in try reply.booleanInVariant() }
            guard !locked, let attributes else { return (locked, nil) }
            let found = try ask(.searchItems(attributes)) { reply throws(BusMessageError) in try reply.objectPathArrays() }
            return (false, !found.first.isEmpty || !found.second.isEmpty)
        }
    }

    /// ``SecretServiceRequest/readAlias(_:)``: the collection behind `alias`, `nil` when it resolves to nothing.
    static func readAlias(_ connection: GDBus.Connection, _ alias: String, _ deadline: Deadline) throws(GLibError) -> String? {
        let reply = try call(connection, .readAlias(alias), deadline)
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
            SecretServiceRequest.searchItems(attributes).pipelinedCall,
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

    /// A call as ``pipelined(_:_:skippingGoneObjects:_:)`` sends it: its parameters floating.
    fileprivate typealias PipelinedCall = (path: String, interface: String, method: String, parameters: OpaquePointer,
                                           replyType: StaticString)

    /// Sends the calls without awaiting each reply — at most ``maximumInFlight`` at a time, since
    /// a bus limits the replies one connection may await (dbus-daemon's default is 128) — on a
    /// private main context; returns the replies in order (owned by the caller) or the first
    /// failure. With `skippingGoneObjects`, a call on an object that is gone
    /// (``GLibError/isMissingObject``) is a `nil` reply, not a failure; otherwise every reply
    /// is there. A call to the Service that it declines as unknown is sent once more
    /// (``GLibError/isDeclinedAsUnknown``). The corresponding C functions are
    /// `g_dbus_connection_call` and `_call_finish`.
    private static func pipelined(_ connection: GDBus.Connection, _ calls: [PipelinedCall],
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

    /// The `Attributes` of many items at once: the `Properties.Get`s are pipelined, so a
    /// thousand items cost about one round trip, not a thousand. `nil` for an item deleted since
    /// it was found.
    static func itemsAttributes(_ connection: GDBus.Connection, paths: [String], _ deadline: Deadline) throws(GLibError) -> [[String: String]?] {
        let replies = try pipelined(connection, paths.map { SecretServiceRequest.itemAttributes($0).pipelinedCall },
                                    skippingGoneObjects: true, deadline)
        defer { for reply in replies { if let reply { g_variant_unref(reply) } } }
        return replies.map { reply in
            guard let reply else { return nil }
            guard let value = GVariant.valueInVariant(in: reply) else { return [:] }
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

    /// `request` through ``call(_:path:interface:method:parameters:replyType:_:)``.
    private static func call(_ connection: GDBus.Connection, _ request: SecretServiceRequest,
                             _ deadline: Deadline) throws(GLibError) -> OpaquePointer {
        try call(connection, path: request.path, interface: request.interface, method: request.member,
                 parameters: request.parameters, replyType: request.replyType, deadline)
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

extension SecretServiceRequest {
    fileprivate var pipelinedCall: SecretServiceCalls.PipelinedCall { (path, interface, member, parameters, replyType) }
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
