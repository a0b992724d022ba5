// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore
import DesktopSandbox

struct Sandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sandbox",
        abstract: "Run a command in a throwaway desktop session: a private bus and an unlocked keyring.",
        discussion: """
            The command sees DBUS_SESSION_BUS_ADDRESS, XDG_CONFIG_HOME, XDG_DATA_HOME and \
            XDG_RUNTIME_DIR of a new temporary directory; your real keyring and settings are never \
            touched. Afterwards the daemons are stopped and the directory removed.
            Exit status: the command's (127 if it is not found, 126 if it cannot be executed); \
            69 if dbus-daemon or gnome-keyring-daemon is missing or does not come up within 5 s.
            """
    )

    @Flag(help: "Keep the temporary directory (its path is printed on stderr).")
    var keep = false

    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments; `--` before it is optional.")
    var words: [String] = []

    /// `--keep` and the global options may stand before the command; everything from the
    /// command on is its own, options included.
    private func split() throws -> (keep: Bool, command: [String]) {
        var keep = self.keep
        var index = words.startIndex
        while index < words.endIndex {
            let word = words[index]
            switch word {
            case "--":
                return (keep, Array(words[(index + 1)...]))
            case "--keep":
                keep = true
            case "--no-prompt":
                break  // the sandbox never prompts: its keyring is unlocked
            case "--service", "--keyring-timeout", "--server-timeout":
                index += 1
                guard index < words.endIndex else { throw ValidationError("missing value for '\(word)'") }
            case "-h", "--help":
                throw CleanExit.helpRequest(Sandbox.self)
            case _ where word.hasPrefix("--service=") || word.hasPrefix("--keyring-timeout=") || word.hasPrefix("--server-timeout="):
                break
            case _ where word.hasPrefix("-"):
                throw ValidationError("unknown option '\(word)' before the command; put `--` before a command that starts with '-'")
            default:
                return (keep, Array(words[index...]))
            }
            index += 1
        }
        return (keep, [])
    }

    func validate() throws {
        guard try !split().command.isEmpty else {
            throw ValidationError("missing the command to run, e.g. `authctl sandbox -- sh`")
        }
    }

    func run() async throws {
        let (keep, arguments) = try split()
        let outcome = try await DesktopSandbox.run(arguments[0], arguments: Array(arguments.dropFirst()), keepingDirectory: keep,
                                                   temporaryDirectory: ProcessEnvironment.value("TMPDIR"), searchPath: ProcessEnvironment.value("PATH")) { directory in
            Output.diagnostic("kept the sandbox directory \(directory)")
        }
        switch outcome {
        case .finished(let status):
            throw ExitCode(status)
        case .commandNotFound:
            Output.diagnostic("\(arguments[0]): command not found")
            throw ExitCode(ExitStatus.commandNotFound)
        case .commandNotExecutable(let reason):
            Output.diagnostic("\(arguments[0]): cannot be executed: \(reason)")
            throw ExitCode(ExitStatus.commandNotExecutable)
        }
    }
}
