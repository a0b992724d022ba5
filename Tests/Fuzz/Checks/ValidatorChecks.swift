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
        switch selector % 10 {
        case 0:
            guard let name = ServiceName(rawValue: text) else { return }
            try require(ServiceName(rawValue: name.rawValue) == name && name.rawValue == text, "a service name spelt two ways")
        case 1:
            guard let account = AccountID(rawValue: text) else { return }
            try require(AccountID(rawValue: account.rawValue) == account, "an account id that does not validate again")
            try require(!account.rawValue.unicodeScalars.contains(where: isControl), "an account id with a control character")
        case 2:
            guard let url = try? ServerURL(validating: text) else { return }
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
            guard let (url, host) = try? GitHost.parse(setupURL: text) else { return }
            try require(GitHost.isValid(host), "a git host that is not valid: \(host)")
            let again = try? GitHost.parse(setupURL: url.rawValue)
            try require(again?.url == url && again?.host == host, "a git URL that parses again as another: \(url.rawValue)")
        case 6:
            let parts = texts(Array(input.dropFirst()), count: 5)
            func optional(_ text: String) -> String? { text.isEmpty ? nil : text }
            guard let binding = try? ServerBinding(validatingServer: parts[0], protocol: optional(parts[1]), clientID: optional(parts[2]),
                                                   scope: optional(parts[3]), revokeURL: optional(parts[4])) else { return }
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
        default:
            _ = HTTPDate.microseconds(imfFixdate: text)
            _ = try? OpenIDOptions(validatingAccountClaim: text, deviceAuthorizationURL: nil, redirectPort: text)
        }
    }
}
