// SPDX-License-Identifier: Apache-2.0
internal import CGLib

// Building and reading GVariants: the values D-Bus messages carry.

/// A `GVariantType` for a type string. The string is static, so the pointer stays valid for
/// as long as GLib keeps it (a Swift `String` would hand out a temporary one).
func variantType(_ text: StaticString) -> OpaquePointer {
    authctl_variant_type(UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self))
}

/// A floating tuple of `children` (themselves floating, sunk by the tuple).
/// The corresponding C function is `g_variant_new_tuple`.
func variantTuple(_ children: [OpaquePointer?]) -> OpaquePointer {
    var children = children
    return children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
}

/// GVariant marshalling: building the values of D-Bus calls and signals (`a{sv}`, `a{ss}`,
/// `ao`, the Secret Service's `(oayays)`) and reading replies. Values built here are floating:
/// the call or container they are passed to sinks them. Values read are copied out into Swift.
enum GVariant {
    /// A floating `a{sv}` of `entries`, in their order.
    /// The corresponding C functions are `g_variant_builder_add_value` and `g_variant_builder_end`.
    static func dictionary(_ entries: [(String, GDBus.Value)]) -> OpaquePointer {
        let builder = g_variant_builder_new(variantType("a{sv}"))
        defer { g_variant_builder_unref(builder) }
        for (key, value) in entries {
            let boxed: OpaquePointer
            switch value {
            case .string(let text): boxed = g_variant_new_string(text)
            case .uint64(let number): boxed = g_variant_new_uint64(guint64(number))
            case .boolean(let flag): boxed = g_variant_new_boolean(flag ? 1 : 0)
            }
            g_variant_builder_add_value(builder, g_variant_new_dict_entry(g_variant_new_string(key), g_variant_new_variant(boxed)))
        }
        return g_variant_builder_end(builder)
    }

    /// `(oayays)`: session, empty parameters (plain), value, content type.
    static func secretStruct(_ session: String, _ secret: [UInt8], _ contentType: String) -> OpaquePointer {
        let value = secret.withUnsafeBytes { bytes in
            g_variant_new_fixed_array(variantType("y"), bytes.baseAddress, gsize(bytes.count), 1)!
        }
        let empty = g_variant_new_fixed_array(variantType("y"), nil, 0, 1)!
        return variantTuple([g_variant_new_object_path(session), empty, value, g_variant_new_string(contentType)])
    }

