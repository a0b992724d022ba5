internal import CLibsecret

/// Thin adapters over libsecret: each marshals, calls, settles ownership and converts the
/// `GError`; nothing else. Named after the C function without its `secret_` prefix.
enum Libsecret {
    typealias Service = ObjectRef<SecretService>
    typealias Item = ObjectRef<SecretItem>
    typealias Collection = ObjectRef<SecretCollection>

    /// `io.github.authctl.Password` with string attributes `service` and `account`.
    /// `SECRET_SCHEMA_DONT_MATCH_NAME`: items are found by their attributes alone, so an
    /// item another tool stored with the same attributes is seen.
    nonisolated(unsafe) static let schema: UnsafeMutablePointer<SecretSchema> = {
        let types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, nil)!
        g_hash_table_insert(types, g_strdup("service"), UnsafeMutableRawPointer(bitPattern: Int(SECRET_SCHEMA_ATTRIBUTE_STRING.rawValue)))
        g_hash_table_insert(types, g_strdup("account"), UnsafeMutableRawPointer(bitPattern: Int(SECRET_SCHEMA_ATTRIBUTE_STRING.rawValue)))
        defer { g_hash_table_unref(types) }
        return secret_schema_newv("io.github.authctl.Password", SECRET_SCHEMA_DONT_MATCH_NAME, types)
    }()

    /// Builds a `GHashTable` of string attributes and hands it to `body`.
    static func withAttributes<T>(_ attributes: KeyValuePairs<String, String>, _ body: (OpaquePointer) throws(GLibError) -> T) throws(GLibError) -> T {
        let table = authctl_string_table_new()!
        defer { g_hash_table_unref(table) }
        for (key, value) in attributes { authctl_string_table_insert(table, key, value) }
        return try body(table)
    }

    /// The corresponding C function is `secret_service_get_sync`.
    static func serviceGet(_ deadline: Deadline) throws(GLibError) -> Service {
        let service = try withGError { secret_service_get_sync(SECRET_SERVICE_NONE, deadline.cancellable, $0) }
        return Service(taking: service!)
    }

    /// The corresponding C function is `secret_service_search_sync`, with no schema so that
    /// items match on their attributes alone.
    static func serviceSearch(_ service: Service, attributes: KeyValuePairs<String, String>, flags: SecretSearchFlags, _ deadline: Deadline) throws(GLibError) -> [Item] {
        let list = try withAttributes(attributes) { (table) throws(GLibError) in
            try withGError { secret_service_search_sync(service.pointer, nil, table, flags, deadline.cancellable, $0) }
        }
        return takeObjectList(list)
    }

    /// The corresponding C function is `secret_collection_for_alias_sync`; `nil` when the
    /// alias does not resolve.
    static func collectionForAlias(_ service: Service, alias: String, _ deadline: Deadline) throws(GLibError) -> Collection? {
        let collection = try withGError {
            secret_collection_for_alias_sync(service.pointer, alias, SECRET_COLLECTION_NONE, deadline.cancellable, $0)
        }
        return collection.map { Collection(taking: $0) }
    }

    /// The corresponding C function is `secret_service_unlock_sync`. May show the unlock
    /// prompt; returns how many of the objects are now unlocked (0 if the prompt was dismissed).
    static func serviceUnlock(_ service: Service, _ collection: Collection, _ deadline: Deadline) throws(GLibError) -> Int {
        let objects = g_list_append(nil, UnsafeMutableRawPointer(collection.pointer))
        defer { g_list_free(objects) }
        var unlocked: UnsafeMutablePointer<GList>?
        let count = try withGError {
            secret_service_unlock_sync(service.pointer, objects, deadline.cancellable, &unlocked, $0)
        }
        g_list_free_full(unlocked, authctl_object_unref)
        return Int(count)
    }

    /// The corresponding C function is `secret_item_create_sync`.
    static func itemCreate(in collection: Collection, attributes: KeyValuePairs<String, String>, label: String, secret: String, _ deadline: Deadline) throws(GLibError) {
        let value = secret_value_new(secret, -1, "text/plain")
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        let item = try withAttributes(attributes) { (table) throws(GLibError) in
            try withGError {
                secret_item_create_sync(collection.pointer, schema, table, label, value, SECRET_ITEM_CREATE_REPLACE, deadline.cancellable, $0)
            }
        }
        if let item { authctl_object_unref(item) }
    }

    /// The corresponding C function is `secret_item_set_secret_sync`.
    static func itemSetSecret(_ item: Item, secret: String, _ deadline: Deadline) throws(GLibError) {
        let value = secret_value_new(secret, -1, "text/plain")
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        _ = try withGError { secret_item_set_secret_sync(item.pointer, value, deadline.cancellable, $0) }
    }

    /// The corresponding C function is `secret_item_delete_sync`.
    static func itemDelete(_ item: Item, _ deadline: Deadline) throws(GLibError) {
        _ = try withGError { secret_item_delete_sync(item.pointer, deadline.cancellable, $0) }
    }

    /// The secret loaded by a search with `SECRET_SEARCH_LOAD_SECRETS`, as text.
    /// The corresponding C functions are `secret_item_get_secret` and `secret_value_get_text`.
    static func itemSecretText(_ item: Item) -> String? {
        guard let value = secret_item_get_secret(item.pointer) else { return nil }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        return secret_value_get_text(value).map { String(cString: $0) }
    }

    /// The corresponding C function is `secret_item_get_locked`.
    static func itemIsLocked(_ item: Item) -> Bool { secret_item_get_locked(item.pointer) != 0 }

    /// The corresponding C function is `secret_collection_get_locked`.
    static func collectionIsLocked(_ collection: Collection) -> Bool {
        secret_collection_get_locked(collection.pointer) != 0
    }

    /// Takes a `GList` of owned GObjects ("transfer full") apart.
    private static func takeObjectList<Pointee>(_ list: UnsafeMutablePointer<GList>?) -> [ObjectRef<Pointee>] {
        var objects: [ObjectRef<Pointee>] = []
        var node = list
        while let current = node {
            if let data = current.pointee.data {
                objects.append(ObjectRef(taking: data.assumingMemoryBound(to: Pointee.self)))
            }
            node = current.pointee.next
        }
        g_list_free(list)
        return objects
    }
}
