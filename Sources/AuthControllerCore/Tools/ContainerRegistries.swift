// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// A container registry as docker, podman and skopeo name it to a credential helper: `HOST` or
/// `HOST:PORT`, in lower case.
package struct RegistryHost: Hashable, Sendable, CustomStringConvertible {
    /// `host` or `host:port`, in lower case, the port as written.
    package let rawValue: String

    /// The registry that `text` names, as a client sends it or a person types it: a bare
    /// `HOST[:PORT]`, or a URL whose scheme and path are ignored, in any case, with white space
    /// around it. The host is a DNS name or IPv4 address of letters, digits, `.`, `-` and `_`,
    /// or an IPv6 address in brackets; a port is 1–65535, without leading zeros. `nil` for anything else (a user name
    /// or a character outside ASCII among them: a look-alike is another registry).
    package init?(_ text: String) {
        var authority = Substring(text.trimmingWhiteSpace)
        let schemeParts = authority.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        if schemeParts.count == 2 {
            let scheme = schemeParts[0]
            guard !scheme.isEmpty, scheme.utf8.allSatisfy({ $0.isASCIILetterOrDigit || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") })
            else { return nil }
            authority = schemeParts[1]
        }
        if let pathStart = authority.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            authority = authority[..<pathStart]
        }
        guard (1...261).contains(authority.utf8.count) else { return nil }
        let lowered = String(authority).lowercasedASCII
        let host: Substring
        let port: Substring?
        if lowered.hasPrefix("[") {
            guard let close = lowered.firstIndex(of: "]") else { return nil }
            host = lowered[...close]
            let rest = lowered[lowered.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return nil }
            port = rest.isEmpty ? nil : rest.dropFirst()
            let address = host.dropFirst().dropLast()
            guard address.utf8.allSatisfy({ $0.isASCIIHexDigit || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }),
                  address.utf8.count >= 2, address.contains(":"), address.split(separator: ":", omittingEmptySubsequences: false).count <= 8
            else { return nil }
        } else {
            let parts = lowered.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            host = parts[0]
            port = parts.count == 2 ? parts[1] : nil
            // Labels of a DNS name (or an IPv4 address), none of them empty: `.`, `..` and `a..b`
            // name nothing.
            guard (1...253).contains(host.utf8.count), host.utf8.allSatisfy({
                $0.isASCIILetterOrDigit || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
            }), !host.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) else { return nil }
        }
        if let port {
            // Written as clients write it: a port with leading zeros is another key to them.
            guard (1...5).contains(port.utf8.count), port.utf8.allSatisfy({ (0x30...0x39).contains($0) }), !port.hasPrefix("0"),
                  let number = Int(port), (1...65535).contains(number) else { return nil }
            rawValue = "\(host):\(number)"
        } else {
            rawValue = String(host)
        }
    }

    /// The registry without its port when that is 443, which clients leave out: `HOST` and
    /// `HOST:443` are one registry.
    var identity: Substring {
        rawValue.hasSuffix(":443") ? rawValue.dropLast(4) : Substring(rawValue)
    }

    /// Whether `other` is the same registry: `HOST` is `HOST:443`.
    package func isSameRegistry(as other: RegistryHost) -> Bool { identity == other.identity }

    /// `host` or `host:port`, as kept.
    package var description: String { rawValue }
}

/// A registry a service serves, with the user name it is given, if any.
package struct ServedRegistry: Equatable, Sendable, CustomStringConvertible {
    /// The registry.
    package var host: RegistryHost
    /// The user name to answer with instead of the account id: registries that take a token as
    /// the password want a fixed one (Google's `oauth2accesstoken`, GitLab's `oauth2`).
    package var username: String?

    /// A registry and the user name to answer with; `nil` when `username` is not 1–255 of the
    /// letters, digits and `.`, `_`, `-`, `@`, `+`, `~`.
    package init?(host: RegistryHost, username: String? = nil) {
        if let username, !Self.isValid(username: username) { return nil }
        self.host = host
        self.username = username
    }

    /// `HOST[:PORT][=USERNAME]`, as the settings keep it.
    init?(_ text: String) {
        let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard let host = RegistryHost(String(parts[0])), host.rawValue == parts[0] else { return nil }
        self.init(host: host, username: parts.count == 2 ? String(parts[1]) : nil)
    }

    /// `HOST[:PORT][=USERNAME]`, as the settings keep it.
    package var description: String { host.rawValue + (username.map { "=" + $0 } ?? "") }

    static func isValid(username: String) -> Bool {
        (1...255).contains(username.utf8.count) && username.utf8.allSatisfy { byte in
            byte.isASCIILetterOrDigit || [UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "@"),
                                          UInt8(ascii: "+"), UInt8(ascii: "~")].contains(byte)
        }
    }
}

/// What a Docker credential helper answers to `get`: the registry as the client named it, a
/// user name, and the session's access token as the password.
package struct DockerCredential: Equatable, Sendable, Encodable {
    /// The registry, as the client sent it.
    package var serverURL: String
    /// The registry's fixed user name, else the signed-in account id.
    package var username: String
    /// The access token.
    package var secret: String
    /// The service whose session it is (not part of the answer).
    package var service: ServiceName
    /// Notes for the person (not part of the answer): e.g. the server could not be reached, so
    /// a still-valid token is handed out unrefreshed.
    package var warnings: [AuthError.Message]

    private enum CodingKeys: String, CodingKey {
        case serverURL = "ServerURL"
        case username = "Username"
        case secret = "Secret"
    }

    /// `{"ServerURL":…,"Username":…,"Secret":…}`, the protocol's answer to `get`.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(serverURL, forKey: .serverURL)
        try container.encode(username, forKey: .username)
        try container.encode(secret, forKey: .secret)
    }
}

