// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The AWS config file (`~/.aws/config`), which the AWS CLI and the SDKs read (botocore reads it
/// with Python's `configparser`): one key of one profile's section is set, and every other byte
/// is kept — comments, blank lines, line endings, other sections and keys. Written by hand
/// because no INI library keeps a file byte for byte: each reads it into sections and writes
/// them back in its own spelling.
package enum AWSConfiguration {
    /// The largest file read: a config file with hundreds of profiles is a few hundred KiB.
    static let sizeLimit = 4 * 1024 * 1024

    /// The file the AWS tools read: `AWS_CONFIG_FILE`, else `~/.aws/config`.
    package static var path: String {
        ProcessEnvironment.value("AWS_CONFIG_FILE") ?? ProcessEnvironment.homeDirectory + "/.aws/config"
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
        let target = try file.resolvingLinks()
        let existing = try file.read(target)
        let edited = try edit(existing?.bytes ?? [], setting: key, to: value, profile: profile, file: target)
        guard edited != existing?.bytes else { return false }
        try file.write(edited, to: target, mode: existing?.mode ?? 0o600)
        return true
    }

    /// `bytes` with `key` set to `value` in `profile`'s section.
    static func edit(_ bytes: [UInt8], setting key: String, to value: String, profile: String, file: String) throws(AuthError) -> [UInt8] {
        var lines = Line.split(bytes)
        let newline: [UInt8] = lines.first?.ending.isEmpty == false ? lines.first!.ending : [0x0A]
        let parts = Line.read(lines)
        // The AWS tools refuse such a file whole; an edit around the line would guess.
        if let line = parts.unreadable.first {
            throw .invalidInput("line \(line + 1) of the AWS config file \(file) is neither a [section], a key = value nor a comment, so the AWS tools cannot read the file; fix it, then run the set-up again")
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
        let existing = options.filter { $0.name == key }
        if let first = existing.first {
            // The first replaced, with its indentation (a key indented less after it would
            // otherwise read as its continuation), any other removed: the AWS tools refuse a key
            // given twice.
            for option in existing.dropFirst().reversed() { lines.removeSubrange(option.lines) }
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

    /// The profile a section header names, as botocore reads it: `default`, or `profile NAME`
    /// split into words as a POSIX shell splits them (`shlex.split`); `nil` for other sections
    /// (`sso-session …`, `services …`) and for a header botocore cannot split.
    static func profileName(ofSection name: String) -> String? {
        if name == "default" { return "default" }
        guard name.hasPrefix("profile"), let words = shellWords(name), words.count == 2, words[0] == "profile" else { return nil }
        return words[1]
    }

    /// `text` split into words as Python's `shlex.split` does (POSIX mode): blanks separate
    /// words, `'…'` is literal, `"…"` keeps all but `\\`, `\"`, `\$` and `` \` ``, and a
    /// backslash outside quotes escapes the next character. `nil` for an unclosed quote or a
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
                    if next == "\\", let escaped = characters.first, "\\\"$`\n".contains(escaped) {
                        characters.removeFirst()
                        if escaped != "\n" { quoted.append(escaped) }
                    } else {
                        quoted.append(next)
                    }
                }
                word = (word ?? "") + quoted
            case "\\":
                guard let escaped = characters.popFirst() else { return nil }
                word = (word ?? "") + (escaped == "\n" ? "" : String(escaped))
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

        private var text: Substring {
            var text = Substring(String(decoding: content, as: UTF8.self))
            if text.first == "\u{FEFF}" { text.removeFirst() }
            return text
        }

        /// Python's `str.strip()` of the line, as configparser reads it.
        private var trimmed: Substring {
            var text = text
            while let first = text.first, first.isWhitespace { text.removeFirst() }
            while let last = text.last, last.isWhitespace { text.removeLast() }
            return text
        }

        var isBlank: Bool { trimmed.isEmpty }
        var isComment: Bool { trimmed.hasPrefix("#") || trimmed.hasPrefix(";") }
        /// The whitespace before the line's first character, as configparser measures a line's
        /// indentation.
        var indentation: [UInt8] { Array(content.prefix { $0 == 0x20 || $0 == 0x09 }) }

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
            var name = line[..<delimiter]
            while let last = name.last, last.isWhitespace { name.removeLast() }
            return name.isEmpty ? nil : name.lowercased()
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
        }

        /// The sections and keys of `lines`, as configparser reads them: blank lines and comments
        /// belong to no key but the one whose value goes on after them; a line indented more than
        /// the key above it goes on with that key's value; any other line is a header, a key, or
        /// (before any header, or neither) a line configparser cannot read, which is `unreadable`.
        static func read(_ lines: [Line]) -> (sections: [Section], options: [Option], unreadable: [Int]) {
            var sections: [Section] = []
            var options: [Option] = []
            var unreadable: [Int] = []
            // The key whose value a more indented line goes on with.
            var open: Int?
            for (index, line) in lines.enumerated() {
                if line.isBlank || line.isComment { continue }
                if let key = open, line.indentation.count > options[key].indentation.count {
                    options[key].lines = options[key].lines.lowerBound..<(index + 1)
                    sections[sections.count - 1].lines = sections[sections.count - 1].lines.lowerBound..<(index + 1)
                    continue
                }
                if let name = line.sectionName {
                    sections.append(Section(name: name, lines: index..<(index + 1)))
                    open = nil
                    continue
                }
                guard !sections.isEmpty, let name = line.optionName else {
                    unreadable.append(index)
                    continue
                }
                sections[sections.count - 1].lines = sections[sections.count - 1].lines.lowerBound..<(index + 1)
                options.append(Option(name: name, lines: index..<(index + 1), indentation: line.indentation))
                open = options.count - 1
            }
            return (sections, options, unreadable)
        }
    }
}
