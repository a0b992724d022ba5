// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// What the other tools hand authctl: git's credential request, docker's configuration file,
/// kubectl's `KUBERNETES_EXEC_INFO`.
enum ToolChecks {
    /// git's request: only what comes before the blank line counts, and the values read are
    /// those that, written back as git writes them, read the same.
    @Sendable static func gitCredential(_ input: [UInt8]) throws(PropertyViolation) {
        guard let request = try? GitCredentialRequest(parsing: input) else { return }
        if let end = GitCredentialRequest.blankLine(in: input) {
            let beforeBlank = try? GitCredentialRequest(parsing: Array(input[..<end]))
            try require(beforeBlank?.values == request.values, "what follows the blank line changed the request")
        }
        for (key, value) in request.values {
            try require(!key.utf8.contains(0x0A) && !value.utf8.contains(0x0A) && !value.utf8.contains(0), "a key or value with a newline or NUL")
            try require(!key.utf8.contains(UInt8(ascii: "=")), "a key with '='")
        }
        var written: [UInt8] = []
        for key in request.values.keys.sorted() { written += Array("\(key)=\(request.values[key]!)\n".utf8) }
        let again = try? GitCredentialRequest(parsing: written)
        try require(again?.values == request.values, "a request written back as git writes it reads differently")
        if request.isSafeTransport {
            let loopback = request.host.flatMap { try? ServerURL(validating: "http://\($0)/") }?.isLoopback ?? false
            try require(request.values["protocol"] == "https" || (request.values["protocol"] == "http" && loopback),
                        "a token would go in the clear to \(request.host ?? "no host")")
        }
    }

    /// A folder of this process's own for the configuration files.
    private static let folder: String = {
        let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
        let path = "\(base)/authctl-fuzz-docker-\(getpid())"
        mkdir(path, 0o700)
        return path
    }()

    /// docker's `config.json` as the input, given authctl as a registry's helper: a refusal leaves
    /// the file's bytes as they were; a change keeps every other member and is not made twice.
    @Sendable static func dockerConfiguration(_ input: [UInt8]) throws(PropertyViolation) {
        let path = folder + "/config.json"
        let registry = "registry.example.com"
        unlink(path)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        precondition(descriptor >= 0, "docker-config: cannot write \(path)")
        _ = input.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        let changed: Bool
        do {
            changed = try DockerConfiguration.setCredentialHelper("authctl", for: registry, in: path)
        } catch {
            try requireQuoted(error, "the Docker configuration")
            try require((try? Posix.readAll(path: path)) == input, "a refused configuration was changed")
            try require((try? FileManager.default.contentsOfDirectory(atPath: folder)) == ["config.json"], "a refusal left a file behind")
            return
        }
        let bytes = (try? Posix.readAll(path: path)) ?? []
        guard changed else {
            try require(bytes == input, "a configuration that needed no change was rewritten")
            return
        }
        guard case .object(var after)? = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)) else {
            throw PropertyViolation(description: "the configuration written is not a JSON object")
        }
        var before: [String: JSONValue] = [:]
        if case .object(let members)? = try? JSONDecoder().decode(JSONValue.self, from: Data(input)) { before = members }
        guard case .object(var helpersAfter)? = after.removeValue(forKey: "credHelpers") else {
            throw PropertyViolation(description: "the configuration written has no credHelpers object")
        }
        try require(helpersAfter.removeValue(forKey: registry) == .string("authctl"), "the helper was not set")
        var helpersBefore: [String: JSONValue] = [:]
        if case .object(let members)? = before.removeValue(forKey: "credHelpers") { helpersBefore = members }
        helpersBefore.removeValue(forKey: registry)
        try require(after == before && helpersAfter == helpersBefore, "the other members changed when the helper was set")
        let twice = try? DockerConfiguration.setCredentialHelper("authctl", for: registry, in: path)
        try require(twice == false, "setting the helper a second time changed the file again")
    }

    /// kubectl's `KUBERNETES_EXEC_INFO`: a version is one authctl speaks; a refusal says nothing
    /// unquoted from the variable.
    @Sendable static func kubernetesExecInfo(_ input: [UInt8]) throws(PropertyViolation) {
        let text = String(decoding: input, as: UTF8.self)
        let version: ExecCredential.APIVersion
        do { version = try ExecCredential.apiVersion(requestedIn: text) } catch {
            try requireQuoted(error, "KUBERNETES_EXEC_INFO")
            return
        }
        try require(ExecCredential.APIVersion.allCases.contains(version), "a version authctl does not speak")
    }
}
