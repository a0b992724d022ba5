// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The Docker client configuration (`config.json`), which docker, podman, skopeo and buildah
/// read: only its `credHelpers` member is changed, every other member kept, and the file
/// replaced atomically. Plumbing of this package's command line (`package`), not part of the
/// library's API.
package enum DockerConfiguration {
    /// The largest configuration read: docker's own are a few KiB (every `auths` entry a line).
    static let sizeLimit = 4 * 1024 * 1024

    /// Makes `helper` the credential helper of `registry` (`credHelpers`) in the configuration
    /// at `path`; `false`, and nothing is written, when it is already. A missing file counts as
    /// `{}` and is made with mode 0600, its missing folders with 0700; an existing one keeps its
    /// mode. A symbolic link is followed, and the file it names is replaced, as docker does.
    /// A file that is not a JSON object, or whose `credHelpers` is not one, is
    /// ``AuthError/invalidInput(_:)-enum.case``; a file that cannot be read or written,
    /// ``AuthError/settingsIO(_:)-enum.case``. Nothing changes on failure.
    @discardableResult
    package static func setCredentialHelper(_ helper: String, for registry: String, in path: String) throws(AuthError) -> Bool {
        let file = ConfigurationFile(path: path, named: "the Docker configuration", sizeLimit: sizeLimit)
        return try file.locked { (target) throws(AuthError) -> Bool in
            let existing = try file.read(target)
            var document: [String: JSONValue] = [:]
            if let existing, !existing.bytes.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) {
                guard case .object(let members)? = try? JSONDecoder().decode(JSONValue.self, from: Data(existing.bytes)) else {
                    throw .invalidInput("the Docker configuration \(target) is not a JSON object; fix or move it, then run the set-up again")
                }
                document = members
            }
            var helpers: [String: JSONValue] = [:]
            switch document["credHelpers"] {
            case nil, .null?: break
            case .object(let members)?: helpers = members
            default:
                throw .invalidInput("credHelpers in the Docker configuration \(target) is not a JSON object; fix it, then run the set-up again")
            }
            guard helpers[registry] != .string(helper) else { return false }
            helpers[registry] = .string(helper)
            document["credHelpers"] = .object(helpers)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let bytes: [UInt8]
            do { bytes = Array(try encoder.encode(JSONValue.object(document))) + [0x0A] } catch {
                throw .invalidInput("the Docker configuration \(target) holds a value that cannot be written back as JSON")
            }
            try file.write(bytes, to: target, mode: existing?.mode ?? 0o600)
            return true
        }
    }
}
