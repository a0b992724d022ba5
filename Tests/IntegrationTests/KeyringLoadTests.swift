// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
import DesktopSandbox
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// gnome-keyring 42.1 sets a new caller up when its first message arrives, and a property read as
/// that first message races the set-up: under load the daemon asserted and aborted within 20 s,
/// taking every desktop program's secrets with it. authctl's every connection calls a method first.
@Suite("No load of authctl's brings gnome-keyring down")
struct KeyringLoadTests {
    @Test("serve running and six processes looping sign-in, token, accounts, status and sign-out for 60 s: gnome-keyring-daemon still runs and answers")
    func sixLoopsForAMinute() async throws {
        let keyring = try await KeyringUnderTest.start(.gnomeKeyring)
        defer { Task { await keyring.stop() } }
        let daemon = try #require(keyring.sandbox.keyringProcessID)
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice@example.org": "pw", "bob@example.org": "pw", "carol@example.org": "pw"], "access_lifetime": 3600])
        let watcher = try await keyring.scenario()
        let (serve, _) = try await watcher.startServe()
        defer { serve.signal(SIGTERM) }

        let end = Date().addingTimeInterval(60)
        let outcomes = try await withThrowingTaskGroup(of: [Run].self) { group in
            for loop in 0..<6 {
                let scenario = try await keyring.scenario()
                // Half the loops sign in locally, half at the token server, whose `token` reads the keyring.
                let bound = loop % 2 == 1
                let account = ["alice@example.org", "bob@example.org", "carol@example.org"][loop / 2]
                let signIn = ["sign-in", account, "--password-stdin"] + (bound ? ["--server", server.oauth2] : [])
                let commands = [signIn] + (bound ? [["token"]] : []) + [["accounts"], ["status"], ["sign-out"]]
                group.addTask {
                    var runs: [Run] = []
                    while Date() < end {
                        for command in commands {
                            runs.append(await (try scenario.start(command, input: Array("pw".utf8))).wait(timeout: 60))
                        }
                    }
                    return runs
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(outcomes.count > 60, "the loops ran too few commands to load the keyring")
        let failed = outcomes.filter { $0.status != 0 && $0.status != 1 }
        #expect(failed.isEmpty, "\(failed.prefix(3))")
        #expect(kill(daemon, 0) == 0, "gnome-keyring-daemon is gone")
        let state = try String(contentsOfFile: "/proc/\(daemon)/stat", encoding: .utf8).split(separator: " ")[2]
        #expect(state != "Z", "gnome-keyring-daemon died")
        let scenario = try await keyring.scenario()
        try await scenario.authctl("sign-in", "dave", "--password-stdin", stdin: "pw").expect(0)
        #expect(try await scenario.secretTool("lookup", "service", scenario.service, "account", "dave").stdout.hasPrefix("$argon2id$"))
    }
}
