import AuthControllerCore
import SystemPackage

/// A credential helper's request on standard input: a few lines a client writes, read with a
/// cap, so that a client that writes without end cannot make the helper read without end.
enum StandardInput {
    /// At most `limit` bytes of `descriptor`, up to its end or, sooner, up to the index where
    /// `end` finds the request ends (what follows is dropped, and not read on). A failed read is
    /// ``AuthError/settingsIO(_:)-enum.case``: `failure`, a colon and the error.
    static func read(_ descriptor: FileDescriptor = .standardInput, atMost limit: Int, failure: String,
                     end: ([UInt8]) -> Int? = { _ in nil }) throws(AuthError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let count: Int
            do {
                count = try chunk.withUnsafeMutableBytes { buffer in
                    try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer.prefix(limit - bytes.count)))
                }
            } catch {
                throw .settingsIO("\(failure): \(error)")
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
            if let index = end(bytes) {
                bytes.removeSubrange(index...)
                break
            }
        }
        return bytes
    }
}
