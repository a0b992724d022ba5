// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

struct Accounts: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts",
        abstract: "List the account ids with a stored password hash; `*` marks the signed-in one.",
        discussion: "Exit status: 0; 69 when the keyring is locked (account ids cannot be listed then)."
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Print one JSON array.")
    var json = false

    func run() throws {
        let accounts = try global.makeController().accounts()
        if json {
            try Output.json(accounts.map(AccountDocument.init))
        } else {
            for account in accounts { try Output.line((account.isCurrent ? "* " : "  ") + account.id.rawValue) }
        }
    }
}
