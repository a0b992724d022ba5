// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
internal import Glibc
#endif
internal import CGLib

/// GLib's fatal errors as an exit with a status instead of an abort. Plumbing of this package's
/// command line (`package`): the library never installs it by itself.
///
/// GLib ends the process with SIGTRAP (`g_error`) when it cannot get what it needs for itself:
/// a descriptor for a main context's wakeup pipe once the process is out of file descriptors,
/// memory in `g_malloc`. For a command those are "a resource is unavailable", not a crash to
/// debug.
package enum GLibFatalErrors {
    /// From now on, a fatal GLib message (`G_LOG_LEVEL_ERROR`) writes one line,
    /// `linePrefix` + domain + message, to standard error and ends the process with `status`
    /// before GLib would abort it. Every other message goes to GLib's default writer, as before.
    /// Call it once, before GLib logs anything. The corresponding C functions are
    /// `g_log_set_writer_func`, `g_log_writer_default` and `_exit`.
    package static func exit(status: Int32, linePrefix: String) {
        let prefix = Array(linePrefix.utf8)
        // Read by the writer on whatever thread GLib fails, possibly with no memory left to
        // allocate: written once here, never freed. Layout: status, prefix length, prefix bytes.
        let block = UnsafeMutableRawPointer.allocate(byteCount: 8 + prefix.count, alignment: 8)
        block.storeBytes(of: status, as: Int32.self)
        block.storeBytes(of: Int32(prefix.count), toByteOffset: 4, as: Int32.self)
        prefix.withUnsafeBytes { (block + 8).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        g_log_set_writer_func(writeOrExit, block, nil)
    }
}

/// GLib's log writer: a fatal message ends the process (see ``GLibFatalErrors/exit(status:linePrefix:)``);
/// anything else goes to the default writer. No allocation on the fatal path: the line is put
/// together in a buffer on the stack.
private func writeOrExit(_ level: GLogLevelFlags, _ fields: UnsafePointer<GLogField>?, _ count: gsize,
                         _ settings: UnsafeMutableRawPointer?) -> GLogWriterOutput {
    guard level.rawValue & G_LOG_LEVEL_ERROR.rawValue != 0, let settings else {
        return g_log_writer_default(level, fields, count, nil)
    }
    let status = settings.load(as: Int32.self)
    let prefixLength = Int(settings.load(fromByteOffset: 4, as: Int32.self))
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 512) { line in
        var length = 0
        /// Appends bytes as one line: control characters become spaces, the rest is cut off.
        func append(_ bytes: UnsafeRawBufferPointer) {
            for byte in bytes where length < line.count - 1 {
                line[length] = byte < 0x20 || byte == 0x7f ? UInt8(ascii: " ") : byte
                length += 1
            }
        }
        append(UnsafeRawBufferPointer(start: settings + 8, count: prefixLength))
        if let domain = fieldValue("GLIB_DOMAIN", in: fields, count: Int(count)) {
            append(domain)
            let separator: StaticString = ": "
            append(UnsafeRawBufferPointer(start: separator.utf8Start, count: separator.utf8CodeUnitCount))
        }
        if let message = fieldValue("MESSAGE", in: fields, count: Int(count)) { append(message) }
        line[length] = UInt8(ascii: "\n")
        var written = 0
        while written <= length {
            let result = write(STDERR_FILENO, line.baseAddress! + written, length + 1 - written)
            if result <= 0 && errno != EINTR { break }
            if result > 0 { written += result }
        }
    }
    _exit(status)
}

/// The bytes of the field named `key` (a string field's length is -1: up to its NUL).
private func fieldValue(_ key: StaticString, in fields: UnsafePointer<GLogField>?, count: Int) -> UnsafeRawBufferPointer? {
    guard let fields else { return nil }
    for index in 0..<count {
        let field = fields[index]
        guard let name = field.key, strcmp(name, UnsafeRawPointer(key.utf8Start).assumingMemoryBound(to: CChar.self)) == 0, let value = field.value else { continue }
        let length = field.length < 0 ? strlen(value.assumingMemoryBound(to: CChar.self)) : Int(field.length)
        return UnsafeRawBufferPointer(start: value, count: length)
    }
    return nil
}
