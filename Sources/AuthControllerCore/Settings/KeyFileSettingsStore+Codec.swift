// SPDX-License-Identifier: Apache-2.0
/// The record of a service ↔ its group in the settings key file.
extension KeyFileSettingsStore {
    /// Why the settings file cannot be read: GLib's parse error, or a key whose value authctl
    /// would refuse.
    struct Corrupt: Error { let reason: String }

    /// Sets the keys of `record` in the group of `service`, removing those it has no value for.
    static func encode(_ record: SessionRecord, into keyFile: KeyFile, service: ServiceName) {
        let group = service.rawValue
        func set(_ key: String, _ value: String?) {
            if let value { keyFile.setString(value, group: group, key: key) } else { keyFile.removeKey(group: group, key: key) }
        }
        set("user", record.user?.rawValue)
        set("name", record.user == nil ? nil : record.name ?? "")
        set("signed-in-at", record.user == nil ? nil : record.signedInAt)
        set("server", record.binding?.server.rawValue)
        set("protocol", record.binding?.tokenProtocol.rawValue)
        set("client-id", record.binding?.clientID)
        set("scope", record.binding?.scope)
        set("revoke-url", record.binding?.revokeURL?.rawValue)
        let openID = record.binding?.openID
        set("account-claim", openID?.accountClaim)
        set("device-authorization-url", openID?.deviceAuthorizationURL?.rawValue)
        set("redirect-port", openID?.redirectPort.map { String($0) })
        let provider = openID?.provider
        set("issuer", provider?.issuer)
        set("token-endpoint", provider?.tokenEndpoint.rawValue)
        set("authorization-endpoint", provider?.authorizationEndpoint?.rawValue)
        set("device-authorization-endpoint", provider?.deviceAuthorizationEndpoint?.rawValue)
        set("userinfo-endpoint", provider?.userinfoEndpoint?.rawValue)
        set("revocation-endpoint", provider?.revocationEndpoint?.rawValue)
        set("jwks-uri", provider?.jwksURI.rawValue)
        set("email", record.user == nil ? nil : record.email)
        // GKeyFile's list form (`a;b;`); a host has no `;` or `\\` to escape.
        set("git-hosts", record.gitHosts.isEmpty ? nil : record.gitHosts.map { $0 + ";" }.joined())
        // Likewise: neither a registry nor its user name has a `;` or `\\`.
        set("registries", record.registries.isEmpty ? nil : record.registries.map { $0.description + ";" }.joined())
        let times = record.user == nil ? nil : record.tokenTimes
        set("access-expires-at", times?.accessExpiresAt.map(Timestamp.rfc3339(microseconds:)))
        set("refresh-expires-at", times?.refreshExpiresAt.map(Timestamp.rfc3339(microseconds:)))
        set("clock-offset", times.map { String($0.clockOffset) })
        set("access-lifetime", times?.accessLifetime.map { String($0) })
        set("ended", record.user == nil ? record.endedBecause?.rawValue : nil)
        // Written only when the server issued no refresh token: files of earlier versions, which
        // lack the key, describe renewable tokens.
        set("renewable", times.flatMap { $0.renewable ? nil : "false" })
        keyFile.setString(String(record.sequence), group: group, key: "sequence")
    }

    /// The whole key file and the service's record, or why the file is corrupt.
    static func decode(_ bytes: [UInt8], service: ServiceName) -> Result<(KeyFile, SessionRecord), Corrupt> {
        Result { () throws(Corrupt) in
            let keyFile: KeyFile
            do throws(GLibError) { keyFile = try KeyFile(parsing: bytes) } catch { throw Corrupt(reason: error.message) }
            return (keyFile, try record(in: keyFile, service: service))
        }
    }

    static func record(in keyFile: KeyFile, service: ServiceName) throws(Corrupt) -> SessionRecord {
        func value(_ key: String) throws(Corrupt) -> String? {
            do { return try keyFile.string(group: service.rawValue, key: key) } catch {
                throw Corrupt(reason: "key '\(key)': \(error.message)")
            }
        }
        // A key named twice (a hand edit, or a group written twice, which GLib merges) reads as its
        // last line, but GLib can remove only that one: a sign-out would bring the earlier value
        // back. Such a group is corrupt. Nested loops, not a set: a group has a few dozen keys, and
        // a `Set<String>` costs every command a conformance scan (README, Performance).
        let keys = keyFile.keys(group: service.rawValue)
        for (index, key) in keys.enumerated() where keys[(index + 1)...].contains(where: { $0 == key }) {
            throw Corrupt(reason: "the key '\(key)' appears more than once")
        }
        var record = SessionRecord()
        if let sequence = try value("sequence") {
            guard let number = UInt64(sequence) else { throw Corrupt(reason: "'sequence' is not an unsigned integer") }
            // The next event's number must exist: a file at the limit is as unusable as one
            // with a word there, and must fail before anything is stored.
            guard number < UInt64.max else { throw Corrupt(reason: "'sequence' is at its limit and cannot be incremented") }
            record.sequence = number
        }
        record.binding = try binding(value)
        if let hosts = try value("git-hosts") {
            record.gitHosts = hosts.split(separator: ";").map(String.init)
            guard record.gitHosts.allSatisfy(GitHost.isValid) else { throw Corrupt(reason: "'git-hosts' holds something that is not a host") }
        }
        if let registries = try value("registries") {
            for entry in registries.split(separator: ";") {
                guard let registry = ServedRegistry(String(entry)) else {
                    throw Corrupt(reason: "'registries' holds something that is not a registry (HOST[:PORT][=USERNAME])")
                }
                record.registries.append(registry)
            }
        }
        guard let user = try value("user"), !user.isEmpty else {
            // A hint only: a value this version does not know is no reason.
            record.endedBecause = try value("ended").flatMap(LoginEvent.Reason.init(rawValue:))
            return record
        }
        guard let account = AccountID(rawValue: user) else { throw Corrupt(reason: "'user' is not a valid account id") }
        record.user = account
        let name = try value("name") ?? ""
        guard (try? DisplayName.validate(name)) != nil else { throw Corrupt(reason: "'name' is not a valid display name") }
        record.name = name
        if let signedInAt = try value("signed-in-at") {
            guard Timestamp.isRFC3339UTC(signedInAt) else { throw Corrupt(reason: "'signed-in-at' is not an RFC 3339 UTC time") }
            record.signedInAt = signedInAt
        }
        if record.binding != nil { record.tokenTimes = try tokenTimes(value) }
        if let email = try value("email") {
            guard (try? DisplayName.validate(email)) != nil, !email.isEmpty else { throw Corrupt(reason: "'email' is not a valid e-mail address") }
            record.email = email
        }
        return record
    }

