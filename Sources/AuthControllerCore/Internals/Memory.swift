// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Memory that held a secret.
package enum Memory {
    /// Overwrites the bytes with zeros in a way the compiler may not drop, e.g. a buffer that
    /// held a password. The corresponding C function is `explicit_bzero`.
    package static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        explicit_bzero(base, buffer.count)
    }
}
