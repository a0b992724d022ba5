// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

/// `authctl serve` under a property-based caller (`Support/serve_caller/serve_caller.py`,
/// Hypothesis and dbus-fast): generated and wrongly typed calls of every method and property,
/// floods from many connections, stateful sequences of sign-outs and reads. It holds serve to
/// staying up, answering every call within its deadline, and changing nothing on a refused call.
@Suite("authctl serve under a property-based caller")
struct ServePropertyTests {
    /// CI's budget: a dozen examples a test, derandomized, well under a minute on a loaded
    /// machine. `SERVE_CALLER_EXAMPLES=5000` (passed through) makes a long run.
    static let examples = ProcessInfo.processInfo.environment["SERVE_CALLER_EXAMPLES"] ?? "12"

    /// The caller's virtual environment, which `.ci/install-python-deps` makes.
    static func python() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let python = root.appendingPathComponent(".build/serve-caller-venv/bin/python3").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("serve's property caller's Python environment (.build/serve-caller-venv: hypothesis, dbus-fast) is missing: run .ci/install-deps")
            throw CocoaError(.fileNoSuchFile)
        }
        return python
    }

    @Test("every method and property, with generated and wrong arguments, floods and sequences: serve stays up, answers in time, and a refused call changes nothing")
    func propertyCaller() async throws {
        let python = try Self.python()
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Support/serve_caller/serve_caller.py").path
        // A bus of its own: the caller starts the serve that owns the name there.
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        var scenario = try await Scenario(sandbox: sandbox)
        scenario.extraEnvironment["SERVE_CALLER_EXAMPLES"] = Self.examples
        let caller = try await Spawned(python, [script, "--authctl", Scenario.binary], input: nil, environment: scenario.environment,
                                       leadsProcessGroup: true)
        // Far more than CI's run takes; a long run is given as long as its examples need.
        let run = await caller.wait(timeout: max(600, (Double(Self.examples) ?? 12) * 2))
        #expect(run.status == 0, "the caller found serve failing a property:\n\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains(" calls in "), "the caller did not finish:\n\(run.stdout)\n\(run.stderr)")
    }
}
