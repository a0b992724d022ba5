import ArgumentParser
import AuthController
import Foundation

struct Sandbox: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a command in a throwaway desktop session: a private bus and an unlocked keyring.",
        discussion: """
            The command sees DBUS_SESSION_BUS_ADDRESS, XDG_CONFIG_HOME, XDG_DATA_HOME and \
            XDG_RUNTIME_DIR of a new temporary directory; your real keyring and settings are never \
            touched. Afterwards the daemons are stopped and the directory removed.
            Exit status: the command's; 69 if dbus-daemon or gnome-keyring-daemon is missing or \
            does not come up within 5 s.
            """
    )

    @Flag(help: "Keep the temporary directory (its path is printed on stderr).")
    var keep = false

    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments.")
    var command: [String] = []

    func validate() throws {
        if command.first == "--" { return }
        guard !command.isEmpty else { throw ValidationError("missing the command to run, e.g. `authctl sandbox -- sh`") }
    }

    func run() throws {
        let arguments = command.first == "--" ? Array(command.dropFirst()) : command
        guard let program = arguments.first else {
            throw AuthError.usage("missing the command to run, e.g. `authctl sandbox -- sh`")
        }
        let sandbox = try DesktopSandbox()
        defer {
            sandbox.stop(keepingDirectory: keep)
            if keep { Output.diagnostic("kept the sandbox directory \(sandbox.directory)") }
        }
        let status = try sandbox.run(program, arguments: Array(arguments.dropFirst()))
        sandbox.stop(keepingDirectory: keep)
        if keep { Output.diagnostic("kept the sandbox directory \(sandbox.directory)") }
        throw ExitCode(status)
    }
}
