// SPDX-License-Identifier: Apache-2.0
internal import Subprocess
internal import SystemPackage

/// git's global configuration, changed through `git config` itself (never by editing the
/// file), so that `GIT_CONFIG_GLOBAL`, `HOME` and git's own locking and quoting hold.
/// Plumbing of this package's command line (`package`), not part of the library's API.
package enum GitConfiguration {
    /// Makes `helper` the credential helper of `url` in git's global configuration:
    /// `credential.URL.helper` becomes the empty string (no helper of another level answers
    /// first), then `helper`. Running it again leaves the same two values.
    package static func setCredentialHelper(for url: String, to helper: String) async throws(AuthError) {
        let key = "credential.\(url).helper"
        try await git(["config", "--global", "--replace-all", key, ""])
        try await git(["config", "--global", "--add", key, helper])
    }

    private static func git(_ arguments: [String]) async throws(AuthError) {
        let status: TerminationStatus
        let said: String
        do {
            let result = try await Subprocess.run(.name("git"), arguments: Arguments(arguments), input: .none, output: .discarded,
                                                  error: .string(limit: 4096))
            status = result.terminationStatus
            said = result.standardError
        } catch {
            throw .unavailable("cannot run git (\(error)); install git (the Debian package git)")
        }
        guard case .exited(0) = status else {
            throw .unavailable("git config failed: \(TokenExchange.quote(said.split(separator: "\n").first.map(String.init) ?? ""))")
        }
    }
}
