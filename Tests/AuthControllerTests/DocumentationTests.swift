// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

@Suite("Documentation of the public API")
struct DocumentationTests {
    /// The folder of `Package.swift`, three levels above this file.
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The modules an app embeds: every public symbol there shows up in the DocC catalog and in Xcode's quick help.
    static let libraryFolders = ["Sources/AuthControllerCore", "Sources/AuthController", "Sources/AuthControllerTesting"]

    @Test("every public declaration of the library has a /// doc comment")
    func everyPublicDeclarationIsDocumented() throws {
        var undocumented: [String] = []
        var swiftFiles = 0
        for folder in Self.libraryFolders {
            let folderPath = Self.packageRoot.appendingPathComponent(folder).path
            let files = FileManager.default.enumerator(atPath: folderPath)?.allObjects as? [String] ?? []
            for relativePath in files.filter({ $0.hasSuffix(".swift") }).sorted() {
                swiftFiles += 1
                let text = try String(contentsOfFile: folderPath + "/" + relativePath, encoding: .utf8)
                undocumented += PublicDeclarationScanner.undocumentedDeclarations(in: text)
                    .map { "\(folder)/\(relativePath):\($0.line): \($0.text)" }
            }
        }
        try #require(swiftFiles > 0, "no Swift files under \(Self.libraryFolders) from \(Self.packageRoot.path)")
        #expect(undocumented.isEmpty,
                "\(undocumented.count) public declarations without a /// comment (of \(swiftFiles) files):\n\(undocumented.joined(separator: "\n"))")
    }

    /// The catalogs whose `## Topics` sections place the public symbols.
    static let catalogs = ["Sources/AuthControllerCore/AuthControllerCore.docc", "Sources/AuthController/AuthController.docc",
                           "Sources/AuthControllerTesting/AuthControllerTesting.docc"]

    @Test("every public type, and every public member of AuthController, is in a topic of the DocC catalogs")
    func everyPublicSymbolIsInATopic() throws {
        var curated: Set<String> = []
        for catalog in Self.catalogs {
            let folder = Self.packageRoot.appendingPathComponent(catalog).path
            for file in try FileManager.default.contentsOfDirectory(atPath: folder).filter({ $0.hasSuffix(".md") }) {
                curated.formUnion(CuratedSymbols.links(inArticle: try String(contentsOfFile: folder + "/" + file, encoding: .utf8)))
            }
        }
        var declared: [String] = []
        for folder in Self.libraryFolders {
            let folderPath = Self.packageRoot.appendingPathComponent(folder).path
            let files = FileManager.default.enumerator(atPath: folderPath)?.allObjects as? [String] ?? []
            for relativePath in files.filter({ $0.hasSuffix(".swift") }) {
                declared += CuratedSymbols.symbolsToCurate(in: try String(contentsOfFile: folderPath + "/" + relativePath, encoding: .utf8))
            }
        }
        try #require(declared.contains("AuthController") && declared.contains("AuthController/status()"), "found no symbols: \(declared)")
        let uncurated = Set(declared).filter { !curated.contains($0) }.sorted()
        #expect(uncurated.isEmpty, "\(uncurated.count) public symbols in no topic of \(Self.catalogs):\n\(uncurated.joined(separator: "\n"))")
    }

    @Test("the topic scanner reads links, signatures and disambiguations as DocC does")
    func topicScannerReadsWhatDocCReads() {
        let article = """
            # ``AuthControllerCore/AuthController``

            A link outside the topics: ``NotCurated``.

            ## Topics

            - ``signIn(account:name:password:register:binding:)``
            - ``/AuthControllerCore/LoginEvent/Status-swift.enum``
            """
        #expect(CuratedSymbols.links(inArticle: article) == ["AuthController/signIn(account:name:password:register:binding:)", "LoginEvent/Status"])
        let source = """
            /// A type.
            public final class AuthController: Sendable {
                /// Made by hand.
                public init(service: ServiceName = .standard, clock: @escaping @Sendable () -> Date = { Date() }) {}
                func hidden() {}
            }
            extension AuthController {
                /// Signs in.
                @discardableResult
                public func signIn(account: AccountID, name: String, register: Bool = false,
                                   password: (PasswordRequest) async throws(AuthError) -> Password) async throws(AuthError) -> Int { 1 }
                /// A nested type.
                public struct AccessToken {
                    /// Not a member of the controller.
                    public var token: String
                }
                package func plumbing() {}
            }
            /// Another type.
            public enum Kind { case one }
            package struct Hidden {}
            """
        #expect(CuratedSymbols.symbolsToCurate(in: source) == [
            "AuthController", "AuthController/init(service:clock:)",
            "AuthController/signIn(account:name:register:password:)", "AuthController/AccessToken", "Kind",
        ])
    }

    @Test("the scanner finds undocumented public declarations, enum cases and protocol requirements, and nothing else")
    func scannerFindsWhatIsUndocumented() {
        let source = """
            /// Documented.
            public struct Documented {
                /// Documented, with an attribute in between.
                @discardableResult
                public func documented() -> Int { 1 }
                public var undocumented: Int { 2 }
                func notPublic() {}
                private var text = "public func inAString() {"
            }
            public enum Kind {
                /// Documented.
                case documented
                case undocumented(Int)
                func describe() -> String {
                    switch self {
                    case .documented: "a"
                    case .undocumented: "b"
                    }
                }
            }
            enum Internal {
                case notPublic
            }
            public extension Documented {}
            /// Documented.
            public protocol Requirements {
                func undocumented()
                /// Documented.
                var documented: Int { get }
            }
            /* public func inABlockComment() {} */
            """
        let found = PublicDeclarationScanner.undocumentedDeclarations(in: source).map(\.line)
        #expect(found == [6, 10, 13, 27])
    }
}

