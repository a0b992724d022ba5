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
    /// are that profile's is ``AuthError/invalidInput(_:)-enum.case``; one that cannot be read or
    /// written, ``AuthError/settingsIO(_:)-enum.case``. Nothing changes on failure.
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
        let assignment = Array("\(key) = \(value)".utf8)
        let sections = lines.indices.filter { lines[$0].sectionName != nil }
        let ours = sections.filter { profileName(ofSection: lines[$0].sectionName!) == profile }
        guard ours.count <= 1 else {
            throw .invalidInput("the AWS config file \(file) has \(ours.count) sections for the profile \(profile), which the AWS tools refuse; keep one, then run the set-up again")
        }
        guard let header = ours.first else {
            // A new section at the end, after a blank line.
            if let last = lines.indices.last, lines[last].ending.isEmpty { lines[last].ending = newline }
            var tail: [Line] = []
            if !lines.isEmpty, !lines.last!.isBlank { tail.append(Line(content: [], ending: newline)) }
            tail.append(Line(content: Array("[\(profile == "default" ? "default" : "profile \(profile)")]".utf8), ending: newline))
            tail.append(Line(content: assignment, ending: newline))
            return (lines + tail).flatMap { $0.content + $0.ending }
        }
        let end = sections.first { $0 > header } ?? lines.endIndex
        // The key's lines: its own and the indented continuation lines after it.
        var keyLines: [Range<Int>] = []
        var lastKeyLine = header
        var index = header + 1
        while index < end {
            guard lines[index].optionName != nil else { index += 1; continue }
            var stop = index + 1
            while stop < end, lines[stop].isContinuation { stop += 1 }
            if lines[index].optionName == key { keyLines.append(index..<stop) }
            lastKeyLine = stop - 1
            index = stop
        }
        if let first = keyLines.first {
            // The first one replaced, any other removed: the AWS tools refuse a key given twice.
            for range in keyLines.dropFirst().reversed() { lines.removeSubrange(range) }
            let ending = lines[first.upperBound - 1].ending.isEmpty ? [] : newline
            lines.replaceSubrange(first, with: [Line(content: assignment, ending: ending)])
        } else {
            if lines[lastKeyLine].ending.isEmpty { lines[lastKeyLine].ending = newline }
            lines.insert(Line(content: assignment, ending: newline), at: lastKeyLine + 1)
        }
        return lines.flatMap { $0.content + $0.ending }
    }

    /// The profile a section header names, as botocore reads it: `default`, or `profile NAME`
    /// with any spacing; `nil` for other sections (`sso-session …`, `services …`).
    static func profileName(ofSection name: String) -> String? {
        if name == "default" { return "default" }
        guard name.hasPrefix("profile") else { return nil }
        let words = name.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard words.count == 2, words[0] == "profile" else { return nil }
        return String(words[1])
    }

    /// A profile name the set-up writes: what botocore reads back as the same name unquoted.
    package static func isProfileName(_ name: String) -> Bool {
        (1...128).contains(name.utf8.count) && !name.hasPrefix("-") && name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || "._-@+=,".utf8.contains(byte)
        }
    }

    /// One line of the file, its ending kept apart (`\n`, `\r\n`, or none at the end).
    struct Line {
        var content: [UInt8]
        var ending: [UInt8]

        static func split(_ bytes: [UInt8]) -> [Line] {
            var lines: [Line] = []
            var start = 0
            // A byte-order mark is kept as part of the first line's content.
            for (index, byte) in bytes.enumerated() where byte == 0x0A {
                let crlf = index > start && bytes[index - 1] == 0x0D
                lines.append(Line(content: Array(bytes[start..<(crlf ? index - 1 : index)]), ending: crlf ? [0x0D, 0x0A] : [0x0A]))
                start = index + 1
            }
            if start < bytes.count { lines.append(Line(content: Array(bytes[start...]), ending: [])) }
            return lines
        }

        private var text: Substring {
            var text = Substring(String(decoding: content, as: UTF8.self))
            if text.first == "\u{FEFF}" { text.removeFirst() }
            return text
        }

        private var trimmed: Substring {
            var text = text
            while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
            while let last = text.last, last == " " || last == "\t" || last == "\r" { text.removeLast() }
            return text
        }

        var isBlank: Bool { trimmed.isEmpty }
        var isComment: Bool { trimmed.hasPrefix("#") || trimmed.hasPrefix(";") }
        /// An indented line: configparser takes it as the value of the key above going on.
        var isContinuation: Bool { !isBlank && (text.first == " " || text.first == "\t") }

        /// `[NAME]`'s name, as configparser reads it (from the first `[` to the last `]`).
        var sectionName: String? {
            let line = trimmed
            guard !isContinuation, line.hasPrefix("["), let close = line.lastIndex(of: "]"), close > line.startIndex else { return nil }
            let name = line[line.index(after: line.startIndex)..<close]
            return name.isEmpty ? nil : String(name)
        }

        /// The key of a `key = value` (or `key: value`) line, lower-cased as configparser reads it.
        var optionName: String? {
            guard !isBlank, !isComment, !isContinuation, sectionName == nil else { return nil }
            let line = trimmed
            guard let delimiter = line.firstIndex(where: { $0 == "=" || $0 == ":" }) else { return nil }
            var name = line[..<delimiter]
            while let last = name.last, last == " " || last == "\t" { name.removeLast() }
            return name.isEmpty ? nil : name.lowercased()
        }
    }
}
