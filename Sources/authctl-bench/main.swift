// SPDX-License-Identifier: Apache-2.0
// The in-process benchmark: how many `isSignedIn` checks per second the library makes on a
// warm session-bus connection. `.ci/bench` runs it beside the same loop in Python.
import AuthController
import Foundation

let arguments = CommandLine.arguments
if arguments.count == 3, arguments[1] == "--argon2", let rounds = Int(arguments[2]) {
    // Argon2id with the defaults, in process: the floor under `sign-in`.
    let hasher = Argon2idHasher()
    let password = try Password("correct horse battery staple")
    let encoded = try hasher.hash(password)
    var times: [Double] = []
    for _ in 0..<rounds {
        let start = Date()
        _ = hasher.verify(password, against: encoded)
        times.append(Date().timeIntervalSince(start) * 1000)
    }
    print(times.sorted()[rounds / 2])
    exit(0)
}
guard arguments.count == 3, let service = ServiceName(rawValue: arguments[1]), let seconds = Double(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: authctl-bench SERVICE SECONDS\n".utf8))
    exit(64)
}
let environment = ProcessInfo.processInfo.environment
let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
    ?? (environment["HOME"] ?? "/") + "/.config"
let controller = AuthController(service: service, keyring: SecretServiceStore(promptAllowed: false),
                                settings: KeyFileSettingsStore(directory: configHome + "/authctl"),
                                broadcaster: DBusBroadcaster())
guard controller.isSignedIn else {
    FileHandle.standardError.write(Data("authctl-bench: nobody is signed in to \(service)\n".utf8))
    exit(1)
}
let start = Date()
var checks = 0
while Date().timeIntervalSince(start) < seconds {
    precondition(controller.isSignedIn)
    checks += 1
}
print(Int(Double(checks) / Date().timeIntervalSince(start)))
