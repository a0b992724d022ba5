// SPDX-License-Identifier: Apache-2.0
internal import CGLib

/// A call of the Secret Service that authctl makes both through GDBus and without GIO
/// (``BareBusConnection``, for `status`): the object, interface, member, arguments and reply type,
/// written once and rendered for either way.
///
/// A plain value with concrete members, not a generic over its answer: `status` builds these, and
/// a generic type's first use makes the runtime look up conformances.
struct SecretServiceRequest {
    var path: String
    var interface: String
    var member: String
    /// The argument shapes both ways write: strings and string dictionaries.
    var arguments: [BusMessage.Argument]
    /// The reply's type, which GDBus checks; the bare path's reader of it checks the same signature.
    var replyType: StaticString

    /// `Service.ReadAlias(s) → o`: the collection behind `alias`, `/` when it resolves to nothing.
    static func readAlias(_ alias: String) -> SecretServiceRequest {
        SecretServiceRequest(path: SecretServiceCalls.servicePath, interface: SecretServiceCalls.serviceInterface,
                             member: "ReadAlias", arguments: [.string(alias)], replyType: "(o)")
    }

    /// `Properties.Get(Collection, "Locked") → v` of the collection at `path`: a boolean.
    static func collectionIsLocked(_ path: String) -> SecretServiceRequest {
        property(of: path, "org.freedesktop.Secret.Collection", "Locked")
    }

    /// `Properties.Get(Item, "Attributes") → v` of the item at `path`: an `a{ss}`.
    static func itemAttributes(_ path: String) -> SecretServiceRequest {
        property(of: path, "org.freedesktop.Secret.Item", "Attributes")
    }

    /// `Service.SearchItems(a{ss}) → (ao unlocked, ao locked)`. Works while locked.
    static func searchItems(_ attributes: [(String, String)]) -> SecretServiceRequest {
        SecretServiceRequest(path: SecretServiceCalls.servicePath, interface: SecretServiceCalls.serviceInterface,
                             member: "SearchItems", arguments: [.stringDictionary(attributes)], replyType: "(aoao)")
    }

    private static func property(of path: String, _ interface: String, _ name: String) -> SecretServiceRequest {
        SecretServiceRequest(path: path, interface: "org.freedesktop.DBus.Properties", member: "Get",
                             arguments: [.string(interface), .string(name)], replyType: "(v)")
    }

    /// The call as the bare path sends it.
    var methodCall: BareBusConnection.MethodCall {
        BareBusConnection.MethodCall(destination: SecretServiceCalls.busName, path: path, interface: interface, member: member,
                                     arguments: arguments)
    }

    /// The arguments as GDBus sends them: a floating tuple.
    var parameters: OpaquePointer {
        var children: [OpaquePointer?] = []
        for argument in arguments {
            switch argument {
            case .string(let text): children.append(g_variant_new_string(text))
            case .stringDictionary(let pairs): children.append(GVariant.stringDictionary(pairs))
            }
        }
        return variantTuple(children)
    }
}
