// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore
import FoundationEssentials
import SystemPackage

/// `authctl git-credential get|store|erase|setup URL`: git's credential helper
/// (`gitcredentials(7)`), answering with the session's access token for the hosts set up.
struct GitCredential: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "Give git the access token of the signed-in account (git's credential helper).",
        discussion: """
            `authctl git-credential setup https://HOST[:PORT]` lets HOST's git remotes use the \
            service's session: it adds HOST to the service's git hosts and sets \
            credential.URL.helper in git's global configuration (through `git config --global`). \
            git then runs `authctl --service SERVICE git-credential get`, which answers with the \
            access token as `authctl token` prints it, refreshed when due — only for a host that \
            was set up, over https (or http to a loopback host). It never prompts. When it has \
            nothing to give, it prints nothing and git goes on to its next helper.
            `store` changes nothing; `erase` of the current token makes the next `get` refresh it.
            Undo the set-up with `git config --global --unset-all credential.URL.helper`.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("get, store, erase (git's operations), or setup.", valueName: "operation"))
    var operation: String

    @Argument(help: ArgumentHelp("For setup: the URL of the git host, https://HOST[:PORT].", valueName: "url"))
    var url: String?

    func validate() throws {
        guard ["get", "store", "erase", "setup"].contains(operation) else {
            throw ValidationError("the operation is get, store, erase or setup")
        }
        if operation == "setup" && url == nil { throw ValidationError("setup needs the URL of the git host") }
        if operation != "setup" && url != nil { throw ValidationError("\(operation) takes no URL: git writes the request on standard input") }
    }

    func run() async throws {
        if operation == "setup" {
            try await setUp(url!)
        } else {
            try await Self.answer(global.settings, operation: operation)
        }
    }

    private func setUp(_ text: String) async throws {
        let (url, host) = try GitHost.parse(setupURL: text)
        let controller = try global.makeController()
        // Refused before anything changes: an unbound service has no token for git.
        guard try controller.binding() != nil else {
            throw AuthError.invalidInput("\(controller.service) is not bound to a token server, so it has no token to give git; bind it with `authctl server set URL`")
        }
        guard let binary = ProcessEnvironment.executablePath else {
            throw AuthError.unavailable("cannot tell where this authctl is (/proc/self/exe); git needs its absolute path")
        }
        let base = url.rawValue.hasSuffix("/") ? String(url.rawValue.dropLast()) : url.rawValue
        // git's configuration first: when git cannot write it, the settings stay as they were.
        try await GitConfiguration.setCredentialHelper(
            for: base, to: "!\(Self.shellQuoted(binary)) --service \(controller.service) git-credential")
        let added = try controller.addGitHost(host)
        try Output.line(added ? "git now gets the access token of \(controller.service) for \(host)."
                              : "git already gets the access token of \(controller.service) for \(host).")
    }

    /// `text` in single quotes for the shell git runs the helper with.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    /// The operation git asked for, with its request on standard input; also for ``FastPath``.
    static func answer(_ global: GlobalSettings, operation: String) async throws {
        let request = try GitCredentialRequest(reading: .standardInput)
        guard operation != "store" else { return }
        guard let host = request.host, request.isSafeTransport else { return }
        // Never the unlock prompt: git may run with nobody at the screen.
        var settings = global
        settings.noPrompt = true
        let controller = try settings.makeController()
        guard try controller.gitHosts().contains(host) else { return }
        if operation == "erase" {
            if let password = request.password { try controller.expireAccessToken(password) }
            return
        }
        let token: AuthController.AccessToken
        do {
            token = try await controller.accessToken()
        } catch {
            switch error {
            case .notSignedIn, .denied, .invalidInput:
                Output.diagnostic("git gets no token for \(host): \(Output.words(error.explanation)) (`authctl --service \(controller.service) sign-in`)")
                return
            default:
                throw error
            }
        }
        for warning in token.warnings { Output.diagnostic(Output.words(warning)) }
        var answer = ["username=\(request.username ?? token.account.rawValue)", "password=\(token.token)"]
        if let expiresAt = token.expiresAt { answer.append("password_expiry_utc=\(Int64(expiresAt.timeIntervalSince1970))") }
        // As git sent them back: the username is git's own text (never a newline or NUL, which
        // the request cannot carry), the token visible ASCII.
        try Output.verbatim(answer)
    }
}

extension GitCredentialRequest {
    /// Reads at most 64 KiB; a line without `=`, or a value with a NUL, is refused as git
    /// refuses it.
    init(reading descriptor: FileDescriptor) throws(AuthError) {
        // One byte over the cap, to tell a request of 64 KiB from a longer one; the blank line
        // ends the request, whatever follows it.
        let bytes = try StandardInput.read(descriptor, atMost: 64 * 1024 + 1, failure: "cannot read git's request on standard input",
                                           end: Self.blankLine(in:))
        guard bytes.count <= 64 * 1024 else { throw .invalidInput("git's request is over 64 KiB") }
        try self.init(parsing: bytes)
    }
}