    /// The binding keys; a value authctl would refuse on the command line makes the file corrupt.
    private static func binding(_ value: (String) throws(Corrupt) -> String?) throws(Corrupt) -> ServerBinding? {
        guard let server = try value("server") else { return nil }
        let (tokenProtocol, clientID, scope, revokeURL) = (try value("protocol"), try value("client-id"), try value("scope"),
                                                          try value("revoke-url"))
        let (accountClaim, deviceAuthorizationURL, redirectPort) = (try value("account-claim"), try value("device-authorization-url"),
                                                                    try value("redirect-port"))
        let discovered = try provider(value)
        var binding: ServerBinding
        do throws(AuthError) {
            binding = try ServerBinding(validatingServer: server, protocol: tokenProtocol, clientID: clientID, scope: scope,
                                        revokeURL: revokeURL, accountClaim: accountClaim,
                                        deviceAuthorizationURL: deviceAuthorizationURL, redirectPort: redirectPort)
        } catch {
            throw Corrupt(reason: "the server binding: \(error.message)")
        }
        if let discovered {
            guard Discovery.sameIssuer(discovered.issuer, binding.server) else { throw Corrupt(reason: "'issuer' does not name the server") }
            if binding.tokenProtocol == .oidc { binding.openID?.provider = discovered }
        }
        return binding
    }

    /// What discovery found at an OpenID provider; `nil` before the first discovery (no
    /// `issuer` key). A key that is there must hold what discovery would accept.
    private static func provider(_ value: (String) throws(Corrupt) -> String?) throws(Corrupt) -> OpenIDProvider? {
        guard let issuer = try value("issuer") else { return nil }
        func url(_ key: String) throws(Corrupt) -> ServerURL? {
            guard let text = try value(key) else { return nil }
            guard let url = ServerURL(rawValue: text) else { throw Corrupt(reason: "'\(key)' is not a normalised https URL") }
            return url
        }
        guard let tokenEndpoint = try url("token-endpoint"), let jwksURI = try url("jwks-uri") else {
            throw Corrupt(reason: "'issuer' is there without 'token-endpoint' and 'jwks-uri'")
        }
        return OpenIDProvider(issuer: issuer, tokenEndpoint: tokenEndpoint, authorizationEndpoint: try url("authorization-endpoint"),
                              deviceAuthorizationEndpoint: try url("device-authorization-endpoint"),
                              userinfoEndpoint: try url("userinfo-endpoint"), revocationEndpoint: try url("revocation-endpoint"),
                              jwksURI: jwksURI)
    }

    private static func tokenTimes(_ value: (String) throws(Corrupt) -> String?) throws(Corrupt) -> TokenTimes {
        func time(_ key: String) throws(Corrupt) -> UInt64? {
            guard let text = try value(key) else { return nil }
            guard let microseconds = Timestamp.microseconds(rfc3339: text) else {
                throw Corrupt(reason: "'\(key)' is not an RFC 3339 UTC time")
            }
            return microseconds
        }
        var times = TokenTimes(accessExpiresAt: try time("access-expires-at"), refreshExpiresAt: try time("refresh-expires-at"))
        if let offset = try value("clock-offset") {
            // A server clock decades away is a broken file, not a fact: keep the arithmetic safe.
            guard let seconds = Int64(offset), seconds.magnitude <= TokenTimes.maximumSpan else {
                throw Corrupt(reason: "'clock-offset' is not a whole number of seconds within ten years")
            }
            times.clockOffset = seconds
        }
        if let lifetime = try value("access-lifetime") {
            guard let seconds = UInt64(lifetime), seconds <= TokenTimes.maximumSpan else {
                throw Corrupt(reason: "'access-lifetime' is not a whole number of seconds within ten years")
            }
            times.accessLifetime = seconds
        }
        if let renewable = try value("renewable") {
            guard renewable == "true" || renewable == "false" else { throw Corrupt(reason: "'renewable' is neither true nor false") }
            times.renewable = renewable == "true"
        }
        return times
    }
}
