// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

/// `authctl`: sign in and out of a service, with the password hash in the desktop keyring.
@main
struct Authctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authctl",
        abstract: "Sign in and out on the Linux desktop, with password hashes in the Secret Service.",
        discussion: """
            Exit status: 0 success, 1 signed out or nobody signed in, 64 usage, 65 bad input, \
            69 keyring, bus or token server unavailable, 74 settings I/O, 75 timed out, \
            76 token server answer not understood, 77 wrong password or session ended, \
            78 settings corrupt or unsafe.
            """,
        version: AuthController.version,
        // Every command names itself (`commandName:`): README, Performance, the start-up rules.
        subcommands: [SignIn.self, SignOut.self, Status.self, WhoAmI.self, Verify.self, Accounts.self, Forget.self, Token.self, GitCredential.self,
                      KubeCredential.self, DockerCredential.self, AWSCredential.self, GCloudCredential.self,
                      Server.self, Watch.self, Serve.self, Sandbox.self, DoctorCommand.self]
    )

    @OptionGroup var global: GlobalOptions

    /// The position of the first argument whose bytes are not UTF-8. Swift's `CommandLine`
    /// would quietly turn them into U+FFFD, and an account id must be data as typed.
    static func firstNonUTF8Argument() -> Int? {
        for position in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[position] else { continue }
            if String(validatingCString: argument) == nil { return position }
        }
        return nil
    }

    /// The file descriptors a command must be able to open: `watch` takes about 15 (the bus
    /// connection, GLib's and libdispatch's wakeups and timers, the settings file, its lock and
    /// monitor), twice that leaves room for `serve`'s clients and for hooks' pipes.
    static let requiredFreeDescriptors = 32

    /// Parses, runs, and maps every failure to one line on stderr and its exit status.
    /// Commands that wait (`watch`) run asynchronously; the others synchronously.
    static func main() async {
        // Out of file descriptors or memory for its own needs, GLib would abort the process.
        GLibFatalErrors.exit(status: ExitStatus.unavailable, linePrefix: "authctl: ")
        if ProcessEnvironment.reopenClosedStandardDescriptors().standardOutputWasClosed {
            Output.markStandardOutputClosed()
        }
        // Out of file descriptors, libdispatch (timers, its worker-pool monitor) traps and GLib
        // aborts, wherever the command is; refused here, the command does not start at all.
        var free = ProcessEnvironment.freeDescriptors(upTo: requiredFreeDescriptors)
        // A soft limit below the hard one is the process's own to raise.
        if free < requiredFreeDescriptors && ProcessEnvironment.raiseDescriptorLimit(by: requiredFreeDescriptors - free) {
            free = ProcessEnvironment.freeDescriptors(upTo: requiredFreeDescriptors)
        }
        if free < requiredFreeDescriptors {
            Output.fail(.unavailable("only \(free) of the \(requiredFreeDescriptors) file descriptors a command needs can be opened; "
                                     + "raise the limit (`ulimit -n`) or close some"))
        }
        // A write to a closed pipe must fail with EPIPE, for the output layer to decide: a
        // failure with a message, or for `watch` a quiet end.
        ProcessSignal.brokenPipe.ignore()
        if let position = firstNonUTF8Argument() {
            Output.fail(.invalidInput("argument \(position) is not valid UTF-8; account ids, names and services must be"))
        }
        var arguments = Array(CommandLine.arguments.dropFirst())
        // Clients run the credential helper named in credHelpers as `docker-credential-NAME ACTION`.
        if CommandLine.arguments.first?.split(separator: "/").last == "docker-credential-authctl" {
            arguments.insert("docker-credential", at: 0)
        }
        do {
            switch FastPath.command(for: arguments) {
            case .synchronous(let command)?:
                try command()
                ExitStatus.exit(ExitStatus.success)
            case .asynchronous(let command)?:
                try await command()
                ExitStatus.exit(ExitStatus.success)
            case nil:
                break
            }
            var command = try parseAsRoot(arguments)
            if var asynchronous = command as? any AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
            ExitStatus.exit(ExitStatus.success)
        } catch let error as AuthError {
            Output.fail(error)
        } catch let failure as Output.WriteFailure {
            Output.fail(failure)
        } catch let error as ExitCode {
            ExitStatus.exit(error.rawValue)
        } catch {
            // Help and version requests arrive as errors too; they are not failures.
            if exitCode(for: error) == .success {
                do throws(Output.WriteFailure) {
                    try Output.help(fullMessage(for: error))
                } catch {
                    Output.fail(error)
                }
                ExitStatus.exit(ExitStatus.success)
            }
            let message = self.message(for: error)
            Output.fail(.usage("\(message.isEmpty ? "invalid usage" : message) (see `authctl --help`)"))
        }
    }
}
