import ArgumentParser
import AuthController
#if canImport(Glibc)
import Glibc
#endif

/// `authctl`: sign in and out of a service, with the password hash in the desktop keyring.
@main
struct Authctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authctl",
        abstract: "Sign in and out on the Linux desktop, with password hashes in the Secret Service.",
        discussion: """
            Exit status: 0 success, 1 signed out or nobody signed in, 64 usage, 65 bad input, \
            69 keyring or bus unavailable, 74 settings I/O, 75 timed out, 77 wrong password, \
            78 settings corrupt or unsafe.
            """,
        version: "0.1.0",
        subcommands: [SignIn.self, SignOut.self, Status.self, WhoAmI.self, Verify.self, Accounts.self, Forget.self, Watch.self, Sandbox.self, DoctorCommand.self]
    )

    @OptionGroup var global: GlobalOptions

    /// The position of the first argument whose bytes are not UTF-8. Swift's `CommandLine`
    /// would quietly turn them into U+FFFD, and an account id must be data as typed.
    static func firstNonUTF8Argument() -> Int? {
        for position in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[position] else { continue }
            let bytes = UnsafeRawBufferPointer(start: argument, count: strlen(argument))
            if String(validating: bytes, as: UTF8.self) == nil { return position }
        }
        return nil
    }

    /// Parses, runs, and maps every failure to one line on stderr and its exit status.
    static func main() async {
        if let position = firstNonUTF8Argument() {
            Output.fail(.invalidInput("argument \(position) is not valid UTF-8; account ids, names and services must be"))
        }
        do {
            var command = try parseAsRoot()
            if var asynchronous = command as? AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
            Glibc.exit(0)
        } catch let error as AuthError {
            Output.fail(error)
        } catch let error as ExitCode {
            Glibc.exit(error.rawValue)
        } catch {
            // Help and version requests arrive as errors too; they are not failures.
            if exitCode(for: error) == .success {
                Output.help(fullMessage(for: error))
                Glibc.exit(0)
            }
            let message = self.message(for: error)
            Output.diagnostic((message.isEmpty ? "invalid usage" : message) + " (see `authctl --help`)")
            Glibc.exit(64)
        }
    }
}
