// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
import Synchronization
import SystemPackage

/// Every exit status of `authctl`, each named once; the manual lists them under EXIT STATUS
/// (`authctl(1)`). A library error's status is its ``AuthError/exitCode``.
enum ExitStatus {
    /// Done.
    static let success: Int32 = 0
    /// Signed out, or nobody signed in: a clean "no" (and a `watch --count` that saw too few events).
    static let no: Int32 = 1
    /// A resource the command needs is unavailable (the keyring, the bus, file descriptors):
    /// the status of that family.
    static let unavailable = AuthError.unavailable("").exitCode
    /// Standard output could not be written: the status of the I/O family.
    static let outputFailed = AuthError.settingsIO("").exitCode
    /// `sandbox`: the command was found but cannot be executed (as a shell says it).
    static let commandNotExecutable: Int32 = 126
    /// `sandbox`: the command was not found (as a shell says it).
    static let commandNotFound: Int32 = 127

    /// Ends the process with `status`.
    static func exit(_ status: Int32) -> Never {
        ProcessEnvironment.exit(status)
    }
}

/// The one place that writes to stdout and stderr and turns errors into exit statuses.
enum Output {
    /// Standard output could not be written: ``ExitStatus/outputFailed``, except that `watch`
    /// ends quietly with success when its reader went away (see `authctl.watch(1)`).
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

    /// Lines on stdout written byte for byte, each ended by a line break: a protocol's answer
    /// (git's credential helper), whose caller checked that no line holds a line break.
    static func verbatim(_ lines: [String]) throws(WriteFailure) {
        try write(.standardOutput, lines.map { $0 + "\n" }.joined())
    }

    /// Help or version text: several lines, written as they are.
    static func help(_ text: String) throws(WriteFailure) {
        try write(.standardOutput, text + "\n")
    }

    /// A `--json` document on one line of stdout. Every JSON output goes through here, with
    /// one encoder (keys in the order the manual lists them, absent values `null`, control
    /// characters escaped).
    static func json(_ document: some Encodable) throws(WriteFailure) {
        let text: String
        do {
            text = try JSONLineEncoder().encode(document)
        } catch {
            preconditionFailure("Output.json: \(type(of: document)) cannot be encoded: \(error)")
        }
        try write(.standardOutput, text + "\n")
    }

    /// A password prompt on stderr, without a line break. Control characters are escaped: the
    /// prompt names an account.
    static func prompt(_ text: String) {
        try? write(.standardError, escapingControlCharacters(text))
    }

    /// The line break that ends a prompt once its hidden answer is in: the terminal does not
    /// echo the Enter the person typed, so the next text would go on the prompt's line.
    static func endPrompt() {
        try? write(.standardError, "\n")
    }

    /// Lines on stderr for the person at the terminal (what to open, which code to enter), as
    /// they are: no `authctl: ` prefix. The caller has stripped provider text of control
    /// characters.
    static func personal(_ lines: [String]) throws(WriteFailure) {
        try write(.standardError, lines.map { $0 + "\n" }.joined())
    }

    /// A one-line diagnostic on stderr: `authctl: TEXT`. Control characters are escaped so
    /// that no input can break the line. If stderr cannot be written either, there is nobody
    /// left to tell.
    static func diagnostic(_ text: String) {
        try? write(.standardError, "authctl: " + escapingControlCharacters(text) + "\n")
    }

    /// Prints the error, its hints worded as commands and options, and exits with its status.
    static func fail(_ error: AuthError) -> Never {
        diagnostic(words(error.explanation))
        if let detail = error.detail, ProcessEnvironment.value("AUTHCTL_DEBUG") != nil { diagnostic("detail: \(detail)") }
        ExitStatus.exit(error.exitCode)
    }

    /// Reports that stdout could not be written and exits with ``ExitStatus/outputFailed``.
    static func fail(_ failure: WriteFailure) -> Never {
        diagnostic("cannot write to standard output: \(failure.errno.description)")
        ExitStatus.exit(ExitStatus.outputFailed)
    }

    /// A library message as the command line says it: each hint as the command or option that
    /// does it.
    static func words(_ message: AuthError.Message) -> String {
        message.worded(hints: words)
    }

    /// A hint of the library as the command or option of `authctl` that does it.
    static func words(_ hint: AuthError.Hint) -> String {
        switch hint {
        case .signOutFirst: "sign out first (`authctl sign-out`)"
        case .forget(let account): "clear it with `authctl forget \(account)`"
        case .forgetFirst(let accounts): "run " + accounts.map { "`authctl forget \($0)`" }.joined(separator: ", ") + " first"
        case .bindServer: "bind it with `authctl server set URL`"
        case .bindRegistrationServer: " (`authctl server set URL --protocol json`)"
        case .registration: "--register"
        case .signInWithoutRegistering: "sign in without --register"
        case .allowUnlockPrompt: "run in a desktop session without --no-prompt"
        case .raiseKeyringTimeout: "raise --keyring-timeout"
        case .raiseServerTimeout: "raise --server-timeout"
        case .sandbox: "in `authctl sandbox`"
        case .loginService: "`authctl serve`"
        case .replaceLoginService: "take the name over with `authctl serve --replace`"
        case .eventCommand: "--exec"
        case .signOutToReplaceSettings: "run `authctl sign-out` to replace it"
        case .signInOrOutToReplaceSettings: "`authctl sign-in` or `authctl sign-out` replaces it"
        case .clientID: "--client-id ID"
        case .openIDOptions: "--account-claim, --device-authorization-url and --redirect-port"
        case .signInAgain: "run `authctl sign-in` again"
        case .raiseSignInTimeout: "raise --timeout"
        case .presentAccessToken: "add --access-token"
        case .signIn(let service): "run `authctl --service \(service) sign-in`"
        }
    }

    /// Prints warnings of a change on stderr.
    static func warnings(_ outcome: ChangeOutcome) {
        for warning in outcome.warnings { diagnostic(words(warning)) }
    }

    /// Writes every byte at once, without buffering, so lines appear in order across both
    /// streams. SIGPIPE is ignored (see `Authctl.main`), so a closed pipe is `EPIPE` here.
    private static func write(_ descriptor: FileDescriptor, _ text: String) throws(WriteFailure) {
        if descriptor == .standardOutput && standardOutputClosed.load(ordering: .relaxed) { throw WriteFailure(errno: .badFileDescriptor) }
        // `write` until all is out, rather than swift-system's `writeAll` (README, Performance, the
        // start-up rules).
        var text = text
        do {
            try text.withUTF8 { bytes in
                var remaining = UnsafeRawBufferPointer(bytes)
                while !remaining.isEmpty {
                    let written = try descriptor.write(remaining)
                    remaining = UnsafeRawBufferPointer(rebasing: remaining[written...])
                }
            }
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
