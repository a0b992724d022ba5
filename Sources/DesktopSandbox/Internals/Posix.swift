// SPDX-License-Identifier: Apache-2.0
internal import AuthControllerCore
internal import Glibc

/// The few system calls the sandbox needs beyond the package's adapters (its temporary
/// directory and folders come from there, their failures as swift-system's `Errno`). None of
/// these fails with an errno worth reporting.
extension Posix {
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
