// SPDX-License-Identifier: Apache-2.0
import Foundation

extension Scenario {
    /// The scenario's environment plus `AUTHCTL`, the path of the built binary, for scripts
    /// that need a shell: redirections (`>/dev/full`) and pipelines (`| head -n 1`).
    var shellEnvironment: Scenario {
        var scenario = self
        scenario.extraEnvironment["AUTHCTL"] = Scenario.binary
        return scenario
    }

    /// Runs `script` with `/bin/sh -c` in this scenario's environment.
    func shell(_ script: String, timeout: Double = 60) async throws -> Run {
        try await runProcess("/bin/sh", ["-c", script], input: nil, environment: shellEnvironment.environment, timeout: timeout)
    }

    /// Starts `script` with `/bin/sh -c` without waiting for it.
    func startShell(_ script: String) async throws -> Spawned {
        try await Spawned("/bin/sh", ["-c", script], input: nil, environment: shellEnvironment.environment)
    }
}

/// `text` in single quotes, for a shell script a test writes.
func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
