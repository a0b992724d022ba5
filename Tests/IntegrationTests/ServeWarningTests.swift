// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `serve` says on its standard error (the journal, under systemd) what the command line would
/// say as a warning: nothing that a caller of the same operation would be told is dropped.
@Suite("serve reports its warnings")
struct ServeWarningTests {
    @Test("a SignOut whose revocation times out signs out, and serve's stderr says the refresh token was not revoked")
    func revocationWarning() async throws {
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 3600])
        try await scenario.authctl("server", "set", server.oauth2, "--revoke-url", server.revoke).expect(0)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let (serve, _) = try await scenario.startServe(["--server-timeout", "1"])
        defer { serve.signal(SIGKILL) }
        try server.configure(["delay": 3])

        let signedOut = try await scenario.call("SignOut", scenario.service)
        #expect(signedOut.status == 0, "\(signedOut)")
        try await scenario.authctl("status").expect(1)
        let warned = await eventually(within: .seconds(10)) { serve.stderr.contains("the refresh token was not revoked") }
        #expect(warned, "serve's stderr: \(serve.stderr)")
        #expect(serve.stderr.contains("authctl: \(scenario.service): the refresh token was not revoked ("), "\(serve.stderr)")
        #expect(serve.stderr.contains("raise --server-timeout"), "\(serve.stderr)")
    }
}
