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
