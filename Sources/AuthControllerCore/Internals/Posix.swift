// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
package import SystemPackage

/// Thin adapters over the system calls the settings store and the sandbox need: swift-system's
/// where it has them (`open`, `read`, `write`, `close`, `fstat`), the C functions where it does
/// not, and `lstat` (see ``Posix/lstatus(_:)``). Every failure is swift-system's `Errno`, the one errno type of this package; the C
/// convention "-1 and `errno`" becomes one in exactly one helper, ``Posix/check(_:)``.
package enum Posix {
    /// What a failing call throws.
    package typealias Failure = Errno

    /// The one place where "-1 and `errno`" becomes a thrown `Errno`; a call interrupted by a
    /// signal (`EINTR`) is made again.
    @discardableResult
    package static func check<Result: BinaryInteger>(_ body: () -> Result) throws(Errno) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let failure = Errno(rawValue: errno)
            if failure != .interrupted { throw failure }
        }
    }

    /// A call of swift-system's: its functions throw `Errno` without saying so in their type.
    private static func system<Result>(_ body: () throws -> Result) throws(Errno) -> Result {
        do {
            return try body()
        } catch let failure as Errno {
            throw failure
        } catch {
            // swift-system throws nothing else; should it one day, it is still an I/O failure.
            throw .ioError
        }
    }

    struct FileStatus {
        let mode: mode_t
        let owner: uid_t
        var isRegularFile: Bool { mode & S_IFMT == S_IFREG }
        var isDirectory: Bool { mode & S_IFMT == S_IFDIR }
        var isSymbolicLink: Bool { mode & S_IFMT == S_IFLNK }
        var permissions: mode_t { mode & 0o7777 }

        init(_ status: Stat) {
            mode = status.mode.rawValue
            owner = status.userID.rawValue
        }

        init(_ status: stat) {
            mode = status.st_mode
            owner = status.st_uid
        }
    }

    /// What is at `path`, the link itself for a symbolic link; `nil` when nothing is there.
    /// The corresponding C function is `lstat`.
    static func lstatus(_ path: String) throws(Errno) -> FileStatus? {
        // The C function, not swift-system's `FilePath.stat` (README, Performance, the start-up
        // rules): the settings directory is checked first, in every command.
        var status = stat()
        do {
            try check { Glibc.lstat(path, &status) }
        } catch .noSuchFileOrDirectory {
            return nil
        }
        return FileStatus(status)
    }

    /// The corresponding C function is `fstat`.
    static func fstatus(_ descriptor: Int32) throws(Errno) -> FileStatus {
        FileStatus(try FileDescriptor(rawValue: descriptor).stat())
    }

    /// The corresponding C function is `mkdir`; an existing entry is not an error.
    package static func makeDirectory(_ path: String, mode: UInt32) throws(Errno) {
        do {
            try check { mkdir(path, mode_t(mode)) }
        } catch .fileExists {
            return
        }
    }

    /// Opens `path`, never handing the descriptor to a program this process starts.
    /// `permissions` are those of a file that `options` has created.
    /// The corresponding C function is `open` (with `O_CLOEXEC`).
    private static func open(_ path: String, _ access: FileDescriptor.AccessMode, _ options: FileDescriptor.OpenOptions,
                             permissions: FilePermissions? = nil) throws(Errno) -> Int32 {
        try system {
            try FileDescriptor.open(FilePath(path), access, options: options.union(.closeOnExec), permissions: permissions)
        }.rawValue
    }

    /// Opens a file to read, refusing a symbolic link (`Errno.isSymbolicLink`) and never
    /// blocking on a FIFO planted at the path.
    static func openForReading(_ path: String) throws(Errno) -> Int32 {
        try open(path, .readOnly, [.noFollow, .nonBlocking])
    }

    /// Opens a folder to lock it (`flock` takes any open file).
    static func openFolder(_ path: String) throws(Errno) -> Int32 {
        try open(path, .readOnly, [.directory])
    }

    /// Opens (creating, mode 0600) a lock file, refusing a symbolic link.
    static func openLockFile(_ path: String) throws(Errno) -> Int32 {
        try open(path, .readWrite, [.create, .noFollow], permissions: [.ownerReadWrite])
    }

    /// Creates a new file to write, failing if anything (a link included) is at `path`.
    static func createExclusive(_ path: String, mode: mode_t) throws(Errno) -> Int32 {
        try open(path, .writeOnly, [.create, .exclusiveCreate, .noFollow], permissions: FilePermissions(rawValue: mode))
    }

    /// Makes a directory's entries durable (a rename in it, say). The corresponding C
    /// functions are `open(O_DIRECTORY)` and `fsync`.
    static func syncDirectory(_ path: String) throws(Errno) {
        let descriptor = try open(path, .readOnly, [.directory])
        defer { close(descriptor) }
        try fsync(descriptor)
    }

    /// The corresponding C function is `close`.
    static func close(_ descriptor: Int32) { try? FileDescriptor(rawValue: descriptor).close() }

    /// Reads the whole file, or its first `limit` bytes, or (sooner) up to the index where `end`
    /// finds that what was read is complete: what follows is dropped, and not read on. The
    /// corresponding C function is `read`.
    package static func readAll(_ descriptor: Int32, limit: Int = .max, end: ([UInt8]) -> Int? = { _ in nil }) throws(Errno) -> [UInt8] {
        let file = FileDescriptor(rawValue: descriptor)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            // Never past `limit`: what follows stays unread (a pipe's writer may not be done).
            let count = try system {
                try chunk.withUnsafeMutableBytes { try file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0.prefix(limit - bytes.count))) }
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

    /// The whole file at `path`, which must not be a symbolic link.
    static func readAll(path: String) throws(Errno) -> [UInt8] {
        let descriptor = try openForReading(path)
        defer { close(descriptor) }
        return try readAll(descriptor)
    }

    /// Writes every byte. The corresponding C function is `write`.
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) throws(Errno) {
        _ = try system { try FileDescriptor(rawValue: descriptor).writeAll(bytes) }
    }

    /// The corresponding C function is `fsync`.
    static func fsync(_ descriptor: Int32) throws(Errno) { try check { Glibc.fsync(descriptor) } }

    /// The corresponding C function is `fchmod`.
    static func fchmod(_ descriptor: Int32, _ mode: mode_t) throws(Errno) { try check { Glibc.fchmod(descriptor, mode) } }

    /// The corresponding C function is `rename`.
    static func rename(_ from: String, _ to: String) throws(Errno) { try check { Glibc.rename(from, to) } }

    /// A second name for a file. The corresponding C function is `link`.
    static func link(_ existing: String, _ new: String) throws(Errno) { try check { Glibc.link(existing, new) } }

    /// The corresponding C function is `unlink`.
    static func unlink(_ path: String) { _ = Glibc.unlink(path) }

    /// Tries once to take an exclusive lock; `false` when another holds it.
    /// The corresponding C function is `flock`.
    static func tryLockExclusive(_ descriptor: Int32) throws(Errno) -> Bool {
        do {
            try check { flock(descriptor, LOCK_EX | LOCK_NB) }
            return true
        } catch .resourceTemporarilyUnavailable {  // EWOULDBLOCK
            return false
        }
    }

    /// Sleeps for a short back-off while waiting for a lock.
    static func pause(milliseconds: Int) { usleep(useconds_t(milliseconds * 1000)) }

    /// A new private (0700) directory from a template ending in `XXXXXX`.
    /// The corresponding C function is `mkdtemp`.
    package static func makeTemporaryDirectory(_ template: String) throws(Errno) -> String {
        var bytes = Array(template.utf8CString)
        // mkdtemp fills in the template where it stands, and answers NULL and errno on failure.
        try check { bytes.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) == nil ? -1 : 0 } }
        return bytes.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// The effective user id. The corresponding C function is `geteuid`.
    static var effectiveUserID: uid_t { geteuid() }

    /// Cryptographically random bytes: Swift's system generator reads `getrandom(2)` on Linux.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// Where the symbolic link at `path` points; `nil` when it cannot be read.
    /// The corresponding C function is `readlink`.
    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Monotonic time in seconds, for deadlines. The corresponding C function is `clock_gettime`.
    static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Microseconds since the Unix epoch. The corresponding C function is `clock_gettime`.
    static func wallClockMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }
}

extension Errno {
    /// The error's text, as `strerror` gives it.
    var message: String { description }

    /// Nothing is at the path.
    var isNotFound: Bool { self == .noSuchFileOrDirectory }

    /// The last component was a symbolic link where `O_NOFOLLOW` forbids one.
    var isSymbolicLink: Bool { self == .tooManySymbolicLinkLevels }
}