    /// The secret's bytes in an `Item.GetSecret` reply, `((oayays))`.
    static func secretValue(in reply: OpaquePointer) -> [UInt8] {
        let structure = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(structure) }
        let value = g_variant_get_child_value(structure, 2)!
        defer { g_variant_unref(value) }
        var count: gsize = 0
        guard let bytes = g_variant_get_fixed_array(value, &count, 1) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: Int(count)))
    }

    /// The string (or object path) at `index` of `tuple`.
    static func string(in tuple: OpaquePointer, at index: Int) -> String {
        let child = g_variant_get_child_value(tuple, gsize(index))!
        defer { g_variant_unref(child) }
        return String(cString: g_variant_get_string(child, nil))
    }

    /// The value in the variant at index 0 of `tuple` — a `(v)` reply, as `Properties.Get`
    /// answers — owned by the caller; `nil` when `tuple` has no child.
    static func valueInVariant(in tuple: OpaquePointer) -> OpaquePointer? {
        guard let boxed = g_variant_get_child_value(tuple, 0) else { return nil }
        defer { g_variant_unref(boxed) }
        return g_variant_get_variant(boxed)
    }

    /// A `s` value's text; `nil` for any other type.
    static func string(_ value: OpaquePointer) -> String? {
        g_variant_is_of_type(value, variantType("s")) != 0 ? String(cString: g_variant_get_string(value, nil)) : nil
    }

    /// A `b` value's flag; `nil` for any other type.
    static func boolean(_ value: OpaquePointer) -> Bool? {
        g_variant_is_of_type(value, variantType("b")) != 0 ? g_variant_get_boolean(value) != 0 : nil
    }

    /// A floating `a{ss}`.
    static func stringDictionary(_ pairs: [(String, String)]) -> OpaquePointer {
        let builder = g_variant_builder_new(variantType("a{ss}"))
        defer { g_variant_builder_unref(builder) }
        for (key, value) in pairs {
            g_variant_builder_add_value(builder, g_variant_new_dict_entry(g_variant_new_string(key), g_variant_new_string(value)))
        }
        return g_variant_builder_end(builder)
    }

    /// A floating `ao`.
    static func objectPathArray(_ paths: [String]) -> OpaquePointer {
        let builder = g_variant_builder_new(variantType("ao"))
        defer { g_variant_builder_unref(builder) }
        for path in paths { g_variant_builder_add_value(builder, g_variant_new_object_path(path)) }
        return g_variant_builder_end(builder)
    }

    /// An `a{ss}` as a dictionary (empty for any other type).
    static func stringDictionary(reading value: OpaquePointer) -> [String: String] {
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

    /// The strings (or object paths) of the array at `index` of `tuple`.
    static func strings(in tuple: OpaquePointer, at index: Int) -> [String] {
        let array = g_variant_get_child_value(tuple, gsize(index))!
        defer { g_variant_unref(array) }
        return (0..<g_variant_n_children(array)).map { element in
            let child = g_variant_get_child_value(array, element)!
            defer { g_variant_unref(child) }
            return String(cString: g_variant_get_string(child, nil))
        }
    }

    /// The string-typed members of `tuple`, in order.
    static func strings(inTuple tuple: OpaquePointer) -> [String] {
        (0..<g_variant_n_children(tuple)).compactMap { index in
            let child = g_variant_get_child_value(tuple, index)!
            defer { g_variant_unref(child) }
            guard g_variant_is_of_type(child, variantType("s")) != 0 || g_variant_is_of_type(child, variantType("o")) != 0 else { return nil }
            return String(cString: g_variant_get_string(child, nil))
        }
    }

    /// Decodes `(s…sa{sv})` parameters: the strings, and the details that are strings, uint64s
    /// or booleans (other arguments and values are left out).
    static func decodeSignal(_ parameters: OpaquePointer) -> GDBus.ReceivedSignal {
        let signature = String(cString: g_variant_get_type_string(parameters))
        var strings: [String] = []
        var details: [String: GDBus.Value] = [:]
        for index in 0..<g_variant_n_children(parameters) {
            guard let child = g_variant_get_child_value(parameters, index) else { continue }
            defer { g_variant_unref(child) }
            if g_variant_is_of_type(child, variantType("s")) != 0 {
                strings.append(String(cString: g_variant_get_string(child, nil)))
            } else if g_variant_is_of_type(child, variantType("a{sv}")) != 0 {
                for entryIndex in 0..<g_variant_n_children(child) {
                    guard let entry = g_variant_get_child_value(child, entryIndex) else { continue }
                    defer { g_variant_unref(entry) }
                    let key = g_variant_get_child_value(entry, 0)!
                    let boxed = g_variant_get_child_value(entry, 1)!
                    let value = g_variant_get_variant(boxed)!
                    defer { g_variant_unref(key); g_variant_unref(boxed); g_variant_unref(value) }
                    let name = String(cString: g_variant_get_string(key, nil))
                    if g_variant_is_of_type(value, variantType("s")) != 0 {
                        details[name] = .string(String(cString: g_variant_get_string(value, nil)))
                    } else if g_variant_is_of_type(value, variantType("t")) != 0 {
                        details[name] = .uint64(UInt64(g_variant_get_uint64(value)))
                    } else if g_variant_is_of_type(value, variantType("b")) != 0 {
                        details[name] = .boolean(g_variant_get_boolean(value) != 0)
                    }
                }
            }
        }
        return GDBus.ReceivedSignal(signature: signature, strings: strings, details: details)
    }
}
