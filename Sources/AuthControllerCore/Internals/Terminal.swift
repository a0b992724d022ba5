// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
internal import Glibc
#endif
package import SystemPackage
import Synchronization

/// The terminal on a file descriptor, for reading a password with echo off.
/// Plumbing of this package's command line (`package`), not part of the library's API.
///
/// However the read ends — Enter, end of file, or SIGINT, SIGQUIT (Ctrl-\), SIGTERM or SIGHUP —
/// the terminal's settings are put back before the process goes on or dies.
package struct Terminal: Sendable {
    /// The descriptor the terminal is open on.
    package let descriptor: FileDescriptor

    /// The terminal on standard input.
    package static let standardInput = Terminal(descriptor: .standardInput)

    package init(descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    /// Whether the descriptor refers to a terminal. The corresponding C function is `isatty`.
    package var isTerminal: Bool { isatty(descriptor.rawValue) == 1 }

    /// Whether this process is in the terminal's foreground process group: a read from the
    /// terminal in the background (`authctl sign-in &`) would stop the process with SIGTTIN.
    /// The corresponding C functions are `tcgetpgrp` and `getpgrp`.
    package var isForeground: Bool { tcgetpgrp(descriptor.rawValue) == getpgrp() }

    /// Runs `body` with the terminal's echo off (and line editing on), then restores the
    /// terminal's settings. Returns `nil`, without running `body`, when the settings cannot be
    /// read (the descriptor is not a terminal). Blocks only as long as `body` does.
    ///
    /// While `body` runs, SIGINT, SIGQUIT, SIGTERM and SIGHUP (unless ignored) restore the
    /// settings and then kill the process as the signal would have. SIGQUIT is taken from the
    /// Swift runtime's backtracer for that time: Ctrl-\ at a prompt is a person quitting, not a
    /// crash to report. One prompt at a time: calling this again from `body` or from another
    /// thread is a programmer error and traps.
    /// The corresponding C functions are `tcgetattr`, `tcsetattr` and `signal`.
    package func withEchoDisabled<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result? {
        var saved = termios()
        guard tcgetattr(descriptor.rawValue, &saved) == 0 else { return nil }
        EchoGuard.arm(saved, descriptor: descriptor.rawValue)
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        silent.c_lflag |= tcflag_t(ICANON)
        _ = tcsetattr(descriptor.rawValue, TCSAFLUSH, &silent)
        defer {
            _ = tcsetattr(descriptor.rawValue, TCSAFLUSH, &saved)
            EchoGuard.disarm()
        }
        return try body()
    }
}

/// The state a signal handler needs to put a terminal back. A signal handler may run on any
/// thread at any instruction, so it reads only atomics and a block of memory that is written
/// before the atomics publish it and is never freed: no lock, no allocation, no Swift runtime
/// call beyond the (already initialised) static lets.
private enum EchoGuard {
    /// The settings to restore; allocated once and never freed, so a late handler never
    /// reads freed memory.
    static let savedSettings = UnsafeMutablePointer<termios>.allocate(capacity: 1).sendableAddress
    /// The terminal's descriptor while a prompt is armed, else -1.
    static let armedDescriptor = Atomic<Int32>(-1)
    static let signals: [Int32] = [SIGINT, SIGQUIT, SIGTERM, SIGHUP]
    /// The dispositions to put back after the prompt, in the order of ``signals``, as addresses
    /// (a C function pointer is not `Sendable`). Handlers never read it.
    static let previousHandlers = Mutex<[Int]>([])

    static func arm(_ settings: termios, descriptor: Int32) {
        UnsafeMutablePointer<termios>(bitPattern: savedSettings)!.pointee = settings
        guard armedDescriptor.compareExchange(expected: -1, desired: descriptor, ordering: .sequentiallyConsistent).exchanged else {
            preconditionFailure("Terminal.withEchoDisabled: a prompt is already open")
        }
        let ignore = unsafeBitCast(SIG_IGN, to: Int.self)
        let previous = signals.map { number in
            let previous = signal(number, restoreAndDie)
            let address = previous.map { unsafeBitCast($0, to: Int.self) } ?? 0
            // An ignored signal (`nohup`) stays ignored: it cannot end the prompt.
            if address == ignore { _ = signal(number, previous) }
            return address
        }
        previousHandlers.withLock { $0 = previous }
    }

    static func disarm() {
        let previous = previousHandlers.withLock { $0 }
        for (number, address) in zip(signals, previous) {
            _ = signal(number, unsafeBitCast(address, to: sighandler_t?.self))
        }
        armedDescriptor.store(-1, ordering: .sequentiallyConsistent)
    }
}

/// Puts the terminal back, then lets the signal do what it does by default. The signal is
/// blocked while its handler runs, so `raise` delivers it the moment the handler returns.
/// `tcsetattr`, `signal` and `raise` are async-signal-safe.
private func restoreAndDie(_ number: Int32) {
    let descriptor = EchoGuard.armedDescriptor.load(ordering: .sequentiallyConsistent)
    if descriptor >= 0, let settings = UnsafePointer<termios>(bitPattern: EchoGuard.savedSettings) {
        _ = tcsetattr(descriptor, TCSANOW, settings)
    }
    _ = signal(number, SIG_DFL)
    _ = raise(number)
}

extension UnsafeMutablePointer {
    /// The address as an integer, which (unlike the pointer) may be shared across threads.
    fileprivate var sendableAddress: Int { Int(bitPattern: self) }
}