/// Finds the public declarations of a Swift source file that have no `///` comment right above them
/// (attributes may stand between the two).
///
/// A declaration is public when it says `public` or `open`, or when it sits directly in a public enum
/// (its `case`s) or a public protocol (its requirements), which carry no access modifier of their own.
/// Braces are counted outside comments and string literals to know which body a line is in.
enum PublicDeclarationScanner {
    /// The kind of body a `{` opens, as far as implicit visibility goes.
    private enum Scope { case publicEnum, publicProtocol, other }

    private static let attributes = #"(?:@\w+(?:\([^)]*\))?\s+)*"#
    private static let modifiers = #"(?:(?:static|class|final|override|convenience|required|mutating|nonmutating|indirect|lazy|weak|unowned|dynamic|nonisolated(?:\(unsafe\))?|(?:private|fileprivate|internal|package)\(set\))\s+)*"#
    private static let declarationKeyword = #"(?:func|var|let|init|subscript|struct|enum|class|actor|protocol|typealias|case|associatedtype)\b"#

    /// The undocumented public declarations of `source`, with their 1-based line numbers.
    static func undocumentedDeclarations(in source: String) -> [(line: Int, text: String)] {
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var scopes: [Scope] = []
        var pendingScope: Scope?
        var inBlockComment = false
        var inMultilineString = false
        var found: [(line: Int, text: String)] = []
        let explicitlyPublic = try! Regex(#"^\s*"# + attributes + modifiers + #"(?:public|open)\s+"# + modifiers + declarationKeyword)
        let enumCase = try! Regex(#"^\s*(?:indirect\s+)?case\s+\w"#)
        let requirement = try! Regex(#"^\s*"# + attributes + #"(?:(?:static|mutating|nonmutating|nonisolated)\s+)*(?:func|var|init|subscript|associatedtype|typealias)\b"#)
        let typeHeader = try! Regex(#"^\s*"# + attributes + #"(?:\w+(?:\([^)]*\))?\s+)*(enum|protocol|struct|class|actor|extension)\s"#)
        let publicModifier = try! Regex(#"\b(?:public|open)\s"#)
        for (index, line) in lines.enumerated() {
            let startsInCode = !inBlockComment && !inMultilineString
            let code = strippedOfCommentsAndStrings(line, inBlockComment: &inBlockComment, inMultilineString: &inMultilineString)
            let isPublic = startsInCode && (line.contains(explicitlyPublic)
                || (scopes.last == .publicEnum && line.contains(enumCase))
                || (scopes.last == .publicProtocol && line.contains(requirement)))
            if isPublic && !isDocumented(lineIndex: index, in: lines) {
                found.append((index + 1, line.trimmingCharacters(in: .whitespaces)))
            }
            if let header = code.firstMatch(of: typeHeader), let kind = header.output[1].substring {
                let declaredPublic = code.contains(publicModifier)
                pendingScope = switch kind {
                case "enum" where declaredPublic: .publicEnum
                case "protocol" where declaredPublic: .publicProtocol
                default: .other
                }
            }
            for character in code {
                if character == "{" {
                    scopes.append(pendingScope ?? .other)
                    pendingScope = nil
                } else if character == "}" {
                    _ = scopes.popLast()
                }
            }
        }
        return found
    }

    /// Whether the nearest line above `lineIndex` that is not an attribute is a `///` comment.
    private static func isDocumented(lineIndex: Int, in lines: [String]) -> Bool {
        var above = lineIndex - 1
        while above >= 0, lines[above].trimmingCharacters(in: .whitespaces).hasPrefix("@") {
            above -= 1
        }
        return above >= 0 && lines[above].trimmingCharacters(in: .whitespaces).hasPrefix("///")
    }

    /// `line` without comments and without the contents of string literals, so that only code braces remain.
    private static func strippedOfCommentsAndStrings(_ line: String, inBlockComment: inout Bool, inMultilineString: inout Bool) -> String {
        var code = ""
        var inString = false
        var characters = Substring(line)
        while let character = characters.first {
            if inBlockComment {
                if characters.hasPrefix("*/") { inBlockComment = false; characters = characters.dropFirst(2) } else { characters = characters.dropFirst() }
            } else if inMultilineString {
                if characters.hasPrefix("\"\"\"") { inMultilineString = false; characters = characters.dropFirst(3) } else { characters = characters.dropFirst() }
            } else if inString {
                if character == "\\" { characters = characters.dropFirst(2); continue }
                if character == "\"" { inString = false }
                characters = characters.dropFirst()
            } else if characters.hasPrefix("//") {
                break
            } else if characters.hasPrefix("/*") {
                inBlockComment = true
                characters = characters.dropFirst(2)
            } else if characters.hasPrefix("\"\"\"") {
                inMultilineString = true
                characters = characters.dropFirst(3)
            } else {
                if character == "\"" { inString = true } else { code.append(character) }
                characters = characters.dropFirst()
            }
        }
        return code
    }
}

/// What the DocC catalogs curate, and what they must: read from the articles' and the sources' text.
enum CuratedSymbols {
    /// The symbol links of the `## Topics` section of `article`, as paths without the module and
    /// without DocC's disambiguation (`-swift.enum`); links on an extension page (whose title is a
    /// symbol) are relative to that symbol.
    static func links(inArticle article: String) -> Set<String> {
        let lines = article.split(separator: "\n", omittingEmptySubsequences: false)
        // A title with a `/` is a symbol's page (``AuthControllerCore/AuthController``); without one,
        // a module's landing page (``AuthController``), where links start at the module.
        let title = lines.first.flatMap { $0.hasPrefix("# ``") ? String($0.dropFirst(4).dropLast(2)) : nil }
        let page = title.flatMap { $0.contains("/") ? path(of: $0) : nil }
        guard let topics = lines.firstIndex(of: "## Topics") else { return [] }
        var links: Set<String> = []
        for line in lines[topics...] {
            for match in line.matches(of: /``([^`]+)``/) {
                let link = String(match.output.1)
                let isAbsolute = link.hasPrefix("/") || modules.contains { link.hasPrefix($0 + "/") }
                let path = path(of: link)
                links.insert(isAbsolute ? path : page.map { $0 + "/" + path } ?? path)
            }
        }
        return links
    }

    static let modules = ["AuthControllerCore", "AuthController", "AuthControllerTesting", "Foundation"]

    /// A link as a path: no leading `/`, no module, no disambiguation suffix on any component.
    private static func path(of link: String) -> String {
        var components = link.split(separator: "/").map(String.init)
        if components.count > 1, let first = components.first, modules.contains(first) { components.removeFirst() }
        if components.count == 1, modules.contains(components[0]) { return components[0] }
        return components.map { component in
            guard !component.contains("("), let dash = component.firstIndex(of: "-") else { return component }
            return String(component[..<dash])
        }.joined(separator: "/")
    }

    /// The public top-level types (and functions and constants) of `source`, and the public
    /// members of `AuthController` declared in it, as DocC links name them (`signIn(account:name:)`).
    static func symbolsToCurate(in source: String) -> [String] {
        let topLevel = /^(?:@\w+(?:\([^)]*\))?\s+)*public\s+(?:final\s+)?(?:struct|enum|class|protocol|actor|typealias|let|var)\s+(\w+)/
        let member = /^    (?:@\w+(?:\([^)]*\))?\s+)*public\s+(?:(?:static|final|convenience|nonisolated)\s+)*(struct|enum|class|func|var|let|init)\b\s*(\w*)/
        var symbols: [String] = []
        var inController = false
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for (index, line) in lines.enumerated() {
            if let match = line.firstMatch(of: topLevel) { symbols.append(String(match.output.1)) }
            if !line.hasPrefix(" ") && !line.hasPrefix("}") && !line.isEmpty && !line.hasPrefix("//") && !line.hasPrefix("@") {
                inController = line.contains(/^(?:public\s+)?(?:final\s+)?(?:class|extension)\s+AuthController\b/)
            }
            guard inController, let match = line.firstMatch(of: member) else { continue }
            let (kind, name) = (String(match.output.1), String(match.output.2))
            switch kind {
            case "func", "init":
                let declaration = lines[index...].joined(separator: "\n")
                symbols.append("AuthController/" + (kind == "init" ? "init" : name) + labels(after: kind == "init" ? "init" : name, in: declaration))
            default:
                symbols.append("AuthController/" + name)
            }
        }
        return symbols
    }

    /// `(a:b:_:)` for the parameter list that follows `name` (and its generic clause) in `declaration`.
    private static func labels(after name: String, in declaration: String) -> String {
        guard let start = declaration.range(of: name)?.upperBound else { return "()" }
        var text = declaration[start...].drop { $0 != "(" }.dropFirst()
        var depth = 0
        var parameter = ""
        var labels: [String] = []
        var previous: Character = " "
        while let character = text.first {
            text = text.dropFirst()
            switch character {
            case "(", "[", "<": depth += 1
            case ")", "]": depth -= 1
            case ">" where previous != "-": depth -= 1
            default: break
            }
            if depth < 0 || (depth == 0 && character == ",") {
                let label = parameter.split(separator: ":").first?.split(whereSeparator: \.isWhitespace).first.map(String.init)
                if let label, !label.isEmpty { labels.append(label + ":") }
                parameter = ""
                if depth < 0 { break }
            } else {
                parameter.append(character)
            }
            previous = character
        }
        return "(" + labels.joined() + ")"
    }
}
