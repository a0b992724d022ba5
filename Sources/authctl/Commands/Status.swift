// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether someone is signed in. Never prompts; works while the keyring is locked.",
        discussion: "Exit status: 0 signed in, 1 signed out."
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Print one JSON object.")
    var json = false

    @Flag(name: [.short, .long], help: "Print nothing; answer with the exit status only.")
    var quiet = false

    func run() throws {
        try Self.report(global.settings, json: json, quiet: quiet)
    }

    /// The command itself, for the parsed options and for ``FastPath``.
    static func report(_ global: GlobalSettings, json: Bool, quiet: Bool) throws {
        let status = try global.makeController().status()
        if json {
            try Output.json(StatusDocument(status))
        } else if !quiet {
            let locked = status.keyringLocked ? " (keyring locked)" : ""
            if let user = status.account {
                let name = status.reportedName.map { $0.isEmpty ? "" : " (\($0))" } ?? ""
                let since = status.signedInAt.map { " since \(Timestamp.rfc3339($0))" } ?? ""
                try Output.line("Signed in to \(status.service) as \(user)\(name)\(since)\(locked)")
            } else {
                try Output.line("Not signed in to \(status.service)\(locked)")
            }
        }
        if !status.isSignedIn { throw ExitCode(ExitStatus.no) }
    }
}
