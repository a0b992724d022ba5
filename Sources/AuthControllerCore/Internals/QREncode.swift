// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
internal import Glibc
#endif
internal import CQREncode

/// A QR code symbol: a square of dark and light modules that encodes a text, for a person to
/// scan with a phone. Plumbing of this package's command line (`package`), not part of the
/// library's API.
///
/// libqrencode is loaded with `dlopen` by the first QR code made (see `CQREncode/shim.h`), so a
/// command that draws none never loads it.
package struct QRCode: Sendable {
    /// The soname of libqrencode 4 (Debian package libqrencode4).
    package static let libraryName = "libqrencode.so.4"

    /// The number of modules on each side, without the quiet zone: 21 for version 1, 4 more for
    /// each version above it.
    package let size: Int

    /// The modules row by row, `true` for dark.
    private let modules: [Bool]

    /// Encodes `text` with error correction level L, the smallest symbol that holds it, as the
    /// `qrencode` command does: a code on a screen is not soiled or torn, so the 7 % it can
    /// recover is enough, and the smaller symbol fits more terminals.
    ///
    /// Throws ``AuthError/unavailable(_:detail:)-enum.case`` when libqrencode is not installed,
    /// and ``AuthError/invalidInput(_:)-enum.case`` for an empty text, one with a NUL character,
    /// or one longer than a QR code holds (2,953 bytes). Does not block.
    /// The corresponding C function is `QRcode_encodeString`.
    package init(encoding text: String) throws(AuthError) {
        try self.init(encoding: text, libraryName: Self.libraryName)
    }

    /// ``init(encoding:)`` with libqrencode loaded from `libraryName`: a name other than
    /// ``libraryName`` is for tests (a library that is not there).
    package init(encoding text: String, libraryName: String) throws(AuthError) {
        let loaded = libraryName == Self.libraryName ? Library.installed : Library(libraryName)
        guard let library = loaded?.entryPoints else {
            throw .unavailable("libqrencode is not installed, and authctl needs it to draw the QR code; install the Debian package libqrencode4")
        }
        guard !text.isEmpty, !text.utf8.contains(0) else {
            throw .invalidInput("a QR code needs a text without NUL characters, and this one is empty or has one")
        }
        let encoded = text.withCString { authctl_qrencode_encode(library, $0, AUTHCTL_QR_ECLEVEL_L) }
        guard let encoded else {
            let failure = errno
            if failure == ERANGE {
                throw .invalidInput("the text is too long for a QR code: \(text.utf8.count) bytes, and one holds at most 2953")
            }
            throw .unavailable("libqrencode could not encode the QR code (errno \(failure))")
        }
        defer { authctl_qrencode_free(library, encoded) }
        let size = Int(encoded.pointee.width)
        self.size = size
        self.modules = UnsafeBufferPointer(start: encoded.pointee.data, count: size * size).map { $0 & 1 == 1 }
    }

    /// Whether the module at `row` and `column` (from the top left, 0 to ``size`` - 1) is dark.
    /// Outside the symbol (the quiet zone around it) every module is light.
    package func isDark(row: Int, column: Int) -> Bool {
        guard (0..<size).contains(row), (0..<size).contains(column) else { return false }
        return modules[row * size + column]
    }

    /// libqrencode's entry points, loaded once.
    private struct Library: @unchecked Sendable {
        // A table of two function pointers that is written once, before it is shared, and only
        // read afterwards: safe to use from any thread. libqrencode itself is thread-safe (Debian
        // builds it with pthreads).
        let entryPoints: OpaquePointer

        /// The installed library, loaded by the first QR code; `nil` when it is not installed.
        static let installed = Library(QRCode.libraryName)

        /// The corresponding C functions are `dlopen` and `dlsym`.
        init?(_ soname: String) {
            guard let entryPoints = authctl_qrencode_open(soname) else { return nil }
            self.entryPoints = entryPoints
        }
    }
}
