import AuthController
import Foundation
import Testing

@Suite("D-Bus introspection XML (data/)")
struct InterfaceFileTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let files = ["io.github.authctl.AuthController1.xml", "io.github.authctl.Session1.xml"]

    let xml: String = {
        (try? String(contentsOf: root.appendingPathComponent("data/io.github.authctl.AuthController1.xml"), encoding: .utf8)) ?? ""
    }()

    /// The text of every `<!-- … -->` comment of the AuthController1 file.
    var comments: String {
        xml.components(separatedBy: "<!--").dropFirst().map { $0.components(separatedBy: "-->")[0] }.joined(separator: "\n")
    }

    @Test("names the object path, interface and signal the broadcaster sends")
    func names() {
        #expect(xml.contains(#"<node name="\#(DBusBroadcaster.objectPath)">"#))
        #expect(xml.contains(#"<interface name="\#(DBusBroadcaster.interface)">"#))
        #expect(xml.contains(#"<signal name="\#(DBusBroadcaster.signalName)">"#))
    }

    @Test("declares the signal's signature (sssa{sv}) in argument order")
    func signature() throws {
        let signal = try #require(xml.components(separatedBy: #"<signal name="\#(DBusBroadcaster.signalName)">"#).dropFirst().first?
            .components(separatedBy: "</signal>").first)
        let arguments = signal.components(separatedBy: "<arg ").dropFirst().map { $0.prefix { $0 != ">" } }
        #expect(arguments == [#"name="service" type="s"/"#, #"name="status" type="s"/"#, #"name="user" type="s"/"#,
                              #"name="details" type="a{sv}"/"#])
    }

    /// Every reason a listener can receive; `initial` is what `watch --initial` prints, never sent.
    static let broadcastReasons: [LoginEvent.Reason] = {
        let all: [LoginEvent.Reason] = [.signIn, .signOut, .switch, .forget, .expired, .removed, .initial]
        // Exhaustive on purpose: a new reason does not compile until it is listed above.
        return all.filter { reason in
            switch reason {
            case .signIn, .signOut, .switch, .forget, .expired, .removed: true
            case .initial: false
            }
        }
    }()

    @Test("the comments list every reason that is broadcast, expired and removed included", arguments: broadcastReasons)
    func reasonListed(_ reason: LoginEvent.Reason) {
        // The list in LoginStatusChanged's comment: one reason at the start of a line, then its meaning.
        let listed = comments.split(separator: "\n").contains { line in
            line.drop { $0 == " " }.hasPrefix(reason.rawValue + " ")
        }
        #expect(listed, "data/io.github.authctl.AuthController1.xml: the comment of LoginStatusChanged does not list reason \(reason.rawValue)")
    }

    /// SPEC §11: one D-Bus error per exit-code family.
    static let errorNames = ["NotSignedIn", "InvalidInput", "Unavailable", "Timeout", "Denied", "Protocol", "SettingsUnsafe", "SettingsIO"]
        .map { "io.github.authctl.Error." + $0 }

    @Test("the comments name every D-Bus error of SPEC §11", arguments: errorNames)
    func errorListed(_ name: String) {
        let listed = comments.split(separator: "\n").contains { line in
            line.split(separator: " ").contains { $0 == name }
        }
        #expect(listed, "data/io.github.authctl.AuthController1.xml: the comments do not name \(name)")
    }

    @Test("Sources/CAuthctlBus is exactly what gdbus-codegen makes of data/*.xml")
    func skeletonsMatch() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // The command of `make interfaces`, writing into the temporary folder.
        let run = try Self.run(try Self.tool("gdbus-codegen", package: "libglib2.0-dev-bin"),
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
    func qtAccepts(_ file: String, _ mode: String) throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.qdbusxml2cpp),
                "\(Self.qdbusxml2cpp) is missing: install the Debian package qt6-base-dev-tools")
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = Self.root.appendingPathComponent("data/" + file)
        let run = try Self.run(Self.qdbusxml2cpp, [mode, "generated", source.path], in: folder)
        // It exits 0 after some warnings (an In annotation where it wants Out), so stderr counts too.
        #expect(run.status == 0 && run.stderr.isEmpty, "qdbusxml2cpp \(mode) \(file): exit \(run.status)\n\(run.stderr)")
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

    static func tool(_ name: String, package: String) throws -> String {
        for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(folder)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        Issue.record("\(name) is not installed: install the Debian package \(package)")
        throw CocoaError(.fileNoSuchFile)
    }

    static func run(_ path: String, _ arguments: [String], in folder: URL) throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.currentDirectoryURL = folder
        let errors = folder.appendingPathComponent(".stderr")
        FileManager.default.createFile(atPath: errors.path, contents: nil)
        let handle = try FileHandle(forWritingTo: errors)
        process.standardError = handle
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try handle.close()
        let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: errors)
        return (process.terminationStatus, stderr)
    }

    func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-interfaces-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }
}
