// SPDX-License-Identifier: Apache-2.0
import AuthController
import Foundation
import Testing

/// A warning that quotes a failure keeps the failure's hint, which the command line words as its
/// option: what a person can do about a slow server, in the words they type.
@Suite("warnings word their hints as the command line's options")
struct WarningWordingTests {
    @Test("a refresh that times out says to raise --server-timeout, not the library's words")
    func slowServer() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 3600])
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        try server.configure(["delay": 3])

        // The stored token is still valid: it is printed, with a warning that says what to do.
        let token = try await scenario.authctl("--server-timeout", "1", "token", "--refresh")
        #expect(token.status == 0, "\(token)")
        #expect(token.stderr.hasPrefix("authctl: could not refresh the access token ("), "\(token)")
        #expect(token.stderr.contains("raise --server-timeout"), "\(token)")
        #expect(!token.stderr.contains("allow the token server more time"), "\(token)")
    }
}
