// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing

/// Signing in at the real identity provider where no browser opens on this machine: a browser
/// command that fails at once, an SSH session with a forwarded display, and a person who pastes
/// the address their browser ended on into the terminal (driven on a pseudo-terminal).
@Suite("Sign-in where no browser opens")
struct NoBrowserSignInTests {
    /// A folder with an `xdg-open` that does `script`, to put first in `PATH`.
    private func fakeXDGOpen(_ script: String) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fake-xdg-open-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "#!/bin/sh\n\(script)\n".write(toFile: folder + "/xdg-open", atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder + "/xdg-open")
        return folder
    }

    private var path: String { ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin" }

    @Test("a browser that fails at once (BROWSER exits 1; xdg-open, finding no browser, exits 3): one line says so, and the device flow takes over in the same --timeout")
    func failingBrowser() async throws {
        let provider = try await IdentityProvider()
        let noBrowser = try fakeXDGOpen("exit 3")
        for (environment, words) in [
            (["BROWSER": "/bin/false"], "the browser /bin/false could not open the page (it exited with status 1)"),
            (["BROWSER": "", "DISPLAY": ":99", "PATH": noBrowser + ":" + path], "the browser xdg-open could not open the page (it exited with status 3)"),
            (["BROWSER": "/nonexistent/browser"], "could not start the browser /nonexistent/browser"),
        ] {
            var scenario = try await Scenario()
            scenario.extraEnvironment = environment
            try await scenario.bindDeviceClient(of: provider)
            let signIn = try await scenario.start(["sign-in", "--timeout", "120"])
            let printed = await eventually(within: .seconds(90)) { signIn.stderr.contains(" and enter the code ") }
            let lines = signIn.stderr.split(separator: "\n").map(String.init)
            try #require(printed, "\(environment): \(signIn.stderr)")
            let failure = try #require(lines.firstIndex { $0.contains(words) }, "\(environment): \(lines)")
            let device = try #require(lines.firstIndex { $0.hasPrefix("To sign in, open ") && $0.contains(" and enter the code ") })
            #expect(failure < device, "\(lines)")
            let parts = lines[device].dropFirst("To sign in, open ".count).components(separatedBy: " and enter the code ")
            let (decided, outcome) = try await provider.approveDevice(verificationURI: parts[0], userCode: parts[1])
            #expect(decided, "\(outcome)")
            let run = await signIn.wait()
            #expect(run.status == 0 && run.stderr.contains("Signed in") == false && run.stdout.contains("Signed in to"), "\(environment): \(run)")
            // The listener of the browser flow was closed when the device flow took over.
            #expect(try await provider.count("device_authorization") >= 1)
        }
    }

    @Test("over SSH (SSH_CONNECTION with a forwarded DISPLAY) there is no browser here: the device flow, and no browser is started")
    func overSSH() async throws {
        let provider = try await IdentityProvider()
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("xdg-open-ran-\(UUID().uuidString)").path
        let xdgOpen = try fakeXDGOpen("touch '\(marker)'")
        for ssh in [["SSH_CONNECTION": "192.0.2.10 50000 192.0.2.20 22"], ["SSH_TTY": "/dev/pts/7"]] {
            var scenario = try await Scenario()
            scenario.extraEnvironment = ["BROWSER": "", "DISPLAY": "localhost:10.0", "PATH": xdgOpen + ":" + path].merging(ssh) { $1 }
            try await scenario.bindDeviceClient(of: provider)
            let signIn = try await scenario.start(["sign-in", "--timeout", "60"])
            let printed = await eventually(within: .seconds(30)) { signIn.stderr.contains(" and enter the code ") }
            #expect(printed && !signIn.stderr.contains("continue in your browser"), "\(ssh): \(signIn.stderr)")
            signIn.signal(SIGTERM)
            _ = await signIn.wait()
        }
        #expect(!FileManager.default.fileExists(atPath: marker), "a browser was started on the SSH server")
    }

    /// Runs `sign-in --flow browser` on a pseudo-terminal through `paste_driver.py` with `lines`,
    /// the browser stand-in stopping at the callback's address, and returns the driver's outcome.
    private func pasting(_ lines: [[String: Any]], decision: IdentityProvider.Decision = .approve,
                         provider: IdentityProvider) async throws -> (status: Int, output: String, error: String?) {
        var scenario = try await Scenario()
        let result = URL(fileURLWithPath: scenario.sandbox.directory + "/stand-in-\(UUID().uuidString).json")
        scenario.extraEnvironment = try IdentityProvider.browserEnvironment(result: result, decision: decision)
        scenario.extraEnvironment["IDP_CALLBACK_FETCH"] = "no"
        let bind = try await scenario.authctl("server", "set", provider.issuer, "--protocol", "oidc", "--client-id", IdentityProvider.browserClientID)
        try #require(bind.status == 0, "\(bind)")
        let plan = String(decoding: try JSONSerialization.data(withJSONObject: ["result": result.path, "timeout": 90, "lines": lines]), as: UTF8.self)
        let driver = IdentityProvider.directory.deletingLastPathComponent().appendingPathComponent("paste_driver.py").path
        let run = try await runProcess(try IdentityProvider.python(), [driver, plan, "--", Scenario.binary, "sign-in", "--flow", "browser", "--timeout", "90"],
                                       input: nil, environment: scenario.environment, timeout: 120)
        let outcome = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run)")
        return (outcome["status"] as? Int ?? -1, outcome["output"] as? String ?? "", outcome["error"] as? String)
    }

    @Test("--flow browser at a terminal: the address the browser ends on, pasted, completes the sign-in; another sign-in's, one without state or code, with a control character, or a runaway paste is refused with one line and the wait goes on")
    func pastedAddress() async throws {
        let provider = try await IdentityProvider()
        let (status, output, error) = try await pasting([
            ["edit": ["set": ["state": "another-sign-ins-state"]], "expect": "belongs to another sign-in"],
            ["edit": ["drop": ["state"]], "expect": "carries no state"],
            ["edit": ["drop": ["code"]], "expect": "carries no code"],
            ["raw": "{address}\u{1b}[2J", "expect": "contains a control character"],
            ["repeat": "a", "count": 1 << 20, "expect": "is not an address with a query"],
            ["raw": "{address}", "expect": "Signed in to"],
        ], provider: provider)
        #expect(error == nil && status == 0, "\(error ?? ""): exit \(status)\n\(output)")
        #expect(output.contains("Or paste here the address your browser shows once you have signed in:"), "\(output)")
        #expect(try await provider.count("authorization_code") == 1)
    }

    @Test("a pasted address that says the person refused (error=access_denied, with this sign-in's state): 77, nothing stored")
    func pastedRefusal() async throws {
        let provider = try await IdentityProvider()
        let (status, output, error) = try await pasting([["raw": "{address}", "expect": "refused"]], decision: .deny, provider: provider)
        #expect(error == nil && status == 77 && output.contains("the sign-in was refused at the provider"), "\(error ?? ""): exit \(status)\n\(output)")
        #expect(try await provider.count("token") == 0)
    }
}
