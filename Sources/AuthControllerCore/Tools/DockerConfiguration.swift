// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
internal import Glibc
internal import SystemPackage

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
        let target = try resolvingLinks(path)
        let existing = try read(target)
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
        try write(bytes, to: target, mode: existing?.mode ?? 0o600)
        return true
    }

    /// The file `path` names, its symbolic links followed (at most 40, as the kernel does), even
    /// to a file that does not exist yet.
    private static func resolvingLinks(_ path: String) throws(AuthError) -> String {
        var current = path
        for _ in 0..<40 {
            let status: Posix.FileStatus?
            do { status = try Posix.lstatus(current) } catch {
                throw .settingsIO("cannot read the Docker configuration \(current): \(error)")
            }
            guard let status, status.isSymbolicLink else { return current }
            guard let target = Posix.readLink(current) else { throw .settingsIO("cannot read the symbolic link \(current)") }
            current = target.hasPrefix("/") ? target : folder(of: current) + "/" + target
        }
        throw .settingsIO("the Docker configuration \(path) is a loop of symbolic links")
    }

    /// The file's bytes and mode; `nil` when there is none.
    private static func read(_ path: String) throws(AuthError) -> (bytes: [UInt8], mode: mode_t)? {
        let descriptor: Int32
        do { descriptor = try Posix.openForReading(path) } catch .noSuchFileOrDirectory {
            return nil
        } catch {
            throw .settingsIO("cannot read the Docker configuration \(path): \(error)")
        }
        defer { Posix.close(descriptor) }
        do {
            let status = try Posix.fstatus(descriptor)
            guard status.isRegularFile else { throw AuthError.settingsIO("the Docker configuration \(path) is not a regular file") }
            let bytes = try Posix.readAll(descriptor, limit: sizeLimit + 1)
            guard bytes.count <= sizeLimit else {
                throw AuthError.invalidInput("the Docker configuration \(path) is over \(sizeLimit / 1024 / 1024) MiB: it is not one docker wrote")
            }
            return (bytes, status.permissions)
        } catch let error as AuthError {
            throw error
        } catch {
            throw .settingsIO("cannot read the Docker configuration \(path): \(error)")
        }
    }

    /// Replaces the file at `path` with `bytes` through a new file beside it, renamed over it.
    private static func write(_ bytes: [UInt8], to path: String, mode: mode_t) throws(AuthError) {
        let directory = folder(of: path)
        do { try makeFolders(directory) } catch {
            throw .settingsIO("cannot make the folder \(directory) of the Docker configuration: \(error)")
        }
        let name = path.split(separator: "/").last.map(String.init) ?? "config.json"
        let temporary = "\(directory)/.\(name).\(Posix.randomBytes(8).map { String($0, radix: 16) }.joined()).tmp"
        do {
            let descriptor = try Posix.createExclusive(temporary, mode: 0o600)
            defer { Posix.close(descriptor) }
            try Posix.fchmod(descriptor, mode)
            try Posix.writeAll(descriptor, bytes)
            try Posix.fsync(descriptor)
            try Posix.rename(temporary, path)
        } catch {
            Posix.unlink(temporary)
            throw .settingsIO("cannot write the Docker configuration \(path): \(error)")
        }
        try? Posix.syncDirectory(directory)
    }

    /// Makes `directory` and each missing folder above it, with mode 0700.
    private static func makeFolders(_ directory: String) throws(Errno) {
        guard try Posix.lstatus(directory) == nil else { return }
        let parent = folder(of: directory)
        if parent != directory { try makeFolders(parent) }
        try Posix.makeDirectory(directory, mode: 0o700)
    }

    private static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
