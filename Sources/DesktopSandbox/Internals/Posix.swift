internal import Glibc

/// The few system calls the sandbox needs that neither swift-system nor swift-subprocess
/// offers. Each is a thin adapter; the "-1 and errno" convention becomes ``Posix/Failure``.
enum Posix {
    struct Failure: Error, Sendable {
        let call: String
        let errno: Int32
        var message: String { String(cString: strerror(errno)) }
    }

    /// A new private (0700) directory from a template ending in `XXXXXX`.
    /// The corresponding C function is `mkdtemp`.
    static func makeTemporaryDirectory(_ template: String) throws(Failure) -> String {
        var bytes = Array(template.utf8CString)
        guard let result = bytes.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(call: "mkdtemp", errno: errno)
        }
        return String(cString: result)
    }

    /// The corresponding C function is `mkdir`.
    static func makeDirectory(_ path: String, mode: UInt32) throws(Failure) {
        if mkdir(path, mode_t(mode)) == -1 { throw Failure(call: "mkdir", errno: errno) }
    }

    /// What is at `path`, as a shell sees it before running it.
    enum Entry: Equatable {
        case missing
        case directory
        case notExecutable
        case executable
    }

    /// The corresponding C functions are `stat` and `access` (`X_OK`: as root, any execute bit).
    static func entry(at path: String) -> Entry {
        var info = stat()
        guard stat(path, &info) == 0 else { return .missing }
        if info.st_mode & S_IFMT == S_IFDIR { return .directory }
        return access(path, X_OK) == 0 ? .executable : .notExecutable
    }

    /// The signals `authctl sandbox` passes on to its command.
    static let forwardedSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    /// Sets `signals` to be ignored (so that a Dispatch signal source alone sees them), and
    /// SIGPIPE too (a write to a supervisor that died must be an error, not the end of this
    /// process). Children are unaffected: swift-subprocess resets every disposition in them.
    /// The corresponding C function is `signal`.
    static func ignore(_ signals: [Int32]) {
        for number in signals + [SIGPIPE] { _ = signal(number, SIG_IGN) }
    }

    /// Puts `signals` back to their default action. The corresponding C function is `signal`.
    static func restoreDefault(_ signals: [Int32]) {
        for number in signals { _ = signal(number, SIG_DFL) }
    }

    /// The longest path a Unix socket address can hold (`sun_path` less its final NUL).
    static var maximumSocketPathLength: Int {
        MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1
    }
}
