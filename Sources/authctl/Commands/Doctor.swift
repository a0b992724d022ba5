import ArgumentParser
import AuthController

struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check the session bus, the keyring, the settings file and hashing, without prompting.",
        discussion: "Exit status: 0 when every check passes; otherwise the exit status of the first failure's kind."
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Print one JSON object.")
    var json = false

    func run() throws {
        let checks = Doctor(service: try global.resolvedService(), settingsDirectory: GlobalOptions.settingsDirectory(),
                            timeout: global.keyringTimeout ?? 5).run()
        if json {
            Output.json(.orderedObject([
                ("ok", .bool(checks.allSatisfy(\.ok))),
                ("checks", .array(checks.map { check in
                    .orderedObject([("name", .string(check.name)), ("ok", .bool(check.ok)), ("detail", .string(check.detail)),
                                    ("fix", .optional(check.fix))])
                })),
            ]))
        } else {
            for check in checks {
                Output.line((check.ok ? "ok   " : "fail ") + "\(check.name): \(check.detail)" + (check.fix.map { " — fix: \($0)" } ?? ""))
            }
        }
        if let failure = checks.first(where: { !$0.ok })?.failure { throw ExitCode(failure.exitCode) }
    }
}
