// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
#if canImport(Glibc)
internal import Glibc
#endif

/// The AWS config file (`~/.aws/config`), which the AWS CLI and the SDKs read (botocore reads it
/// with Python's `configparser`): one key of one profile's section is set, and every other byte
/// is kept — comments, blank lines, line endings, other sections and keys. Written by hand
/// because no INI library keeps a file byte for byte: each reads it into sections and writes
/// them back in its own spelling.
package enum AWSConfiguration {
    /// The largest file read: a config file with hundreds of profiles is a few hundred KiB.
    static let sizeLimit = 4 * 1024 * 1024

    /// The file the AWS tools read: `AWS_CONFIG_FILE` with its variables and `~` expanded as
    /// botocore expands them, else `~/.aws/config`. Set but empty, it names no file, and the AWS
    /// tools read none: ``AuthError/usage(_:)-enum.case``.
    package static func path() throws(AuthError) -> String {
        guard let configured = ProcessEnvironment.valueEvenIfEmpty("AWS_CONFIG_FILE") else {
            return ProcessEnvironment.homeDirectory + "/.aws/config"
        }
        guard !configured.isEmpty else {
            throw .usage("AWS_CONFIG_FILE is set but empty, so the AWS tools read no config file; unset it, or set it to the file they should read")
        }
        return expandingUser(expandingVariables(configured))
    }

    /// `$NAME` and `${NAME}` replaced by the variable's value where it is set, as Python's
    /// `os.path.expandvars` (which botocore applies to the file's path) replaces them: names of
    /// ASCII letters, digits and `_`; an unset variable is left as it is written.
    static func expandingVariables(_ path: String, _ value: (String) -> String? = ProcessEnvironment.valueEvenIfEmpty) -> String {
        var bytes = Array(path.utf8)[...]
        var result: [UInt8] = []
        func isNameByte(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == UInt8(ascii: "_")
        }
        while let dollar = bytes.firstIndex(of: UInt8(ascii: "$")) {
            result += bytes[..<dollar]
            let rest = bytes[(dollar + 1)...]
            var name: ArraySlice<UInt8>, end: Int
            if rest.first == UInt8(ascii: "{"), let close = rest.firstIndex(of: UInt8(ascii: "}")) {
                (name, end) = (rest[(rest.startIndex + 1)..<close], close + 1)
            } else {
                name = rest.prefix(while: isNameByte)
                end = name.endIndex
            }
            if (!name.isEmpty || rest.first == UInt8(ascii: "{")), end > dollar + 1,
               let replacement = value(String(decoding: name, as: UTF8.self)) {
                result += Array(replacement.utf8)
            } else {
                result += bytes[dollar..<max(end, dollar + 1)]
            }
            bytes = bytes[max(end, dollar + 1)...]
        }
        return String(decoding: result + bytes, as: UTF8.self)
    }

    /// A leading `~` (`HOME`) or `~USER` (that user's home folder) replaced as Python's
    /// `os.path.expanduser` replaces it; anything else as it is.
    static func expandingUser(_ path: String) -> String {
        guard path.hasPrefix("~") else { return path }
        let end = path.firstIndex(of: "/") ?? path.endIndex
        let user = path[path.index(after: path.startIndex)..<end]
        let home: String
        if user.isEmpty {
            home = ProcessEnvironment.valueEvenIfEmpty("HOME") ?? ProcessEnvironment.currentUser?.homeDirectory ?? "/"
        } else {
            guard let entry = getpwnam(String(user)) else { return path }
            home = String(cString: entry.pointee.pw_dir)
        }
        var trimmed = Substring(home)
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        let expanded = String(trimmed) + path[end...]
        return expanded.isEmpty ? "/" : expanded
    }

    /// Sets `key` to `value` in the section of `profile` (`[default]` for `default`, else
    /// `[profile NAME]`, found as botocore finds it, whatever the spacing) of the file at `path`,
    /// replacing the key's line (and its continuation lines) when the section has it, else adding
    /// it after the section's last key; a missing section is added at the end. A symbolic link is
    /// followed; a new file is 0600 in folders made 0700, an existing one keeps its mode. Returns
    /// `false`, and writes nothing, when the file already says so. A file in which two sections
    /// are that profile's, or with a line the AWS tools cannot read, is
    /// ``AuthError/invalidInput(_:)-enum.case``; one that cannot be read or written,
    /// ``AuthError/settingsIO(_:)-enum.case``. Nothing changes on failure.
    @discardableResult
    package static func set(_ key: String, to value: String, profile: String, in path: String) throws(AuthError) -> Bool {
        let file = ConfigurationFile(path: path, named: "the AWS config file", sizeLimit: sizeLimit)
        return try file.locked { (target) throws(AuthError) -> Bool in
            let existing = try file.read(target)
            let edited = try edit(existing?.bytes ?? [], setting: key, to: value, profile: profile, file: target)
            guard edited != existing?.bytes else { return false }
            try file.write(edited, to: target, mode: existing?.mode ?? 0o600)
            return true
        }
    }

    /// `bytes` with `key` set to `value` in `profile`'s section.
    static func edit(_ bytes: [UInt8], setting key: String, to value: String, profile: String, file: String) throws(AuthError) -> [UInt8] {
        // The AWS tools refuse such a file whole; an edit around what they cannot read would guess.
        func unreadable(_ what: String) -> AuthError {
            .invalidInput("the AWS config file \(file) \(what), so the AWS tools cannot read it; fix it, then run the set-up again")
        }
        guard String(validating: bytes, as: UTF8.self) != nil else { throw unreadable("is not UTF-8 text") }
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { throw unreadable("starts with a byte-order mark") }
        var lines = Line.split(bytes)
        let newline: [UInt8] = lines.first?.ending.isEmpty == false ? lines.first!.ending : [0x0A]
        let parts = Line.read(lines)
        if let line = parts.unreadable.first {
            throw unreadable("has a line (\(line + 1)) that is neither a [section], a key = value nor a comment")
        }
        if let line = parts.duplicates.first {
            throw unreadable("names a section, or a key of one section, twice (line \(line + 1))")
        }
        let ours = parts.sections.filter { profileName(ofSection: $0.name) == profile }
        guard ours.count <= 1 else {
            throw .invalidInput("the AWS config file \(file) has \(ours.count) sections for the profile \(profile), which the AWS tools refuse; keep one, then run the set-up again")
        }
        guard let section = ours.first else {
            // A new section at the end, after a blank line.
            if let last = lines.indices.last, lines[last].ending.isEmpty { lines[last].ending = newline }
            var tail: [Line] = []
            if !lines.isEmpty, !lines.last!.isBlank { tail.append(Line(content: [], ending: newline)) }
            tail.append(Line(content: Array("[\(profile == "default" ? "default" : "profile \(profile)")]".utf8), ending: newline))
            tail.append(Line(content: Array("\(key) = \(value)".utf8), ending: newline))
            return (lines + tail).flatMap { $0.content + $0.ending }
        }
        let options = parts.options.filter { section.lines.contains($0.lines.lowerBound) }
        if let first = options.first(where: { $0.name == key }) {
            // Replaced with its indentation: a key indented less after it would otherwise read
            // as its continuation.
            let ending = lines[first.lines.upperBound - 1].ending.isEmpty ? [] : newline
            let line = Line(content: first.indentation + Array("\(key) = \(value)".utf8), ending: ending)
            lines.replaceSubrange(first.lines, with: [line])
        } else {
            // After the section's last key, indented as it is; else right after the header,
            // indented as the next header is (less, and that header would read as the key's value
            // going on). Either way the line after it is indented no more than it.
            let after = options.last?.lines.upperBound ?? section.lines.lowerBound + 1
            let indentation = options.last?.indentation ?? lines[after...].first { !$0.isBlank && !$0.isComment }?.indentation ?? []
            if lines[after - 1].ending.isEmpty { lines[after - 1].ending = newline }
            let line = Line(content: indentation + Array("\(key) = \(value)".utf8), ending: newline)
            lines.insert(line, at: after)
        }
        return lines.flatMap { $0.content + $0.ending }
    }

    /// The profile a section header names, as botocore reads it: `default`, or a header that
    /// starts with `profile` and splits into two words as a POSIX shell splits them
    /// (`shlex.split`), the second being the name — `[profile dev]`, and as botocore has it,
    /// `[profiles dev]` too; `nil` for other sections (`sso-session …`, `services …`) and for a
    /// header botocore cannot split.
    static func profileName(ofSection name: String) -> String? {
        if name == "default" { return "default" }
        guard name.hasPrefix("profile"), let words = shellWords(name), words.count == 2 else { return nil }
        return words[1]
    }

    /// `text` split into words as Python's `shlex.split` does (POSIX mode): space, tab, CR and
    /// LF separate words, `'…'` is literal, `"…"` keeps all but `\\` and `\"`, and a backslash
    /// outside quotes escapes the next character. `nil` for an unclosed quote or a
    /// trailing backslash, which botocore skips.
    static func shellWords(_ text: String) -> [String]? {
        var words: [String] = []
        var word: String?
        var characters = Array(text)[...]
        while let character = characters.popFirst() {
            switch character {
            case " ", "\t", "\n", "\r":
                if let finished = word { words.append(finished) }
                word = nil
            case "'":
                guard let close = characters.firstIndex(of: "'") else { return nil }
                word = (word ?? "") + String(characters[..<close])
                characters = characters[(close + 1)...]
            case "\"":
                var quoted = ""
                while true {
                    guard let next = characters.popFirst() else { return nil }
                    if next == "\"" { break }
                    if next == "\\", let escaped = characters.first, escaped == "\\" || escaped == "\"" {
                        characters.removeFirst()
                        quoted.append(escaped)
                    } else {
                        quoted.append(next)
                    }
                }
                word = (word ?? "") + quoted
            case "\\":
                guard let escaped = characters.popFirst() else { return nil }
                word = (word ?? "") + String(escaped)
            default:
                word = (word ?? "") + String(character)
            }
        }
        if let finished = word { words.append(finished) }
        return words
    }

    /// A profile name the set-up writes: what botocore reads back as the same name unquoted.
    package static func isProfileName(_ name: String) -> Bool {
        (1...128).contains(name.utf8.count) && !name.hasPrefix("-") && name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || "._-@+=,".utf8.contains(byte)
        }
    }

    /// One line of the file, its ending kept apart (`\n`, `\r\n`, `\r`, or none at the end):
    /// Python reads the file with universal newlines, so a lone `\r` ends a line too.
    struct Line {
        var content: [UInt8]
        var ending: [UInt8]

        static func split(_ bytes: [UInt8]) -> [Line] {
            var lines: [Line] = []
            var start = 0
            var index = 0
            // A byte-order mark is kept as part of the first line's content.
            while index < bytes.count {
                let byte = bytes[index]
                guard byte == 0x0A || byte == 0x0D else { index += 1; continue }
                let crlf = byte == 0x0D && index + 1 < bytes.count && bytes[index + 1] == 0x0A
                let next = index + (crlf ? 2 : 1)
                lines.append(Line(content: Array(bytes[start..<index]), ending: Array(bytes[index..<next])))
                start = next
                index = next
            }
            if start < bytes.count { lines.append(Line(content: Array(bytes[start...]), ending: [])) }
            return lines
        }

        /// What Python's `str.isspace()` (and so `str.strip()` and a regular expression's `\s`)
        /// takes for white space: Unicode's White_Space and the separators U+001C–U+001F.
        static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
            scalar.properties.isWhitespace || (0x1C...0x1F).contains(scalar.value)
        }

        /// Python's `str.strip()` of the line, as configparser reads it.
        private var trimmed: Substring {
            var text = String(decoding: content, as: UTF8.self).unicodeScalars[...]
            while let first = text.first, Self.isSpace(first) { text.removeFirst() }
            while let last = text.last, Self.isSpace(last) { text.removeLast() }
            return Substring(text)
        }

        var isBlank: Bool { trimmed.isEmpty }
        var isComment: Bool { trimmed.hasPrefix("#") || trimmed.hasPrefix(";") }
        /// The white space before the line's first character, as configparser finds a line's
        /// indentation (`\S`): its bytes, and `level`, how many characters.
        var indentation: [UInt8] { Array(String(String.UnicodeScalarView(leadingSpace)).utf8) }
        var level: Int { leadingSpace.count }
        private var leadingSpace: [Unicode.Scalar] {
            Array(String(decoding: content, as: UTF8.self).unicodeScalars.prefix(while: Self.isSpace))
        }

        /// `[NAME]`'s name, as configparser reads it (from the first `[` to the last `]`).
        var sectionName: String? {
            let line = trimmed
            guard line.hasPrefix("["), let close = line.lastIndex(of: "]"), close > line.startIndex else { return nil }
            let name = line[line.index(after: line.startIndex)..<close]
            return name.isEmpty ? nil : String(name)
        }

        /// The key of a `key = value` (or `key: value`) line, lower-cased as configparser reads it.
        var optionName: String? {
            let line = trimmed
            guard let delimiter = line.firstIndex(where: { $0 == "=" || $0 == ":" }) else { return nil }
            var name = line[..<delimiter].unicodeScalars
            while let last = name.last, Self.isSpace(last) { name.removeLast() }
            return name.isEmpty ? nil : String(name).lowercased()
        }

        /// A section of the file: its name and its lines (the header's first).
        struct Section {
            var name: String
            var lines: Range<Int>
        }

        /// A key of a section: its name, its lines (its own, and the lines its value goes on
        /// over, with the blank lines and comments between them) and its indentation.
        struct Option {
            var name: String
            var lines: Range<Int>
            var indentation: [UInt8]
            var level: Int
        }

        /// The sections and keys of `lines`, as configparser reads them: blank lines and comments
        /// belong to no key but the one whose value goes on after them; a line indented more than
        /// the key above it goes on with that key's value; any other line is a header, a key, or
        /// (before any header, or neither) a line configparser cannot read, which is `unreadable`.
        /// `duplicates` are the lines of a second section of one name (but `DEFAULT`'s, which
        /// configparser merges) and of a second key of one section, which configparser refuses.
        static func read(_ lines: [Line]) -> (sections: [Section], options: [Option], unreadable: [Int], duplicates: [Int]) {
            var sections: [Section] = []
            var options: [Option] = []
            var unreadable: [Int] = []
            var duplicates: [Int] = []
            var sectionNames = Set<String>()
            var keys = Set<[String]>()
            // The key whose value a more indented line goes on with.
            var open: Int?
            for (index, line) in lines.enumerated() {
                if line.isBlank || line.isComment { continue }
                if let key = open, line.level > options[key].level {
                    options[key].lines = options[key].lines.lowerBound..<(index + 1)
                    sections[sections.count - 1].lines = sections[sections.count - 1].lines.lowerBound..<(index + 1)
                    continue
                }
                if let name = line.sectionName {
                    if name != "DEFAULT", !sectionNames.insert(name).inserted { duplicates.append(index) }
                    sections.append(Section(name: name, lines: index..<(index + 1)))
                    open = nil
                    continue
                }
                guard !sections.isEmpty, let name = line.optionName else {
                    unreadable.append(index)
                    continue
                }
                sections[sections.count - 1].lines = sections[sections.count - 1].lines.lowerBound..<(index + 1)
                if !keys.insert([sections[sections.count - 1].name, name]).inserted { duplicates.append(index) }
                options.append(Option(name: name, lines: index..<(index + 1), indentation: line.indentation, level: line.level))
                open = options.count - 1
            }
            return (sections, options, unreadable, duplicates)
        }
    }
}
