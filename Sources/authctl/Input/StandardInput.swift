// SPDX-License-Identifier: Apache-2.0
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
        do throws(Errno) {
            return try Posix.readAll(descriptor.rawValue, limit: limit, end: end)
        } catch {
            throw .settingsIO("\(failure): \(error)")
        }
    }
}
