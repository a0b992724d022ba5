// SPDX-License-Identifier: Apache-2.0
/// A password as typed or piped in: 1–4096 bytes of UTF-8 without NUL. The bytes live in one
/// buffer that is wiped when the last copy of the value goes away.
public struct Password: Sendable, Equatable {
    /// The longest password accepted, in bytes as read.
    public static let maximumLength = 4096

    private final class Storage: @unchecked Sendable {
        // Sendable: the buffer is written once, in init, before the value can be shared; after
        // that it is only read, until deinit wipes it when no copy is left.
        let buffer: UnsafeMutableRawBufferPointer
        init(copying bytes: UnsafeRawBufferPointer) {
            buffer = .allocate(byteCount: max(bytes.count, 1), alignment: 1)
            buffer.copyMemory(from: bytes)
        }
        deinit {
            Memory.wipe(buffer)
            buffer.deallocate()
        }
    }

    private let storage: Storage
    private let count: Int

    /// Validates and copies `bytes`; the caller wipes its own copy.
    public init(bytes: UnsafeRawBufferPointer) throws(AuthError) {
        guard bytes.count >= 1 else { throw .invalidInput("invalid password: it is empty") }
        guard bytes.count <= Self.maximumLength else {
            throw .invalidInput("invalid password: it is longer than \(Self.maximumLength) bytes")
        }
        guard !bytes.contains(0) else { throw .invalidInput("invalid password: it contains a NUL byte") }
        guard Self.isValidUTF8(bytes) else {
            throw .invalidInput("invalid password: it is not valid UTF-8")
        }
        storage = Storage(copying: bytes)
        count = bytes.count
    }

    /// A password from a Swift string (which cannot be wiped; prefer the bytes initialiser).
    public init(_ text: String) throws(AuthError) {
        var bytes = Array(text.utf8)
        defer { bytes.withUnsafeMutableBytes { Memory.wipe($0) } }
        let result = bytes.withUnsafeBytes { buffer in Result { () throws(AuthError) in try Password(bytes: buffer) } }
        self = try result.get()
    }

    /// Checks UTF-8 without building a `String`, which would be a copy nobody can wipe.
    private static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    /// Compares the bytes as read (before normalisation).
    public static func == (lhs: Password, rhs: Password) -> Bool {
        lhs.count == rhs.count && lhs.storage.buffer[0..<lhs.count].elementsEqual(rhs.storage.buffer[0..<rhs.count])
    }

    /// Lends the password's bytes as read (what a token server is sent: it normalises itself).
    func withBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try body(UnsafeRawBufferPointer(rebasing: storage.buffer[0..<count]))
    }

    /// Lends the password's bytes after Unicode NFKC normalisation (NIST SP 800-63B); the
    /// normalised copy is wiped afterwards.
    func withNormalizedBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        // Validation guaranteed UTF-8, so normalisation cannot fail.
        try GLibText.withNFKC(UnsafeRawBufferPointer(rebasing: storage.buffer[0..<count]), body)!
    }
}

extension String {
    /// Whether the two are the same bytes, compared without stopping at the first difference, so
    /// the time taken says nothing of how much of a guessed secret (a sign-in's `state`, a token
    /// git hands back) was right.
    func equalsInConstantTime(_ other: String) -> Bool {
        let (left, right) = (Array(utf8), Array(other.utf8))
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for index in left.indices { difference |= left[index] ^ right[index] }
        return difference == 0
    }
}
