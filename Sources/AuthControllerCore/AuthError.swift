/// Every failure the library reports. Each case is one exit-code family of the command line
/// (sysexits.h), so the mapping from error to exit status exists exactly once: ``exitCode``.
///
/// The message is one line that says what happened and what to do next. `detail`, where
/// present, keeps the underlying GLib error domain and code for bug reports.
public enum AuthError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Nobody is signed in to the service (exit 1): a clean "no", not a fault.
    case notSignedIn(String)
    /// The command line was wrong: unknown option, missing argument, no password source (exit 64).
    case usage(String)
    /// Input data broke a rule: account id, display name, service, password, or a stored
    /// secret that is not a usable authctl hash (exit 65).
    case invalidInput(String)
    /// The session bus, the Secret Service or its default collection is not there, the
    /// collection is locked and no prompt may be shown, a required daemon is missing, or the
    /// token server is unreachable or failing (exit 69).
    case unavailable(String, detail: String? = nil)
    /// The settings file or its directory cannot be read or written (exit 74).
    case settingsIO(String)
    /// A deadline passed (keyring call, prompt, settings lock, token server) or the Secret
    /// Service went away mid-call; nothing changed (exit 75).
    case temporaryFailure(String, detail: String? = nil)
    /// The token server's answer was not understood: not JSON, no access token, a token type
    /// other than Bearer, over 64 KiB, or a redirect (exit 76).
    case protocolError(String)
    /// Wrong password (locally or at the token server), the unlock prompt was dismissed, or the
    /// token server ended the session (exit 77).
    case denied(String)
    /// The settings file is corrupt or unsafe to use (exit 78).
    case settingsUnsafe(String)

    /// The process exit status for this error (sysexits.h).
    public var exitCode: Int32 {
        switch self {
        case .notSignedIn: 1
        case .usage: 64
        case .invalidInput: 65
        case .unavailable: 69
        case .settingsIO: 74
        case .temporaryFailure: 75
        case .protocolError: 76
        case .denied: 77
        case .settingsUnsafe: 78
        }
    }

    /// The one-line human message.
    public var message: String {
        switch self {
        case .notSignedIn(let message), .usage(let message), .invalidInput(let message),
             .unavailable(let message, _), .settingsIO(let message),
             .temporaryFailure(let message, _), .protocolError(let message), .denied(let message),
             .settingsUnsafe(let message):
            message
        }
    }

    /// The underlying GLib error (domain, code, text), when the failure came from GLib.
    public var detail: String? {
        switch self {
        case .unavailable(_, let detail), .temporaryFailure(_, let detail): detail
        default: nil
        }
    }

    public var description: String { message }
}

extension String {
    /// The text with every control character (U+0000–U+001F, U+007F–U+009F) written as
    /// `\u{…}`, so that no input can break a one-line message or a terminal.
    public var controlCharactersEscaped: String {
        var result = ""
        for scalar in unicodeScalars {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
