// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
internal import Glibc
#endif
import Dispatch
import Synchronization

/// A signal that can be sent to this process.
package struct ProcessSignal: RawRepresentable, Hashable, Sendable {
    /// The signal number.
    package let rawValue: Int32

    /// The signal with number `rawValue` (a `SIG…` constant of the C library).
    package init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// `SIGINT`: Ctrl-C at the terminal.
    package static let interrupt = ProcessSignal(rawValue: SIGINT)
    /// `SIGTERM`: a polite request to stop (`kill`, systemd).
    package static let terminate = ProcessSignal(rawValue: SIGTERM)
    /// `SIGHUP`: the terminal went away.
    package static let hangUp = ProcessSignal(rawValue: SIGHUP)
    /// `SIGPIPE`: a write to a pipe nobody reads.
    package static let brokenPipe = ProcessSignal(rawValue: SIGPIPE)

    /// Makes the signal harmless to this process: a write to a closed pipe then fails with
    /// `EPIPE` instead of killing the process, so the caller decides what it means.
    /// Child processes inherit the disposition unless their launcher resets it.
    /// The corresponding C function is `signal` with `SIG_IGN`.
    package func ignore() {
        _ = signal(rawValue, SIG_IGN)
    }

    /// Ends this process as the signal's default action would, so that its parent sees it
    /// killed by the signal (a shell then stops a script on Ctrl-C, as it should): restores the
    /// default action, unblocks the signal and sends it to this process. Returns only if that
    /// default action does not end a process.
    /// The corresponding C functions are `signal` with `SIG_DFL`, `pthread_sigmask` and `raise`.
    package func raiseWithDefaultAction() {
        _ = signal(rawValue, SIG_DFL)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        sigaddset(&unblocked, rawValue)
        pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
        raise(rawValue)
    }

    /// The deliveries of `signals` from now on, in order. While the stream exists the signals
    /// no longer end the process; they only arrive here. Ending the iteration (or cancelling
    /// the task that iterates) stops listening, but the signals stay ignored.
    package static func deliveries(of signals: [ProcessSignal]) -> AsyncStream<ProcessSignal> {
        let (stream, continuation) = AsyncStream<ProcessSignal>.makeStream()
        let sources = signals.map { signal in
            // Dispatch sees the signal only once its default action (ending the process) is off.
            signal.ignore()
            let source = DispatchSource.makeSignalSource(signal: signal.rawValue, queue: .global())
            source.setEventHandler { continuation.yield(signal) }
            source.resume()
            return source
        }
        let listening = SignalSources(sources)
        continuation.onTermination = { _ in listening.cancel() }
        return stream
    }
}

/// The dispatch sources of one ``ProcessSignal/deliveries(of:)`` stream, cancelled once.
private final class SignalSources: Sendable {
    private let sources: Mutex<[any DispatchSourceSignal]>

    init(_ sources: sending [any DispatchSourceSignal]) {
        self.sources = Mutex(sources)
    }

    func cancel() {
        sources.withLock { sources in
            for source in sources { source.cancel() }
            sources = []
        }
    }
}
