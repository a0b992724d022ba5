import AuthControllerCore
import Synchronization
import SystemPackage

/// The one place that writes to stdout and stderr and turns errors into exit statuses.
enum Output {
    /// Standard output could not be written: exit 74 (SPEC §7.10), except that `watch` ends
    /// quietly with 0 when its reader went away (§7.9).
    struct WriteFailure: Error, Sendable {
        let errno: Errno
        /// The reading end of the pipe was closed (`authctl watch | head -n 1`).
        var readerGone: Bool { errno == .brokenPipe }
    }

    /// Set at start-up when standard output was closed: every write to it then fails with
    /// `EBADF` (74), as it would have, instead of vanishing into the `/dev/null` put there.
    private static let standardOutputClosed = Atomic<Bool>(false)

    /// Called at start-up when standard output was found closed.
    static func markStandardOutputClosed() { standardOutputClosed.store(true, ordering: .relaxed) }

    /// A line meant for people on stdout, written at once. Control characters (which no valid
    /// account id or name holds, but a message from GLib or a spoofed signal may) are escaped,
    /// so one line stays one line.
    static func line(_ text: String) throws(WriteFailure) {
        try write(.standardOutput, escapingControlCharacters(text) + "\n")
    }

    /// Help or version text: several lines, written as they are.
    static func help(_ text: String) throws(WriteFailure) {
        try write(.standardOutput, text + "\n")
    }

    /// A `--json` document on one line of stdout. Every JSON output goes through here, with
    /// one encoder (keys in SPEC order, absent values `null`, control characters escaped).
    static func json(_ document: some Encodable) throws(WriteFailure) {
        let text: String
        do {
            text = try JSONLineEncoder().encode(document)
        } catch {
            preconditionFailure("Output.json: \(type(of: document)) cannot be encoded: \(error)")
        }
        try write(.standardOutput, text + "\n")
    }

    /// A password prompt on stderr, without a line break.
    static func prompt(_ text: String) {
        try? write(.standardError, escapingControlCharacters(text))
    }

    /// A one-line diagnostic on stderr: `authctl: TEXT`. Control characters are escaped so
    /// that no input can break the line. If stderr cannot be written either, there is nobody
    /// left to tell.
    static func diagnostic(_ text: String) {
        try? write(.standardError, "authctl: " + escapingControlCharacters(text) + "\n")
    }

    /// Prints the error and exits with its status.
    static func fail(_ error: AuthError) -> Never {
        diagnostic(error.message)
        if let detail = error.detail, ProcessEnvironment.value("AUTHCTL_DEBUG") != nil { diagnostic("detail: \(detail)") }
        ProcessEnvironment.exit(error.exitCode)
    }

    /// Reports that stdout could not be written and exits 74.
    static func fail(_ failure: WriteFailure) -> Never {
        diagnostic("cannot write to standard output: \(failure.errno.description)")
        ProcessEnvironment.exit(74)
    }

    /// Prints warnings of a change on stderr.
    static func warnings(_ outcome: ChangeOutcome) {
        for warning in outcome.warnings { diagnostic(warning) }
    }

    /// Writes every byte at once, without buffering, so lines appear in order across both
    /// streams. SIGPIPE is ignored (see `Authctl.main`), so a closed pipe is `EPIPE` here.
    private static func write(_ descriptor: FileDescriptor, _ text: String) throws(WriteFailure) {
        if descriptor == .standardOutput && standardOutputClosed.load(ordering: .relaxed) { throw WriteFailure(errno: .badFileDescriptor) }
        do {
            _ = try descriptor.writeAll(text.utf8)
        } catch let errno as Errno {
            throw WriteFailure(errno: errno)
        } catch {
            throw WriteFailure(errno: .ioError)
        }
    }

    static func escapingControlCharacters(_ text: String) -> String {
        text.controlCharactersEscaped
    }
}
