// SPDX-License-Identifier: Apache-2.0
import AuthController
import Foundation
import Testing

/// The first example of the README and of the documentation's landing page is this code, word for
/// word: so it compiles against the API as it is, and the test below fails when either text and
/// this code part.
enum FirstExample {
    /// The example's lines between the markers, as the texts show them (indented here by eight spaces).
    static func run(typedPassword: String) async throws {
        // first example: begin
        let auth = AuthController.desktop(service: "com.example.notes")
        let alice = try AccountID(validating: "alice@example.org")
        try await auth.signIn(account: alice, name: "Alice", password: Password(typedPassword))
        let status = try auth.status()
        print(status.account == alice, status.name ?? "")  // true Alice
        let observer = NotificationCenter.default.addObserver(forName: .loginStatusChanged, object: auth, queue: nil) { note in
            let event = note.userInfo?[LoginEvent.userInfoKey] as? LoginEvent
            print(event?.status.rawValue ?? "", event?.account?.rawValue ?? "")  // signed-out alice@example.org
        }
        try await auth.signOut(keepingCredentials: false)
        NotificationCenter.default.removeObserver(observer)
        // first example: end
    }
}

@Suite("The first example that an app developer reads")
struct FirstExampleTests {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The lines between the markers of ``FirstExample/run(typedPassword:)``, unindented.
    static func compiledExample() throws -> [String] {
        let source = try String(contentsOfFile: #filePath, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let begin = try #require(source.firstIndex { $0.hasSuffix("// first example: begin") })
        let end = try #require(source.firstIndex { $0.hasSuffix("// first example: end") })
        return source[(begin + 1)..<end].map { String($0.dropFirst(min(8, $0.prefix { $0 == " " }.count))) }
    }

    /// The lines of the first ```swift block of `file`, without its `import` line and the blank line after it.
    static func firstSwiftBlock(of file: String) throws -> [String] {
        let text = try String(contentsOfFile: packageRoot.path + "/" + file, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex(of: "```swift"), "no ```swift block in \(file)")
        let end = try #require(lines[(start + 1)...].firstIndex(of: "```"), "an unclosed ```swift block in \(file)")
        var block = Array(lines[(start + 1)..<end])
        if block.first == "import AuthController" { block.removeFirst() }
        if block.first == "" { block.removeFirst() }
        return block
    }

    @Test("the first Swift example of the README and of the landing page is the compiled one", arguments: ["README.md", "Sources/AuthController/AuthController.docc/AuthController.md"])
    func sameAsCompiled(_ file: String) throws {
        let compiled = try Self.compiledExample()
        try #require(compiled.count > 3)
        #expect(try Self.firstSwiftBlock(of: file) == compiled)
    }

    @Test("getting started begins with the example's first line, and signs in with the full API")
    func gettingStarted() throws {
        let compiled = try Self.compiledExample()
        let file = "Sources/AuthController/AuthController.docc/GettingStarted.md"
        #expect(try Self.firstSwiftBlock(of: file) == [compiled[0]])
        let text = try String(contentsOfFile: Self.packageRoot.path + "/" + file, encoding: .utf8)
        #expect(text.contains(compiled[2]))
    }
}
