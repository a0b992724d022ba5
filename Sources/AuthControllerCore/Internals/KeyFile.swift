// SPDX-License-Identifier: Apache-2.0
internal import CGLib

/// A GLib key file, kept whole so that groups, keys and comments authctl does not know are
/// written back unchanged. The corresponding C type is `GKeyFile`.
final class KeyFile {
    private let pointer: OpaquePointer

    init() { pointer = g_key_file_new() }

    /// The corresponding C function is `g_key_file_load_from_data`.
    convenience init(parsing bytes: [UInt8]) throws(GLibError) {
        self.init()
        let flags = GKeyFileFlags(rawValue: G_KEY_FILE_KEEP_COMMENTS.rawValue | G_KEY_FILE_KEEP_TRANSLATIONS.rawValue)
        _ = try bytes.withUnsafeBufferPointer { (buffer) throws(GLibError) in
            try buffer.withMemoryRebound(to: CChar.self) { (chars) throws(GLibError) in
                try withGError { g_key_file_load_from_data(pointer, chars.baseAddress, gsize(chars.count), flags, $0) }
            }
        }
    }

    deinit { g_key_file_free(pointer) }

    /// The names of the groups, in file order. The corresponding C function is `g_key_file_get_groups`.
    func groups() -> [String] {
        Self.takeStrings(g_key_file_get_groups(pointer, nil))
    }

    /// The unescaped value, `nil` when the group or key is missing.
    /// The corresponding C function is `g_key_file_get_string`.
    func string(group: String, key: String) throws(GLibError) -> String? {
        guard g_key_file_has_group(pointer, group) != 0,
              try withGError({ g_key_file_has_key(pointer, group, key, $0) }) != 0 else { return nil }
        return takeString(try withGError { g_key_file_get_string(pointer, group, key, $0) })
    }

    /// The keys of `group` as the file has them, a key named twice twice; none when the group is
    /// missing. The corresponding C function is `g_key_file_get_keys`.
    func keys(group: String) -> [String] {
        guard g_key_file_has_group(pointer, group) != 0 else { return [] }
        return Self.takeStrings(g_key_file_get_keys(pointer, group, nil, nil))
    }

    /// The strings of a NULL-terminated array GLib handed over, which is then freed.
    private static func takeStrings(_ names: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
        guard let names else { return [] }
        defer { g_strfreev(names) }
        var result: [String] = []
        var index = 0
        while let name = names[index] {
            result.append(String(cString: name))
            index += 1
        }
        return result
    }

    /// The corresponding C function is `g_key_file_set_string` (which escapes the value).
    func setString(_ value: String, group: String, key: String) {
        g_key_file_set_string(pointer, group, key, value)
    }

    /// The corresponding C function is `g_key_file_remove_key`.
    func removeKey(group: String, key: String) {
        var error: UnsafeMutablePointer<GError>?
        g_key_file_remove_key(pointer, group, key, &error)
        if let error { g_error_free(error) }  // a missing key is not a failure here
    }

    /// The corresponding C function is `g_key_file_remove_group`.
    func removeGroup(_ group: String) {
        var error: UnsafeMutablePointer<GError>?
        g_key_file_remove_group(pointer, group, &error)
        if let error { g_error_free(error) }  // a missing group is not a failure here
    }

    /// The corresponding C function is `g_key_file_to_data`.
    func data() -> [UInt8] {
        var length: gsize = 0
        guard let text = g_key_file_to_data(pointer, &length, nil) else { return [] }
        defer { g_free(text) }
        return Array(UnsafeRawBufferPointer(start: text, count: Int(length)))
    }
}

/// Small GLib utilities used by the library.
enum GLibText {
    /// Unicode NFKC of valid UTF-8 bytes, handed to `body` and wiped afterwards; `nil` input
    /// that is not UTF-8. The corresponding C function is `g_utf8_normalize`.
    static func withNFKC<T>(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T? {
        guard let normalized = bytes.withMemoryRebound(to: CChar.self, { g_utf8_normalize($0.baseAddress, gssize($0.count), G_NORMALIZE_NFKC) }) else {
            return nil
        }
        let length = strlen(normalized)
        defer {
            memset(normalized, 0, length)
            g_free(normalized)
        }
        return try body(UnsafeRawBufferPointer(start: normalized, count: Int(length)))
    }

    /// Lower-case hex MD5 of the UTF-8 text. The corresponding C function is
    /// `g_compute_checksum_for_string`.
    static func md5Hex(_ text: String) -> String {
        takeString(g_compute_checksum_for_string(G_CHECKSUM_MD5, text, -1)) ?? ""
    }

    /// The SHA-256 digest of `bytes`. The corresponding C function is `g_compute_checksum_for_data`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        let hex = bytes.withUnsafeBufferPointer { takeString(g_compute_checksum_for_data(G_CHECKSUM_SHA256, $0.baseAddress, gsize($0.count))) } ?? ""
        let digits = Array(hex.utf8).map { $0 <= UInt8(ascii: "9") ? $0 - UInt8(ascii: "0") : $0 - UInt8(ascii: "a") + 10 }
        return stride(from: 0, to: digits.count - 1, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
    }
}
