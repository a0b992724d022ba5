// SPDX-License-Identifier: Apache-2.0
/// The hosts whose git remotes get the session's access token (git's credential helper), kept
/// in the service's settings group as `git-hosts`.
extension AuthController {
    /// The hosts `git` may be given the access token for, as git names them (`HOST` or
    /// `HOST:PORT`). Blocks briefly on the settings file; never prompts.
    package func gitHosts() throws(AuthError) -> [String] {
        try intactRecord().gitHosts
    }

    /// Adds `host` (from ``GitHost/parse(setupURL:)``) to the hosts that get the access token;
    /// `false` when it was there already. The service must be bound to a token server
    /// (``AuthError/invalidInput(_:)-enum.case`` otherwise). Blocks on the settings lock.
    @discardableResult
    package func addGitHost(_ host: String) throws(AuthError) -> Bool {
        try changeKeptLists(unbound: "\(service) is not bound to a token server, so it has no token to give git; \(hint: .bindServer)") { record in
            guard !record.gitHosts.contains(host) else { return false }
            record.gitHosts.append(host)
            return true
        }
    }

    /// Makes the signed-in account's access token count as expired from now on — when it is
    /// `token`, if one is given (git erases a credential the server refused) — so the next
    /// ``accessToken(minValid:forceRefresh:checkingIDToken:)`` refreshes it. `false`, and nothing
    /// changes, when nobody is signed in or `token` is not the stored access token. Never prompts.
    @discardableResult
    package func expireAccessToken(_ token: String? = nil) throws(AuthError) -> Bool {
        var expired = false
        _ = try change { (read, record) throws(AuthError) -> Change in
            if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
            guard let user = record.user, let binding = record.binding else { return Change() }
            if let token {
                guard let tokens = try keyring.value(TokenSet.self, service: service, account: user, server: binding.server),
                      tokens.accessToken.equalsInConstantTime(token) else { return Change() }
            }
            var updated = record
            var times = record.tokenTimes ?? TokenTimes()
            times.accessExpiresAt = min(times.accessExpiresAt ?? .max, clock())
            updated.tokenTimes = times
            expired = true
            return Change(record: updated)
        }
        return expired
    }
}

/// A host as git's credential protocol names it (`HOST` or `HOST:PORT`).
package enum GitHost {
    /// A git host's URL — `https://HOST[:PORT]`, or `http://` to a
    /// loopback host, by the rules of ``ServerURL``, without a path, query or fragment — and the
    /// host it names, as git sends it. A broken rule is ``AuthError/invalidInput(_:)-enum.case``.
    package static func parse(setupURL text: String) throws(AuthError) -> (url: ServerURL, host: String) {
        let url = try ServerURL(validating: text, role: "git URL")
        let afterScheme = url.rawValue.split(separator: "://", maxSplits: 1).last.map(String.init) ?? ""
        guard let slash = afterScheme.firstIndex(of: "/"), afterScheme[slash...] == "/" else {
            throw .invalidInput("invalid git URL '\(text.peerText(limit: 200))': give the scheme and host only (https://HOST[:PORT]), without a path or query")
        }
        let host = String(afterScheme[..<slash])
        guard isValid(host) else {
            throw .invalidInput("invalid git URL '\(text.peerText(limit: 200))': its host may hold letters, digits, '.', '-', '_', '~', ':', '[' and ']' only")
        }
        return (url, host)
    }

    /// 1–255 bytes of letters, digits, `.`, `-`, `_`, `~`, `:`, `[` and `]`: what the settings
    /// keep, and what ``parse(setupURL:)`` accepts.
    static func isValid(_ host: String) -> Bool {
        (1...255).contains(host.utf8.count) && host.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || [UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: ":"),
                    UInt8(ascii: "["), UInt8(ascii: "]")].contains(byte)
        }
    }
}
