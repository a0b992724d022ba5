// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Foundation
import Testing

/// What kubectl and registry clients send, as the library reads it, and what it answers them.
@Suite("kube-credential and docker-credential: requests and answers")
struct ToolCredentialTests {
    @Test("KUBERNETES_EXEC_INFO names the version; without it (or empty), v1beta1")
    func execInfoVersion() throws {
        #expect(try ExecCredential.apiVersion(requestedIn: nil) == .v1beta1)
        #expect(try ExecCredential.apiVersion(requestedIn: "") == .v1beta1)
        let v1 = #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"interactive":false}}"#
        #expect(try ExecCredential.apiVersion(requestedIn: v1) == .v1)
        #expect(try ExecCredential.apiVersion(requestedIn: #"{"apiVersion":"client.authentication.k8s.io/v1beta1"}"#) == .v1beta1)
    }

    @Test("another version, no apiVersion, or not JSON is refused (65)", arguments: [
        #"{"apiVersion":"client.authentication.k8s.io/v1alpha1"}"#, #"{"kind":"ExecCredential"}"#, "[]", "v1", #"{"apiVersion":1}"#,
        #"{"apiVersion":"client.authentication.k8s.io/v1\u0000"}"#, String(repeating: "[", count: 100_000),
    ])
    func execInfoRefused(_ text: String) {
        #expect { try ExecCredential.apiVersion(requestedIn: text) } throws: { error in
            if case AuthError.invalidInput = error { true } else { false }
        }
    }

    @Test("the ExecCredential carries the version asked for, the token, and the expiry in RFC 3339 whole seconds")
    func execCredentialJSON() throws {
        let credential = ExecCredential(apiVersion: .v1, token: "t0k", expiresAt: Date(timeIntervalSince1970: 1_800_000_000.75))
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(credential)) as? [String: Any]
        #expect(object?["apiVersion"] as? String == "client.authentication.k8s.io/v1")
        #expect(object?["kind"] as? String == "ExecCredential")
        let status = object?["status"] as? [String: Any]
        #expect(status?["token"] as? String == "t0k")
        #expect(status?["expirationTimestamp"] as? String == "2027-01-15T08:00:00Z")
        let unknown = try JSONSerialization.jsonObject(with: JSONEncoder().encode(ExecCredential(apiVersion: .v1beta1, token: "t", expiresAt: nil))) as? [String: Any]
        #expect((unknown?["status"] as? [String: Any])?.keys.sorted() == ["token"])
    }

    @Test("a registry as clients send it: bare or a URL, any case, white space around it, :443 the same registry", arguments: [
        ("registry.example.org", "registry.example.org"), ("  Registry.Example.ORG\n", "registry.example.org"),
        ("https://registry.example.org/v2/", "registry.example.org"), ("http://127.0.0.1:5000", "127.0.0.1:5000"),
("[::1]:5000", "[::1]:5000"), ("HTTPS://[::1]/x?y", "[::1]"),
        ("localhost:5000/library/alpine", "localhost:5000"),
    ])
    func registryHosts(_ text: String, _ expected: String) throws {
        #expect(RegistryHost(text)?.rawValue == expected)
    }

    @Test("what is not a registry is nobody's", arguments: [
        "", " ", "user@registry.example.org", "registry.example.org:0", "registry.example.org:65536", "registry.example.org:x",
        "rеgistry.example.org", "registry example.org", "://registry.example.org", "[::1", "[zz]:5000", "a:1:2", "registry;x",
        String(repeating: "a", count: 300), "registry.example.org\u{0}", ".", "..", "a..b", ".registry", "[:]", "[1:2:3:4:5:6:7:8:9]",
        "registry.example.org:00080", "registry.example.org:0443",
    ])
    func notRegistries(_ text: String) {
        #expect(RegistryHost(text) == nil)
    }

    @Test("HOST and HOST:443 are one registry; other ports are others")
    func sameRegistry() throws {
        let bare = try #require(RegistryHost("registry.example.org"))
        #expect(bare.isSameRegistry(as: try #require(RegistryHost("https://registry.example.org:443/"))))
        #expect(!bare.isSameRegistry(as: try #require(RegistryHost("registry.example.org:5000"))))
    }

    @Test("a served registry is kept as HOST[:PORT][=USERNAME]; user names are plain")
    func servedRegistries() throws {
        let host = try #require(RegistryHost("gcr.io"))
        #expect(ServedRegistry(host: host, username: "oauth2accesstoken")?.description == "gcr.io=oauth2accesstoken")
        #expect(ServedRegistry("gcr.io=oauth2accesstoken") == ServedRegistry(host: host, username: "oauth2accesstoken"))
        #expect(ServedRegistry("GCR.io") == nil)
        for bad in ["", "a b", "a;b", "a=b", "ünï", String(repeating: "u", count: 256)] {
            #expect(ServedRegistry(host: host, username: bad) == nil, "\(bad)")
        }
    }

    @Test("the Docker credential answers with the protocol's three members, nothing else")
    func dockerCredentialJSON() throws {
        let credential = DockerCredential(serverURL: "https://gcr.io", username: "oauth2accesstoken", secret: "s3cret",
                                          service: ServiceName(rawValue: "io.github.authctl")!, warnings: ["w"])
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(credential)) as? [String: String]
        #expect(object == ["ServerURL": "https://gcr.io", "Username": "oauth2accesstoken", "Secret": "s3cret"])
    }
}

