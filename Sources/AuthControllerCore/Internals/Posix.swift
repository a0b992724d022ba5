#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Thin adapters over the system calls the settings store needs. The "-1 and errno"
/// convention becomes ``Posix/Failure`` in exactly one helper, ``Posix/check(_:_:)``.
enum Posix {
    struct Failure: Error, Sendable {
        let call: String
        let errno: Int32
        var message: String { String(cString: strerror(errno)) }
        var isNotFound: Bool { errno == ENOENT }
        /// The last component was a symbolic link where `O_NOFOLLOW` forbids one.
        var isSymbolicLink: Bool { errno == ELOOP }
    }

    /// The one place where "-1 and errno" becomes a ``Failure``; a call interrupted by a signal
    /// (`EINTR`) is made again.
    @discardableResult
    private static func check<Result: BinaryInteger>(_ call: String, _ body: () -> Result) throws(Failure) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            if errno != EINTR { throw Failure(call: call, errno: errno) }
        }
    }

    struct FileStatus {
        let mode: mode_t
        let owner: uid_t
        var isRegularFile: Bool { mode & S_IFMT == S_IFREG }
        var isDirectory: Bool { mode & S_IFMT == S_IFDIR }
        var isSymbolicLink: Bool { mode & S_IFMT == S_IFLNK }
        var permissions: mode_t { mode & 0o7777 }
    }

    /// The corresponding C function is `lstat`; `nil` when nothing is at `path`.
    static func lstatus(_ path: String) throws(Failure) -> FileStatus? {
        var info = stat()
        if lstat(path, &info) == -1 {
            if errno == ENOENT { return nil }
            throw Failure(call: "lstat", errno: errno)
        }
        return FileStatus(mode: info.st_mode, owner: info.st_uid)
    }

    /// The corresponding C function is `fstat`.
    static func fstatus(_ descriptor: Int32) throws(Failure) -> FileStatus {
        var info = stat()
        try check("fstat") { fstat(descriptor, &info) }
        return FileStatus(mode: info.st_mode, owner: info.st_uid)
    }

    /// The corresponding C function is `mkdir`; an existing entry is not an error.
    static func makeDirectory(_ path: String, mode: mode_t) throws(Failure) {
        if mkdir(path, mode) == -1, errno != EEXIST { throw Failure(call: "mkdir", errno: errno) }
    }

    /// The corresponding C function is `open` (always with `O_CLOEXEC`).
    private static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(Failure) -> Int32 {
        try check("open") { Glibc.open(path, flags | O_CLOEXEC, mode) }
    }

    /// Opens a file to read, refusing a symbolic link (``Failure/isSymbolicLink``) and never
    /// blocking on a FIFO planted at the path.
    static func openForReading(_ path: String) throws(Failure) -> Int32 {
        try open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
    }

    /// Opens (creating, mode 0600) a lock file, refusing a symbolic link.
    static func openLockFile(_ path: String) throws(Failure) -> Int32 {
        try open(path, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o600)
    }

    /// Creates a new file to write, failing if anything (a link included) is at `path`.
    static func createExclusive(_ path: String, mode: mode_t) throws(Failure) -> Int32 {
        try open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: mode)
    }

    /// Makes a directory's entries durable (a rename in it, say). The corresponding C
    /// functions are `open(O_DIRECTORY)` and `fsync`.
    static func syncDirectory(_ path: String) throws(Failure) {
        let descriptor = try open(path, O_RDONLY | O_DIRECTORY)
        defer { close(descriptor) }
        try fsync(descriptor)
    }

    /// The corresponding C function is `close`.
    static func close(_ descriptor: Int32) { _ = Glibc.close(descriptor) }

    /// Reads the whole file. The corresponding C function is `read`.
    static func readAll(_ descriptor: Int32) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = try check("read") { chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) } }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
        }
    }

    /// Writes every byte. The corresponding C function is `write`.
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            offset += try check("write") { bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) } }
        }
    }

    /// The corresponding C function is `fsync`.
    static func fsync(_ descriptor: Int32) throws(Failure) { try check("fsync") { Glibc.fsync(descriptor) } }

    /// The corresponding C function is `fchmod`.
    static func fchmod(_ descriptor: Int32, _ mode: mode_t) throws(Failure) { try check("fchmod") { Glibc.fchmod(descriptor, mode) } }

    /// The corresponding C function is `rename`.
    static func rename(_ from: String, _ to: String) throws(Failure) { try check("rename") { Glibc.rename(from, to) } }

    /// A second name for a file. The corresponding C function is `link`.
    static func link(_ existing: String, _ new: String) throws(Failure) { try check("link") { Glibc.link(existing, new) } }

    /// The corresponding C function is `unlink`.
    static func unlink(_ path: String) { _ = Glibc.unlink(path) }

    /// Tries once to take an exclusive lock. The corresponding C function is `flock`.
    static func tryLockExclusive(_ descriptor: Int32) throws(Failure) -> Bool {
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return true }
        if errno == EWOULDBLOCK || errno == EINTR { return false }
        throw Failure(call: "flock", errno: errno)
    }

    /// Sleeps for a short back-off while waiting for a lock.
    static func pause(milliseconds: Int) { usleep(useconds_t(milliseconds * 1000)) }

    /// A new private directory from a template ending in `XXXXXX`.
    /// The corresponding C function is `mkdtemp`.
    static func makeTemporaryDirectory(_ template: String) throws(Failure) -> String {
        var bytes = Array(template.utf8CString)
        guard let result = bytes.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(call: "mkdtemp", errno: errno)
        }
        return String(cString: result)
    }

    /// Sends `signal` to a process. The corresponding C function is `kill`.
    static func signal(_ process: Int32, _ signal: Int32) { _ = kill(process, signal) }

    /// The effective user id. The corresponding C function is `geteuid`.
    static var effectiveUserID: uid_t { geteuid() }

    /// Cryptographically random bytes: Swift's system generator reads `getrandom(2)` on Linux.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// Overwrites memory with zeros in a way the compiler may not drop.
    /// The corresponding C function is `explicit_bzero`.
    static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        explicit_bzero(base, buffer.count)
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
