// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
internal import Glibc
#endif
package import SystemPackage
import Dispatch

extension FileDescriptor {
    /// Suspends until nobody can read what is written to this descriptor any more: the reading
    /// end of its pipe or socket is closed, or its terminal hung up. For a file (or
    /// `/dev/null`) that never happens. Returns at once when the task is cancelled.
    ///
    /// A long-running writer that writes only now and then (`authctl watch | head -n 1`)
    /// learns this way that its reader is gone without waiting for its next write.
    /// The corresponding C function is `poll`, asking for no event: `POLLERR` (a pipe without
    /// readers) and `POLLHUP` are reported anyway.
    package func readerGone() async {
        guard let wake = try? FileDescriptor.pipe() else { return }
        defer {
            try? wake.writeEnd.close()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // poll blocks its thread: a queue of its own, off the cooperative pool.
                DispatchQueue(label: "io.github.authctl.reader-gone").async {
                    Self.waitForHangUp(self.rawValue, wake: wake.readEnd.rawValue)
                    try? wake.readEnd.close()
                    continuation.resume()
                }
            }
        } onCancel: {
            _ = try? wake.writeEnd.writeAll([0])
        }
    }

    private static func waitForHangUp(_ descriptor: Int32, wake: Int32) {
        var watched = [pollfd(fd: descriptor, events: 0, revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        while true {
            do {
                try Posix.check { poll(&watched, nfds_t(watched.count), -1) }
            } catch {
                return
            }
            if watched[1].revents != 0 { return }
            let events = watched[0].revents
            if events & Int16(POLLERR | POLLHUP) != 0 { return }
            // Not an open descriptor: nothing can hang up; wait for cancellation alone.
            if events & Int16(POLLNVAL) != 0 { watched[0].fd = -1 }
        }
    }
}