/// `docker-credential setup`'s edit of the Docker configuration.
@Suite("The Docker configuration: credHelpers only, atomically")
struct DockerConfigurationTests {
    private let folder: URL = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docker-config-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }()

    private func object(at path: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
    }

    private func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test("a missing file and folder are made (0600 and 0700); twice the same writes nothing")
    func newFile() throws {
        let path = folder.path + "/new/.docker/config.json"
        #expect(try DockerConfiguration.setCredentialHelper("authctl", for: "gcr.io", in: path))
        #expect(try object(at: path)["credHelpers"] as? [String: String] == ["gcr.io": "authctl"])
        #expect(try mode(path) == 0o600)
        #expect(try mode(folder.path + "/new/.docker") == 0o700)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 0)], ofItemAtPath: path)
        #expect(try !DockerConfiguration.setCredentialHelper("authctl", for: "gcr.io", in: path))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) == Date(timeIntervalSince1970: 0))
    }

    @Test("every other member keeps its value, big integers and nesting included; the mode is kept")
    func othersKept() throws {
        let path = folder.path + "/config.json"
        let original = #"{"auths":{"ghcr.io":{"auth":"dTpw"}},"credHelpers":{"quay.io":"secretservice"},"psFormat":"table {{.ID}}\/x","n":9007199254740993,"f":1.5,"neg":-3,"b":false,"z":null,"a":[1,"two",{"three":[]}]}"#
        try Data(original.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: path)
        #expect(try DockerConfiguration.setCredentialHelper("authctl", for: "gcr.io", in: path))
        let after = try object(at: path)
        let before = try #require(try JSONSerialization.jsonObject(with: Data(original.utf8)) as? [String: Any])
        for key in before.keys where key != "credHelpers" {
            #expect(String(describing: after[key]) == String(describing: before[key]), "\(key)")
        }
        #expect(after["credHelpers"] as? [String: String] == ["quay.io": "secretservice", "gcr.io": "authctl"])
        #expect(try String(contentsOfFile: path, encoding: .utf8).contains("9007199254740993"))
        #expect(try mode(path) == 0o640)
    }

    @Test("an empty file counts as {}")
    func emptyFile() throws {
        let path = folder.path + "/config.json"
        try Data("  \n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try DockerConfiguration.setCredentialHelper("authctl", for: "gcr.io", in: path))
        #expect(try object(at: path).keys.sorted() == ["credHelpers"])
    }

    @Test("not a JSON object, or credHelpers not an object: 65, and the file is as it was", arguments: [
        "not json", "[]", "\"text\"", #"{"credHelpers":[]}"#, #"{"credHelpers":"authctl"}"#, #"{"a":1"#, "{\"a\":\"\u{1}\"}",
    ])
    func notAnObject(_ contents: String) throws {
        let path = folder.path + "/config.json"
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        #expect { try DockerConfiguration.setCredentialHelper("authctl", for: "gcr.io", in: path) } throws: { error in
            if case AuthError.invalidInput = error { true } else { false }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(contents.utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["config.json"])
    }

    @Test("a symbolic link is followed: the file it names is replaced, the link stays")
    func symbolicLink() throws {
        let target = folder.path + "/dotfiles/docker.json"
        try FileManager.default.createDirectory(atPath: folder.path + "/dotfiles", withIntermediateDirectories: true)
        try Data(#"{"auths":{}}"#.utf8).write(to: URL(fileURLWithPath: target))
        let link = folder.path + "/config.json"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "dotfiles/docker.json")
        #expect(try DockerConfiguration.setCredentialHelper("authctl", for: "gcr.io", in: link))
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "dotfiles/docker.json")
        #expect(try object(at: target)["credHelpers"] as? [String: String] == ["gcr.io": "authctl"])
    }

    @Test("a loop of links, a folder, or a folder it cannot write is an I/O failure (74) that changes nothing")
    func unwritable() throws {
        let loop = folder.path + "/loop.json"
        try FileManager.default.createSymbolicLink(atPath: loop, withDestinationPath: "loop.json")
        #expect { try DockerConfiguration.setCredentialHelper("authctl", for: "gcr.io", in: loop) } throws: { error in
            if case AuthError.settingsIO = error { true } else { false }
        }
        let directory = folder.path + "/dir.json"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        #expect { try DockerConfiguration.setCredentialHelper("authctl", for: "gcr.io", in: directory) } throws: { error in
            if case AuthError.settingsIO = error { true } else { false }
        }
        let underFile = folder.path + "/file/config.json"
        try Data().write(to: URL(fileURLWithPath: folder.path + "/file"))
        #expect { try DockerConfiguration.setCredentialHelper("authctl", for: "gcr.io", in: underFile) } throws: { error in
            if case AuthError.settingsIO = error { true } else { false }
        }
    }
}
