// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

/// The D-Bus introspection XML of data/ through the tools that consume it: gdbus-codegen, whose
/// output is committed as Sources/CAuthctlBus, and Qt's qdbusxml2cpp, as a Qt program would use it.
@Suite("D-Bus introspection XML through gdbus-codegen and qdbusxml2cpp")
struct InterfaceToolTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let files = ["io.github.authctl.AuthController1.xml", "io.github.authctl.Session1.xml"]

    @Test("Sources/CAuthctlBus is exactly what gdbus-codegen makes of data/*.xml")
    func skeletonsMatch() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // The command of `make interfaces`, writing into the temporary folder.
        let run = try await Self.run(try which("gdbus-codegen", package: "libglib2.0-dev-bin"),
                                     ["--interface-prefix", "io.github.authctl.", "--c-namespace", "Authctl", "--generate-c-code", "authctl-bus"]
                                         + Self.files.map { Self.root.appendingPathComponent("data/" + $0).path },
                                     in: folder)
        try #require(run.status == 0, "gdbus-codegen failed: \(run.stderr)")
        for (generated, committed) in [("authctl-bus.c", "Sources/CAuthctlBus/authctl-bus.c"),
                                       ("authctl-bus.h", "Sources/CAuthctlBus/include/authctl-bus.h")] {
            let fresh = try Data(contentsOf: folder.appendingPathComponent(generated))
            let current = try? Data(contentsOf: Self.root.appendingPathComponent(committed))
            #expect(fresh == current,
                    "\(committed) is not what gdbus-codegen makes of data/*.xml: run `make interfaces` and commit the result")
        }
    }

    /// Debian 12's qt6-base-dev-tools puts it outside PATH.
    static let qdbusxml2cpp = "/usr/lib/qt6/bin/qdbusxml2cpp"

    @Test("Qt's qdbusxml2cpp makes a proxy (-p) and an adaptor (-a) of each file, without a warning",
          arguments: files, ["-p", "-a"])
    func qtAccepts(_ file: String, _ mode: String) async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.qdbusxml2cpp),
                "\(Self.qdbusxml2cpp) is missing: install the Debian package qt6-base-dev-tools")
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = Self.root.appendingPathComponent("data/" + file)
        let run = try await Self.run(Self.qdbusxml2cpp, [mode, "generated", source.path], in: folder)
        // It exits 0 after some warnings (an In annotation where it wants Out), so stderr counts too.
        #expect(run.status == 0, "qdbusxml2cpp \(mode) \(file): exit \(run.status)\n\(run.stderr)")
        #expect(run.stderr.isEmpty, "qdbusxml2cpp \(mode) \(file): exit \(run.status)\n\(run.stderr)")
        let header = try String(contentsOf: folder.appendingPathComponent("generated.h"), encoding: .utf8)
        // The declarations, not the adaptor's copy of the XML (lines that are string literals).
        let declarations = header.split(separator: "\n").filter { !$0.drop { $0 == " " }.hasPrefix("\"") }
        let xml = try String(contentsOf: source, encoding: .utf8)
        for (member, dictionaries) in Self.dictionaryArguments(xml) {
            let lines = declarations.filter { $0.contains(" \(member)(") }
            #expect(!lines.isEmpty, "qdbusxml2cpp \(mode) \(file): no declaration of \(member)")
            for line in lines {
                #expect(line.components(separatedBy: "QVariantMap").count - 1 == dictionaries,
                        "qdbusxml2cpp \(mode) \(file): \(member) should take or give QVariantMap for its \(dictionaries) a{sv}: \(line)")
            }
        }
    }

    @Test("every a{sv} the files declare is seen by the Qt check")
    func dictionariesFound() throws {
        let xml = try String(contentsOf: Self.root.appendingPathComponent("data/" + Self.files[0]), encoding: .utf8)
        #expect(Self.dictionaryArguments(xml).sorted { $0.member < $1.member }.map { "\($0.member) \($0.count)" }
                == ["GetStatus 1", "LoginStatusChanged 1"])
        let all = try Self.files.map { try String(contentsOf: Self.root.appendingPathComponent("data/" + $0), encoding: .utf8) }.joined()
        #expect(all.components(separatedBy: #"type="a{sv}""#).count - 1 == 2)
    }

    /// The methods and signals with `a{sv}` arguments, and how many each has.
    static func dictionaryArguments(_ xml: String) -> [(member: String, count: Int)] {
        var result: [(member: String, count: Int)] = []
        for kind in ["method", "signal"] {
            for block in xml.components(separatedBy: "<\(kind) name=\"").dropFirst() {
                let name = String(block.prefix { $0 != "\"" })
                let body = block.components(separatedBy: "</\(kind)>")[0]
                let count = body.components(separatedBy: #"type="a{sv}""#).count - 1
                if count > 0 { result.append((name, count)) }
            }
        }
        return result
    }

    /// Runs `path` with `arguments` in `folder` (the tools write their output into the current
    /// folder), at most a minute.
    static func run(_ path: String, _ arguments: [String], in folder: URL) async throws -> Run {
        try await runProcess("/bin/sh", ["-c", #"cd "$1" && shift && exec "$@""#, "sh", folder.path, path] + arguments, input: nil,
                             environment: ProcessInfo.processInfo.environment, timeout: 60)
    }

    func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-interfaces-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }
}
