// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing

extension Scenario {
    /// Binds the scenario's service to `provider`'s device client (with the device endpoint its
    /// discovery lacks) and `extra` options.
    func bindDeviceClient(of provider: IdentityProvider, _ extra: [String] = []) async throws {
        let run = try await authctl(["server", "set", provider.issuer, "--protocol", "oidc", "--client-id", IdentityProvider.deviceClientID,
                                     "--device-authorization-url", provider.deviceAuthorizationEndpoint] + extra)
        #expect(run.status == 0, "\(run)")
    }

    /// Starts `sign-in --flow device` with `extra` arguments, waits for its first line, and
    /// returns the process and the verification URI and user code it printed.
    func startDeviceSignIn(_ extra: [String] = []) async throws -> (Spawned, uri: String, code: String) {
        let signIn = try await start(["sign-in", "--flow", "device"] + extra)
        let printed = await eventually(within: .seconds(30)) { signIn.stderr.contains(" and enter the code ") }
        #expect(printed, "\(signIn.stderr)")
        let line = try #require(signIn.stderr.split(separator: "\n").first { $0.hasPrefix("To sign in, open ") }, "\(signIn.stderr)")
        let parts = line.dropFirst("To sign in, open ".count).components(separatedBy: " and enter the code ")
        return (signIn, parts[0], parts[1])
    }

    /// Signs `person` in with the device flow at `provider`, the device stand-in approving.
    func signInWithDeviceFlow(at provider: IdentityProvider, as person: IdentityProvider.Person = IdentityProvider.ada) async throws {
        let (signIn, uri, code) = try await startDeviceSignIn()
        let (decided, outcome) = try await provider.approveDevice(verificationURI: uri, userCode: code, person: person)
        #expect(decided, "\(outcome)")
        let run = await signIn.wait()
        try #require(run.status == 0, "\(run)")
    }

    /// Binds the scenario's service to `provider`'s browser client and signs `person` in with the
    /// browser flow (the stand-in approving over HTTP), which, unlike this provider's device flow,
    /// issues an ID token. The stand-in's variables join `extraEnvironment`.
    mutating func signInWithBrowser(at provider: IdentityProvider, as person: IdentityProvider.Person = IdentityProvider.ada) async throws {
        let result = URL(fileURLWithPath: sandbox.directory + "/stand-in-\(UUID().uuidString).json")
        extraEnvironment.merge(try IdentityProvider.browserEnvironment(result: result, person: person)) { $1 }
        let bind = try await authctl("server", "set", provider.issuer, "--protocol", "oidc", "--client-id", IdentityProvider.browserClientID)
        #expect(bind.status == 0, "\(bind)")
        let run = try await authctl("sign-in", "--flow", "browser", "--timeout", "60")
        try #require(run.status == 0, "\(run)")
    }
}
