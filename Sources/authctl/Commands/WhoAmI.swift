// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

struct WhoAmI: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "whoami",
        abstract: "Print the signed-in account id.",
        discussion: "Exit status: 0, or 1 if nobody is signed in."
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Print one JSON object.")
    var json = false

    func run() throws {
        try Self.report(global.settings, json: json)
    }

    /// The command itself, for the parsed options and for ``FastPath``.
    static func report(_ global: GlobalSettings, json: Bool) throws {
        let status = try global.makeController().status()
        if json {
            try Output.json(WhoAmIDocument(status))
        }
        guard let user = status.account else {
            if !json { Output.diagnostic("nobody is signed in to \(status.service)") }
            throw ExitCode(ExitStatus.no)
        }
        if !json { try Output.line(user.rawValue) }
    }
}
