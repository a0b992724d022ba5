// SPDX-License-Identifier: Apache-2.0
internal import CGLib
import Dispatch
import Synchronization
#if canImport(Glibc)
internal import Glibc
#endif

/// Programs started and left to run by themselves: the person's browser.
package enum DetachedProcess {
    /// Starts `arguments[0]` (looked up in `PATH` when it has no `/`) with the other arguments,
    /// standard input from and output to `/dev/null`, and returns without waiting: GLib starts it
    /// through an intermediate child that exits at once, so it is never this process's zombie
    /// and outlives it. A program that cannot be started is an error message; how a started one
    /// ends is never known. The corresponding C function is `g_spawn_async`.
    package static func start(_ arguments: [String]) -> String? {
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        let flags = GSpawnFlags(rawValue: G_SPAWN_SEARCH_PATH.rawValue | G_SPAWN_STDOUT_TO_DEV_NULL.rawValue | G_SPAWN_STDERR_TO_DEV_NULL.rawValue)
        do throws(GLibError) {
            _ = try withGError { error in
                pointers.withUnsafeMutableBufferPointer { g_spawn_async(nil, $0.baseAddress, nil, flags, nil, nil, nil, error) }
            }
            return nil
        } catch {
            return error.message
        }
    }
}

extension DetachedProcess {
    /// How a program started by ``startWatched(_:within:)`` fared in the time watched.
    package enum Watched: Sendable, Equatable {
        /// It could not be started; GLib's message.
        case couldNotStart(String)
        /// It exited with this status within the time.
        case exited(Int32)
        /// A signal ended it within the time.
        case killed(signal: Int32)
        /// It was still running when the time was up (or the task was cancelled).
        case running
    }

    /// Starts `arguments[0]` as ``start(_:)`` does, but as a child of this process, and reports
    /// how it ended when it ends within `within`. A program still running then is left alone and
    /// reaped, on a thread of its own, whenever it ends: never this process's zombie.
    /// The corresponding C functions are `g_spawn_async` and `waitpid`.
    package static func startWatched(_ arguments: [String], within: Duration) async -> Watched {
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        let flags = GSpawnFlags(rawValue: G_SPAWN_SEARCH_PATH.rawValue | G_SPAWN_STDOUT_TO_DEV_NULL.rawValue
                                | G_SPAWN_STDERR_TO_DEV_NULL.rawValue | G_SPAWN_DO_NOT_REAP_CHILD.rawValue)
        var pid: GPid = 0
        do throws(GLibError) {
            _ = try withGError { error in
                pointers.withUnsafeMutableBufferPointer { g_spawn_async(nil, $0.baseAddress, nil, flags, nil, nil, &pid, error) }
            }
        } catch {
            return .couldNotStart(error.message)
        }
        let end = ProcessEnd()
        let child = pid
        DispatchQueue(label: "io.github.authctl.browser-watch").async {
            var status: Int32 = 0
            while waitpid(child, &status, 0) == -1 && errno == EINTR {}
            // The status word as <sys/wait.h> lays it out: the low 7 bits a signal, else the exit status.
            end.report(status & 0x7F == 0 ? .exited((status >> 8) & 0xFF) : .killed(signal: status & 0x7F))
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Watched, Never>) in
                end.await(continuation)
                DispatchQueue.global().asyncAfter(deadline: .now() + within.seconds) { end.report(.running) }
            }
        } onCancel: {
            end.report(.running)
        }
    }

    /// The first report of a watched program's end, handed to whoever waits for it.
    private final class ProcessEnd: Sendable {
        private let state = Mutex<(reported: Watched?, waiting: CheckedContinuation<Watched, Never>?)>((nil, nil))

        func report(_ watched: Watched) {
            let waiting = state.withLock { state -> CheckedContinuation<Watched, Never>? in
                guard state.reported == nil else { return nil }
                state.reported = watched
                defer { state.waiting = nil }
                return state.waiting
            }
            waiting?.resume(returning: watched)
        }

        func await(_ continuation: CheckedContinuation<Watched, Never>) {
            let ready = state.withLock { state -> Watched? in
                if let reported = state.reported { return reported }
                state.waiting = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
