// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

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
        let environment = DesktopEnvironment.current
        let checks = Doctor(service: try global.resolvedService(), settingsDirectory: environment.settingsDirectory,
                            timeout: global.keyringTimeout ?? 5, keyringBackend: environment.keyringBackend,
                            fileKeyringPath: FileKeyring.path).run()
        if json {
            try Output.json(DoctorDocument(checks))
        } else {
            for check in checks {
                try Output.line((check.ok ? "ok   " : "fail ") + "\(check.name): \(Output.words(check.detail))" + (check.fix.map { " — fix: \(Output.words($0))" } ?? ""))
            }
        }
        if let failure = checks.first(where: { !$0.ok })?.failure { throw ExitCode(failure.exitCode) }
    }
}

/// Where libsecret keeps its file keyring, as libsecret finds it: `SECRET_FILE_TEST_PATH` outside a
/// sandbox, else `default.keyring` in the user's data folder's `keyrings`.
enum FileKeyring {
    static var path: String {
        if let path = ProcessEnvironment.value("SECRET_FILE_TEST_PATH") { return path }
        let data = ProcessEnvironment.value("XDG_DATA_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (ProcessEnvironment.value("HOME") ?? ProcessEnvironment.currentUser?.homeDirectory ?? "/") + "/.local/share"
        return data + "/keyrings/default.keyring"
    }
}
