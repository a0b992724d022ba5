// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
internal import Subprocess
internal import SystemPackage

/// kubectl's configuration (the kubeconfig), changed through `kubectl config` itself, so that
/// `KUBECONFIG` (a list of files) counts as kubectl reads it and the file is kubectl's own
/// format. Plumbing of this package's command line (`package`), not part of the library's API.
package enum KubeConfiguration {
    /// Makes the kubeconfig user `user` run `command` with `arguments` as its exec credential
    /// plugin (API version `client.authentication.k8s.io/v1beta1`), keeping every other entry
    /// and every other field of that user. Running it again leaves the same bytes.
    ///
    /// Any static token or user name and password of that user go: kubectl would send them
    /// instead of running the plugin.
    ///
    /// kubectl missing or failing is ``AuthError/unavailable(_:detail:)-enum.case`` (one that
    /// hangs, ``AuthError/temporaryFailure(_:detail:)-enum.case``), and the
    /// kubeconfig files — `files`, those kubectl reads (`KUBECONFIG`'s, else `~/.kube/config`) —
    /// are then put back as they were.
    package static func setExecCredential(user: String, command: String, arguments: [String], files: [String]) async throws(AuthError) {
        let before = files.map { ($0, try? Posix.readAll(path: $0)) }
        do throws(AuthError) {
            // kubectl 1.20 (Debian 12's) panics on `set-credentials` for a user the file does
            // not have yet; one made with `config set` first is then changed without trouble,
            // and the placeholder goes again, with the user's other credentials.
            if try await fields(of: user) == nil { try await kubectl(["config", "set", "users.\(user).username", "placeholder"]) }
            try await kubectl(["config", "set-credentials", user, "--exec-command=\(command)",
                               "--exec-api-version=\(ExecCredential.APIVersion.v1beta1.rawValue)"]
                              + arguments.map { "--exec-arg=\($0)" })
            // kubectl sends a static token or a user name and password rather than run the
            // plugin: they go (a placeholder left by an interrupted set-up among them).
            for field in try await fields(of: user) ?? [] where Self.competingCredentials.contains(field) {
                try await kubectl(["config", "unset", "users.\(user).\(field)"])
            }
            guard try await fields(of: user)?.contains("exec") == true else {
                throw .unavailable("kubectl config did not keep the exec plugin of the user \(user)")
            }
        } catch {
            for (path, bytes) in before { restore(path, bytes) }
            throw error
        }
    }

    /// Puts a file back as it was: its bytes, or no file. Best effort: it runs while another
    /// failure is being reported.
    private static func restore(_ path: String, _ bytes: [UInt8]?) {
        guard let bytes else {
            Posix.unlink(path)
            return
        }
        guard (try? Posix.readAll(path: path)) != bytes,
              let descriptor = try? FileDescriptor.open(FilePath(path), .writeOnly, options: [.truncate, .noFollow]) else { return }
        _ = try? descriptor.writeAll(bytes)
        try? descriptor.close()
    }

    /// The credentials of a kubeconfig user that kubectl uses before an exec plugin.
    static let competingCredentials: Set<String> = ["token", "tokenFile", "username", "password", "auth-provider"]

    /// The fields of the kubeconfig user `user` (`exec`, `token`, …), as kubectl merges its
    /// files; `nil` when there is no such user.
    private static func fields(of user: String) async throws(AuthError) -> [String]? {
        struct View: Decodable {
            struct User: Decodable {
                var name: String
                var user: [String: JSONValue]?
            }
            var users: [User]?
        }
        let json = try await kubectl(["config", "view", "--raw", "-o", "json"])
        guard let view = try? JSONDecoder().decode(View.self, from: Data(json.utf8)) else {
            throw .unavailable("kubectl config view printed something that is not a kubeconfig")
        }
        return view.users?.last { $0.name == user }.map { entry in
            (entry.user ?? [:]).filter { $0.value != .null }.keys.sorted()
        }
    }

    /// How long one kubectl command may take: it reads and writes a file, asking no server.
    static let kubectlDeadline = Duration.seconds(30)

    /// What kubectl printed on stdout; a failure names its first line on stderr. A kubectl that
    /// has not finished within ``kubectlDeadline`` is killed: a failure.
    @discardableResult
    private static func kubectl(_ arguments: [String]) async throws(AuthError) -> String {
        let outcome = await withTaskGroup(of: Result<String, AuthError>?.self) { group in
            group.addTask {
                do throws(AuthError) { return .success(try await run(arguments)) } catch { return .failure(error) }
            }
            group.addTask {
                try? await Task.sleep(for: kubectlDeadline)
                return nil
            }
            // The first to end: the command, or the deadline, which cancels it (swift-subprocess
            // then kills the child).
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let outcome else {
            throw .temporaryFailure("kubectl \(arguments.prefix(2).joined(separator: " ")) did not finish within \(kubectlDeadline.components.seconds) s")
        }
        return try outcome.get()
    }

    private static func run(_ arguments: [String]) async throws(AuthError) -> String {
        let status: TerminationStatus
        let printed: String?
        let said: String?
        do {
            let result = try await Subprocess.run(.name("kubectl"), arguments: Arguments(arguments), input: .none,
                                                  output: .string(limit: 16 * 1024 * 1024), error: .string(limit: 64 * 1024))
            (status, printed, said) = (result.terminationStatus, result.standardOutput, result.standardError)
        } catch {
            throw .unavailable("cannot run kubectl (\(error)); install kubectl (the Debian package kubernetes-client)")
        }
        guard case .exited(0) = status else {
            // Past kubectl's log lines (`W1127 11:50:24.79 …`): its own message.
            let message = (said ?? "").split(separator: "\n").first { line in
                let bytes = Array(line.utf8.prefix(2))
                return !(bytes.count == 2 && "IWEF".utf8.contains(bytes[0]) && (0x30...0x39).contains(bytes[1]))
            }
            throw .unavailable("kubectl \(arguments.prefix(2).joined(separator: " ")) failed (\(status)): \(TokenExchange.quote(message.map(String.init) ?? ""))")
        }
        return printed ?? ""
    }
}
