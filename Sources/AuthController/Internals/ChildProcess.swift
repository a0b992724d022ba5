#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A child process started with `posix_spawn`. Unlike Foundation's `Process`, the child gets
/// an empty signal mask and default handlers: a process started from a thread that blocks
/// SIGTERM (every Dispatch worker does) would otherwise ignore being asked to stop.
final class ChildProcess: @unchecked Sendable {
    let processID: pid_t
    private var exitStatus: Int32?
    private let lock = NSLock()

    /// Starts `path`. `standardInput`/`standardOutput`/`standardError` are descriptors to
    /// hand to the child; `nil` means `/dev/null`. With `ownProcessGroup` the child leads a new
    /// process group, so a terminal's Ctrl-C does not reach it.
    /// The corresponding C function is `posix_spawn`.
    init(_ path: String, arguments: [String], environment: [String: String], standardInput: Int32? = nil,
         standardOutput: Int32? = nil, standardError: Int32? = nil, ownProcessGroup: Bool = false) throws(Posix.Failure) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (source, target) in [(standardInput, STDIN_FILENO), (standardOutput, STDOUT_FILENO), (standardError, STDERR_FILENO)] {
            if let source {
                posix_spawn_file_actions_adddup2(&actions, source, target)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
            }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signalNumber in [SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT] { sigaddset(&defaults, signalNumber) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if ownProcessGroup {
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard result == 0 else { throw Posix.Failure(call: "posix_spawn", errno: result) }
        processID = pid
    }

    /// Whether the child has not exited yet (reaping it if it has).
    var isRunning: Bool { poll() == nil }

    /// Sends `signal` unless the child has been reaped. It never reaps, so it may run on
    /// another thread while ``wait()`` blocks: until then the process id cannot be reused.
    /// The corresponding C function is `kill`.
    func send(_ signal: Int32) {
        lock.withLock { if exitStatus == nil { kill(processID, signal) } }
    }

    /// Waits for the child to end. Returns its exit status, or 128 + the signal that ended it.
    /// The corresponding C function is `waitpid`.
    @discardableResult
    func wait() -> Int32 {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        while waitpid(processID, &status, 0) == -1 {
            guard errno == EINTR else { return 128 }
        }
        return record(status)
    }

    /// Asks the child to stop (SIGTERM, after SIGCONT in case it is stopped), and kills it if
    /// it has not ended after `grace` seconds.
    func terminate(grace: Double = 2) {
        guard isRunning else { return }
        kill(processID, SIGCONT)
        kill(processID, SIGTERM)
        let giveUp = Posix.monotonicSeconds() + grace
        while isRunning {
            if Posix.monotonicSeconds() > giveUp {
                kill(processID, SIGKILL)
                wait()
                return
            }
            Posix.pause(milliseconds: 2)
        }
    }

    private func poll() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        let result = waitpid(processID, &status, WNOHANG)
        if result == processID { return record(status) }
        if result == -1 && errno == ECHILD {
            exitStatus = 128
            return exitStatus
        }
        return nil
    }

    private func record(_ status: Int32) -> Int32 {
        let signal = status & 0x7F
        let code = signal == 0 ? (status >> 8) & 0xFF : 128 + signal
        lock.withLock { exitStatus = code }
        return code
    }
}

extension Posix {
    /// A pipe's read and write ends, both close-on-exec (a spawned child gets only what it is
    /// handed). The corresponding C functions are `pipe` and `fcntl`.
    static func pipe() throws(Failure) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [0, 0]
        guard Glibc.pipe(&ends) == 0 else { throw Failure(call: "pipe", errno: errno) }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return (ends[0], ends[1])
    }
}
