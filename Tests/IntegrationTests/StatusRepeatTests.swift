// SPDX-License-Identifier: Apache-2.0
import AuthController
import Foundation
import Testing

/// `status` reads the keyring's search and lock state in one round trip; gnome-keyring now and
/// then answers the lock state, asked beside the search, with an error for a path it made up. A
/// healthy keyring must never read as a broken one.
@Suite("status on a healthy keyring")
struct StatusRepeatTests {
    @Test("300 status reads in a row: every one says signed in (about 1 in 100 said 69 \"no default collection\")")
    func repeatedStatus() async throws {
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "bob", "--password-stdin", stdin: "pw").expect(0)
        var failures: [Run] = []
        for _ in 0..<300 {
            let run = try await scenario.authctl("status", "--quiet")
            if run.status != 0 { failures.append(run) }
        }
        #expect(failures.isEmpty, "\(failures.count) of 300 failed, e.g. \(failures.first.map(String.init(describing:)) ?? "")")
    }
}