/// The registries of every service, which the Docker credential helper answers for: a registry
/// is served by the one service that lists it, whichever service the controller is of.
extension AuthController {
    /// The registries this service serves. Blocks briefly on the settings file; never prompts.
    package func registries() throws(AuthError) -> [ServedRegistry] {
        try intactRecord().registries
    }

    /// Adds `registry` to the registries this service serves; `false` when it serves it
    /// already, with that user name. ``AuthError/invalidInput(_:)-enum.case`` when the service is
    /// not bound to a token server or another service serves the registry; nothing changes
    /// then. Blocks on the settings lock.
    @discardableResult
    package func addRegistry(_ registry: ServedRegistry) throws(AuthError) -> Bool {
        try changeKeptLists(unbound: "\(service) is not bound to a token server, so it has no token to give a registry; \(hint: .bindServer)") { record throws(AuthError) in
            if let other = try self.service(servingRegistry: registry.host), other != service {
                throw .invalidInput("\(other) already serves the registry \(registry.host); a registry gets the token of one service")
            }
            if let index = record.registries.firstIndex(where: { $0.host.isSameRegistry(as: registry.host) }) {
                guard record.registries[index] != registry else { return false }
                record.registries[index] = registry
            } else {
                record.registries.append(registry)
            }
            return true
        }
    }

    /// Removes `host` from the registries this service serves; `false` when it did not serve it.
    /// Blocks on the settings lock.
    @discardableResult
    package func removeRegistry(_ host: RegistryHost) throws(AuthError) -> Bool {
        try changeKeptLists { record in
            let count = record.registries.count
            record.registries.removeAll { $0.host.isSameRegistry(as: host) }
            return record.registries.count != count
        }
    }

    /// The access token for the registry a client named as `serverURL` (see
    /// ``RegistryHost/init(_:)``), from the service that serves it, refreshed when due exactly as
    /// ``accessToken(minValid:forceRefresh:checkingIDToken:)`` refreshes it; `nil` when no
    /// service serves it. Its service with nobody signed in, or a session the refresh finds
    /// ended, is ``AuthError/notSignedIn(_:)-enum.case`` with the sign-in to run. Never prompts.
    package func dockerCredential(forRegistry serverURL: String) async throws(AuthError) -> DockerCredential? {
        guard let host = RegistryHost(serverURL),
              let (service, registry) = try await offload({ () throws(AuthError) in try self.servingEntry(of: host) }) else { return nil }
        let controller = controller(of: service)
        let token: AccessToken
        do {
            token = try await controller.accessToken()
        } catch {
            switch error {
            case .notSignedIn(let message), .denied(let message):
                throw .notSignedIn("\(message); \(hint: .signIn(service))")
            default:
                throw error
            }
        }
        return DockerCredential(serverURL: serverURL.trimmingWhiteSpace, username: registry.username ?? token.account.rawValue,
                                secret: token.token, service: service, warnings: token.warnings)
    }

    /// Makes the next ``dockerCredential(forRegistry:)`` for the registry a client named as
    /// `serverURL` refresh the token, as a client's `erase` asks after the registry refused it;
    /// `false` when no service serves the registry. Never prompts.
    @discardableResult
    package func expireDockerCredential(forRegistry serverURL: String) throws(AuthError) -> Bool {
        guard let host = RegistryHost(serverURL), let (service, _) = try servingEntry(of: host) else { return false }
        try controller(of: service).expireAccessToken()
        return true
    }

    /// Every registry of every service that someone is signed in to, with the user name a
    /// ``dockerCredential(forRegistry:)`` answers with: by service name, then as listed.
    package func dockerCredentialUsers() throws(AuthError) -> [(registry: RegistryHost, username: String)] {
        let reads = try settings.readAll()
        return reads.keys.sorted { $0.rawValue < $1.rawValue }.flatMap { service -> [(registry: RegistryHost, username: String)] in
            guard let read = reads[service], read.corruption == nil, let user = read.record.user else { return [] }
            return read.record.registries.map { ($0.host, $0.username ?? user.rawValue) }
        }
    }

    /// The service whose `registries` list `host`, if any. Blocks briefly on the settings file.
    package func service(servingRegistry host: RegistryHost) throws(AuthError) -> ServiceName? {
        try servingEntry(of: host)?.service
    }

    /// The service whose `registries` list `host`, and its entry there. A corrupt group serves
    /// nothing. Blocks briefly on the settings file.
    private func servingEntry(of host: RegistryHost) throws(AuthError) -> (service: ServiceName, registry: ServedRegistry)? {
        // The usual case, the registry of this controller's own service, needs no read of every group.
        if let entry = try? intactRecord().registries.first(where: { $0.host.isSameRegistry(as: host) }) {
            return (service, entry)
        }
        for (service, read) in try settings.readAll() where read.corruption == nil {
            if let entry = read.record.registries.first(where: { $0.host.isSameRegistry(as: host) }) { return (service, entry) }
        }
        return nil
    }
}

extension UInt8 {
    var isASCIILetterOrDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self)
    }

    var isASCIIHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}

extension String {
    /// Without the white space (spaces, tabs, line ends) at either end.
    var trimmingWhiteSpace: String {
        let isSpace: (Character) -> Bool = { $0.isWhitespace }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }

    /// ASCII letters in lower case; every other character as it is.
    var lowercasedASCII: String {
        String(decoding: utf8.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }
}
