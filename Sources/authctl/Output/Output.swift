import AuthController
#if canImport(Glibc)
import Glibc
#endif

/// The one place that writes to stdout and stderr and turns errors into exit statuses.
enum Output {
    /// A line meant for people (or for `--json`, the document), on stdout, flushed at once.
    /// Control characters (which no valid account id or name holds, but a message from GLib or
    /// a spoofed signal may) are escaped, so one line stays one line.
    static func line(_ text: String) {
        write(STDOUT_FILENO, escapingControlCharacters(text) + "\n")
    }

    /// Help or version text: several lines, written as they are.
    static func help(_ text: String) {
        write(STDOUT_FILENO, text + "\n")
    }

    /// A one-line diagnostic on stderr: `authctl: TEXT`. Control characters are escaped so
    /// that no input can break the line.
    static func diagnostic(_ text: String) {
        write(STDERR_FILENO, "authctl: " + escapingControlCharacters(text) + "\n")
    }

    /// Prints the error and exits with its status.
    static func fail(_ error: AuthError) -> Never {
        diagnostic(error.message)
        if let detail = error.detail, environment("AUTHCTL_DEBUG") != nil { diagnostic("detail: \(detail)") }
        exit(error.exitCode)
    }

    /// Prints warnings of a change on stderr.
    static func warnings(_ outcome: ChangeOutcome) {
        for warning in outcome.warnings { diagnostic(warning) }
    }

    /// Prints a JSON document on one line.
    static func json(_ value: JSON) {
        line(value.serialized)
    }

    /// Writes to a descriptor without buffering, so lines appear in order across both streams.
    private static func write(_ descriptor: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if count <= 0 {
                if count == -1 && errno == EINTR { continue }
                return  // a closed pipe: nobody is reading
            }
            offset += count
        }
    }

    static func escapingControlCharacters(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

/// The value of an environment variable; `nil` when unset or empty.
func environment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    let text = String(cString: value)
    return text.isEmpty ? nil : text
}
