// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

struct Forget: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Delete an account's stored password hash, signing it out if it is signed in.",
        discussion: """
            On a service bound to a token server, it first waits for a token refresh under way \
            (as long as `token` would), so the refresh token it revokes is the newest one.
            Exit status: 0, also when there was nothing to forget.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The account id.")
    var account: String

    func run() async throws {
        let controller = try global.makeController()
        let outcome = try await controller.forget(AccountID(validating: account))
        Output.warnings(outcome)
        // Forgetting another account can end a stale session on the way: that line names whose.
        for event in outcome.events where event.status == .signedOut {
            let user = event.account?.rawValue ?? ""
            try Output.line(event.reason == .removed ? "Signed out of \(controller.service): \(user) (its keyring item is gone)."
                                                     : "Signed out of \(controller.service): \(user).")
        }
    }
}
