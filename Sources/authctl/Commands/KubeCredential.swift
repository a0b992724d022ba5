// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

/// `authctl kube-credential [--access-token]`: kubectl's exec credential plugin, answering with
/// the session's ID token (or access token); `kube-credential setup USER` names it in the
/// kubeconfig.
struct KubeCredential: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kube-credential",
        abstract: "Give kubectl the ID token of the signed-in account (an exec credential plugin).",
        discussion: """
            `authctl kube-credential setup USER` makes the kubeconfig user USER run this authctl as \
            its exec credential plugin (through `kubectl config`, so KUBECONFIG counts), keeping \
            every other entry. kubectl then runs `authctl --service SERVICE kube-credential`, which \
            prints an ExecCredential with the ID token the OpenID provider issued, as `authctl token \
            --id-token` prints it, refreshed when due (one refresh however many kubectl processes \
            ask), in the apiVersion kubectl names in KUBERNETES_EXEC_INFO. With --access-token, the \
            access token instead, for API servers that take it.
            It never prompts, never opens a browser and never reads standard input. Nobody signed \
            in: exit 1, with the sign-in to run on stderr. Other failures are those of `authctl token`.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("setup, to name this plugin in the kubeconfig.", valueName: "operation"))
    var operation: String?

    @Argument(help: ArgumentHelp("For setup: the kubeconfig user.", valueName: "user"))
    var user: String?

    @Flag(name: .customLong("access-token"), help: "Give the access token instead of the ID token.")
    var accessToken = false

    func validate() throws {
        guard let operation else { return }
        guard operation == "setup" else { throw ValidationError("the only operation is setup; without one, the credential is printed") }
        guard let user else { throw ValidationError("setup needs the kubeconfig user") }
        // What kubectl's `config set users.USER.…` path and its YAML take without quoting trouble.
        guard (1...253).contains(user.utf8.count), !user.hasPrefix("-"), user.utf8.allSatisfy({ byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || [UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "@"), UInt8(ascii: ":")].contains(byte)
        }) else {
            throw ValidationError("the kubeconfig user may hold letters, digits, '.', '-', '_', '@' and ':' only, and not start with '-'")
        }
    }

    func run() async throws {
        if operation == "setup" {
            try await setUp(user!)
        } else {
            try await Self.answer(global.settings, accessToken: accessToken)
        }
    }

    private func setUp(_ user: String) async throws {
        let controller = try global.makeController()
        // Refused before anything changes: an unbound service has no token for kubectl.
        guard try controller.binding() != nil else {
            throw AuthError.invalidInput("\(controller.service) is not bound to a token server, so it has no token to give kubectl; bind it with `authctl server set URL`")
        }
        guard let binary = ProcessEnvironment.executablePath else {
            throw AuthError.unavailable("cannot tell where this authctl is (/proc/self/exe); kubectl needs its absolute path")
        }
        // SIGINT, SIGTERM and SIGHUP wait until kubectl has written its file, or the file is put
        // back: a kubeconfig left half-changed would send kubectl's requests with no credential.
        let arguments = ["--service", controller.service.rawValue, "kube-credential"] + (accessToken ? ["--access-token"] : [])
        try await FirstSignal.deferred { () async throws(AuthError) in
            try await KubeConfiguration.setExecCredential(user: user, command: binary, arguments: arguments, files: Self.kubeconfigFiles)
        }
        try Output.line("kubectl's user \(user) now gets the \(accessToken ? "access" : "ID") token of \(controller.service).")
    }

    /// The files kubectl reads and may write: each of `KUBECONFIG`'s, else `~/.kube/config`.
    static var kubeconfigFiles: [String] {
        if let list = ProcessEnvironment.value("KUBECONFIG") {
            let files = list.split(separator: ":").map(String.init)
            if !files.isEmpty { return files }
        }
        return [ProcessEnvironment.homeDirectory + "/.kube/config"]
    }

    /// The plugin itself; also for ``FastPath``.
    static func answer(_ global: GlobalSettings, accessToken: Bool) async throws {
        let version = try ExecCredential.apiVersion(requestedIn: ProcessEnvironment.value("KUBERNETES_EXEC_INFO"))
        // Never the unlock prompt: kubectl may run with nobody at the screen.
        var settings = global
        settings.noPrompt = true
        let controller = try settings.makeController()
        let credential = try await FirstSignal.deferred { () async throws(AuthError) in
            try await controller.execCredential(version, presenting: accessToken ? .accessToken : .idToken)
        }
        for warning in credential.warnings { Output.diagnostic(Output.words(warning)) }
        try Output.json(credential)
    }
}
