// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

struct SignOut: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign-out",
        abstract: "Sign the current account out and delete its stored password hash.",
        discussion: """
            On a service bound to a token server, it first waits for a token refresh under way \
            (as long as `token` would), so the refresh token it revokes is the newest one.
            Exit status: 0, also when nobody was signed in.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Keep the account's stored password hash.")
    var keepCredentials = false

    func run() async throws {
        let controller = try global.makeController()
        let outcome = try await controller.signOut(keepingCredentials: keepCredentials)
        Output.warnings(outcome)
        // A stale session ended on the way (reason `removed`) is told on stderr, not as a sign-out.
        for event in outcome.events where event.reason == .signOut {
            try Output.line("Signed out of \(controller.service): \(event.account?.rawValue ?? "").")
        }
    }
}
