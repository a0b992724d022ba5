// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore

/// The validators and normalisers of names, URLs and hosts that come from outside (the
/// settings file, a provider, git, docker, the environment): what one accepts, it accepts again
/// unchanged, so a value has one spelling wherever it is stored or compared. The first byte
/// picks the validator; the rest is its text.
enum ValidatorChecks {
    @Sendable static func validators(_ input: [UInt8]) throws(PropertyViolation) {
        guard let selector = input.first else { return }
        let text = String(decoding: input.dropFirst(), as: UTF8.self)
        switch selector % 12 {
        case 0:
            guard let name = ServiceName(rawValue: text) else { return }
            try require(ServiceName(rawValue: name.rawValue) == name && name.rawValue == text, "a service name spelt two ways")
        case 1:
            guard let account = AccountID(rawValue: text) else { return }
            try require(AccountID(rawValue: account.rawValue) == account, "an account id that does not validate again")
            try require(!account.rawValue.unicodeScalars.contains(where: isControl), "an account id with a control character")
        case 2:
            let url: ServerURL
            do { url = try ServerURL(validating: text) } catch { return try requireQuoted(error, "a server URL refused") }
            try require(ServerURL(rawValue: url.rawValue) == url, "a normalised URL that normalises to another: \(text.debugDescription) → \(url.rawValue)")
            try require(url.rawValue.hasPrefix("https://") || (url.rawValue.hasPrefix("http://") && url.isLoopback),
                        "plain http off the machine: \(url.rawValue)")
        case 3:
            guard let registry = RegistryHost(text) else { return }
            try require(RegistryHost(registry.rawValue) == registry, "a registry that reads as another: \(registry.rawValue)")
        case 4:
            guard let served = ServedRegistry(text) else { return }
            try require(ServedRegistry(served.description) == served, "a served registry that reads back as another: \(served.description)")
        case 5:
            let (url, host): (ServerURL, String)
            do { (url, host) = try GitHost.parse(setupURL: text) } catch { return try requireQuoted(error, "a git URL refused") }
            try require(GitHost.isValid(host), "a git host that is not valid: \(host)")
            let again = try? GitHost.parse(setupURL: url.rawValue)
            try require(again?.url == url && again?.host == host, "a git URL that parses again as another: \(url.rawValue)")
        case 6:
            let parts = texts(Array(input.dropFirst()), count: 5)
            func optional(_ text: String) -> String? { text.isEmpty ? nil : text }
            let binding: ServerBinding
            do {
                binding = try ServerBinding(validatingServer: parts[0], protocol: optional(parts[1]), clientID: optional(parts[2]),
                                            scope: optional(parts[3]), revokeURL: optional(parts[4]))
            } catch {
                return try requireQuoted(error, "a server binding refused")
            }
            let again = try? ServerBinding(validatingServer: binding.server.rawValue, protocol: binding.tokenProtocol.rawValue,
                                           clientID: binding.clientID, scope: binding.scope, revokeURL: binding.revokeURL?.rawValue)
            try require(again == binding, "a server binding that validates again as another")
        case 7:
            guard let address = BareBusConnection.socketAddress(of: text) else { return }
            switch address {
            case .path(let bytes), .abstract(let bytes):
                try require(!bytes.isEmpty && !bytes.contains(0), "a socket name that is empty or holds a NUL")
            }
        case 8:
            guard let microseconds = Timestamp.microseconds(rfc3339: text) else { return }
            let written = Timestamp.rfc3339(microseconds: microseconds)
            // Written in whole seconds, by design.
            try require(Timestamp.microseconds(rfc3339: written) == microseconds / 1_000_000 * 1_000_000,
                        "a time that reads back as another: \(text) → \(written)")
        case 9:
            // An AWS role as `aws-credential` takes it: ARN, duration (two bytes), session name,
            // region and STS endpoint.
            let parts = texts(Array(input.dropFirst()), count: 5)
            func optional(_ text: String) -> String? { text.isEmpty ? nil : text }
            let duration = parts[1].isEmpty ? nil : parts[1].utf8.reduce(0) { ($0 << 8 | Int($1)) & 0xFFFF }
            let role: AuthController.AWSRole
            do {
                role = try AuthController.AWSRole(arn: parts[0], duration: duration, sessionName: optional(parts[2]), region: optional(parts[3]),
                                                  stsEndpoint: optional(parts[4]))
            } catch {
                try requireQuoted(error, "an AWS role refused")
                return
            }
            try require(AuthController.AWSRole.isRoleARN(role.arn) && role.arn.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F },
                        "a role ARN with a byte a config line or shell would read otherwise: \(role.arn.debugDescription)")
            try require(role.stsEndpoint.rawValue.hasPrefix("https://") || role.stsEndpoint.isLoopback,
                        "plain http off the machine: \(role.stsEndpoint.rawValue)")
            if parts[4].isEmpty, let region = optional(parts[3]) {
                try require(role.stsEndpoint.rawValue == "https://sts.\(region).amazonaws.com/", "the endpoint of region \(region): \(role.stsEndpoint.rawValue)")
            }
            let again = try? AuthController.AWSRole(arn: role.arn, duration: role.duration, sessionName: role.sessionName,
                                                    stsEndpoint: role.stsEndpoint.rawValue)
            try require(again == role, "an AWS role that validates again as another")
        case 10:
            // The session name STS is given for any account id: always one STS takes.
            guard let account = AccountID(rawValue: text),
                  let role = try? AuthController.AWSRole(arn: "arn:aws:iam::123456789012:role/r") else { return }
            let name = role.sessionName(for: account)
            try require(AuthController.AWSRole.isSessionName(name), "a session name STS refuses: \(name.debugDescription) for \(text.debugDescription)")
        default:
            _ = HTTPDate.microseconds(imfFixdate: text)
            do {
                _ = try OpenIDOptions(validatingAccountClaim: text, deviceAuthorizationURL: text, redirectPort: text)
            } catch {
                try requireQuoted(error, "OpenID options refused")
            }
        }
    }
}
