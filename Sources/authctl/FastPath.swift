// SPDX-License-Identifier: Apache-2.0
/// `status`, `whoami`, `token` and the credential helpers (`git-credential get`, `kube-credential`,
/// `docker-credential get`, `aws-credential --role-arn ARN`), which scripts, git, kubectl and registry clients run in loops (`authctl status && …`,
/// `curl -H "Authorization: Bearer $(authctl token)"`), with nothing but their plain options:
/// read here directly instead of through swift-argument-parser, which builds its model of every
/// option by reflection and generic metadata at each start — about 10 M instructions, most of
/// what `status` or a cached `token` costs.
///
/// Only an argument list made of these options, each at most once, takes this path: the command
/// name, before it the global `--service NAME` (or `--service=NAME`) and `--no-prompt`, after it
/// those and the command's own flags. Anything else — help, another option, a mistake — goes
/// through ArgumentParser, which gives the same command the same meaning and says what is wrong.
enum FastPath {
    /// A command read on this path, ready to run.
    enum Command {
        /// `status` and `whoami`, which never wait on anything but their own blocking calls: run
        /// where `main` is, on the main thread, before its first suspension. Awaited, they would
        /// hop to the concurrency runtime's thread pool and back (two threads started and two
        /// thread switches, for a command that does nothing concurrently).
        case synchronous(() throws -> Void)
        /// `token`, which listens for signals while its call runs.
        case asynchronous(() async throws -> Void)
    }

    /// The command the arguments (without the program's name) ask for, when this path can read
    /// them; `nil` sends them to ArgumentParser.
    static func command(for arguments: [String]) -> Command? {
        var global = GlobalSettings()
        var command: String?
        var flags: [String] = []
        var minValid: UInt64?
        /// A credential helper's operation (`get`, …).
        var operation: String?
        /// `aws-credential`'s options, in order. An array of pairs, not a dictionary: see ``flags(of:)``.
        var awsOptions: [(name: String, value: String)] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            if argument == "--service" || argument.hasPrefix("--service=") {
                let value: String
                if argument == "--service" {
                    guard index < arguments.endIndex else { return nil }
                    value = arguments[index]
                    index += 1
                } else {
                    value = String(argument.dropFirst("--service=".count))
                }
                guard global.service == nil, !value.isEmpty, !value.hasPrefix("-") else { return nil }
                global.service = value
            } else if argument == "--no-prompt" {
                guard !global.noPrompt else { return nil }
                global.noPrompt = true
            } else if command == nil {
                guard Self.flags(of: argument) != nil else { return nil }
                command = argument
            } else if command == "git-credential" && operation == nil && (argument == "get" || argument == "store" || argument == "erase") {
                operation = argument
            } else if command == "docker-credential" && operation == nil
                        && (argument == "get" || argument == "store" || argument == "erase" || argument == "list") {
                operation = argument
            } else if command == "aws-credential" && AWSCredential.Options.names.contains(argument) {
                // A value that looks like an option is ArgumentParser's to read or refuse.
                guard !awsOptions.contains(where: { $0.name == argument }), index < arguments.endIndex,
                      !arguments[index].hasPrefix("-") else { return nil }
                awsOptions.append((argument, arguments[index]))
                index += 1
            } else if command == "token" && argument == "--min-valid" {
                // Plain digits only, within the option's limit; any other spelling is
                // ArgumentParser's to read or refuse.
                guard minValid == nil, index < arguments.endIndex, let value = arguments[index].plainSeconds else { return nil }
                minValid = value
                index += 1
            } else if let accepted = Self.flags(of: command!), accepted.contains(argument) {
                // `-q` and `--quiet` are one flag.
                let flag = argument == "-q" ? "--quiet" : argument
                guard !flags.contains(flag) else { return nil }
                flags.append(flag)
            } else {
                return nil
            }
        }
        switch command {
        case "status":
            return .synchronous { [global, flags] in try Status.report(global, json: flags.contains("--json"), quiet: flags.contains("--quiet")) }
        case "whoami":
            return .synchronous { [global, flags] in try WhoAmI.report(global, json: flags.contains("--json")) }
        case "token":
            return .asynchronous { [global, flags] in
                try await Token.report(global, minValid: minValid ?? 60, refresh: flags.contains("--refresh"), json: flags.contains("--json"))
            }
        case "git-credential":
            guard let operation else { return nil }
            return .asynchronous { [global] in try await GitCredential.answer(global, operation: operation) }
        case "kube-credential":
            return .asynchronous { [global, flags] in try await KubeCredential.answer(global, accessToken: flags.contains("--access-token")) }
        case "docker-credential":
            guard let operation else { return nil }
            return .asynchronous { [global] in try await DockerCredential.answer(global, action: operation) }
        case "aws-credential":
            guard let options = AWSCredential.Options(awsOptions) else { return nil }
            return .asynchronous { [global] in try await AWSCredential.answer(global, options) }
        default:
            return nil
        }
    }

    /// The flags `command` takes, when it is one of the commands this path reads.
    ///
    /// A `switch` and arrays, not a dictionary of sets (README, Performance, the start-up rules):
    /// six commands and six flags need no hashing.
    private static func flags(of command: String) -> [String]? {
        switch command {
        case "status": ["--json", "--quiet", "-q"]
        case "whoami": ["--json"]
        case "token": ["--json", "--refresh"]
        // git runs its helper at every fetch and push: `git-credential get` (or store, erase);
        // kubectl its plugin whenever its token has expired; registry clients theirs at every pull.
        case "git-credential": []
        case "kube-credential": ["--access-token"]
        case "docker-credential": []
        // The aws command and the SDKs run their credential_process whenever they start.
        case "aws-credential": []
        default: nil
        }
    }
}

private extension String {
    /// The number of seconds these digits say, when they are nothing but ASCII digits and at
    /// most a year, as `token --min-valid` takes it.
    var plainSeconds: UInt64? {
        guard (1...9).contains(utf8.count), utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = UInt64(self),
              value <= 365 * 86_400 else { return nil }
        return value
    }
}
