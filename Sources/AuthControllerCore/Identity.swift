// SPDX-License-Identifier: Apache-2.0
/// The name of the service whose accounts a command acts on: 1–255 bytes of ASCII letters,
/// digits, `.`, `-` and `_`. It is the keyring's `service` attribute and the settings group.
public struct ServiceName: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The name as written.
    public let rawValue: String

    /// `io.github.authctl`.
    public static let standard = ServiceName(unchecked: "io.github.authctl")

    /// Validates `rawValue`; `nil` when it breaks the rule.
    public init?(rawValue: String) {
        guard (try? Self.validate(rawValue)) != nil else { return nil }
        self.rawValue = rawValue
    }

    /// Validates `text`, throwing ``AuthError/invalidInput(_:)-enum.case`` with the rule it broke.
    public init(validating text: String) throws(AuthError) {
        try Self.validate(text)
        rawValue = text
    }

    private init(unchecked: String) { rawValue = unchecked }

    /// A name written in the program's source, such as `"com.example.notes"`. A literal that
    /// breaks the rule is a programmer's mistake, and traps.
    public init(stringLiteral value: String) {
        do throws(AuthError) {
            try Self.validate(value)
        } catch {
            preconditionFailure("ServiceName(stringLiteral:): \(error.message)")
        }
        rawValue = value
    }

    private static func validate(_ text: String) throws(AuthError) {
        let bytes = text.utf8
        guard (1...255).contains(bytes.count) else {
            throw .invalidInput("invalid service name: it must be 1 to 255 bytes long")
        }
        let allowed = bytes.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
        guard allowed else {
            throw .invalidInput("invalid service name '\(text.peerText(limit: 200))': use only ASCII letters, digits, '.', '-' and '_'")
        }
    }

    /// The name as written.
    public var description: String { rawValue }
}

/// An account id (the `email` of a ``User``): 1–254 bytes of UTF-8, no control characters, no
/// leading or trailing white space. Compared exactly: byte for byte, case-sensitively, without
/// Unicode normalisation.
public struct AccountID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The id as given, byte for byte.
    public let rawValue: String

    /// Validates `rawValue`; `nil` when it breaks the rule.
    public init?(rawValue: String) {
        guard (try? Self.validate(rawValue)) != nil else { return nil }
        self.rawValue = rawValue
    }

    /// Validates `text`, throwing ``AuthError/invalidInput(_:)-enum.case`` with the rule it broke.
    public init(validating text: String) throws(AuthError) {
        try Self.validate(text)
        rawValue = text
    }

    private static func validate(_ text: String) throws(AuthError) {
        let length = text.utf8.count
        guard length >= 1 else { throw .invalidInput("invalid account id: it is empty") }
        guard length <= 254 else { throw .invalidInput("invalid account id: it is \(length) bytes long; the limit is 254") }
        guard !text.unicodeScalars.contains(where: isControl) else {
            throw .invalidInput("invalid account id: it contains a control character")
        }
        if let first = text.unicodeScalars.first, let last = text.unicodeScalars.last,
           first.properties.isWhitespace || last.properties.isWhitespace {
            throw .invalidInput("invalid account id: it starts or ends with white space")
        }
    }

    /// Byte for byte. Swift's `String ==` is Unicode canonical equivalence, under
    /// which NFC `é` and NFD `e` + U+0301 are one account while the keyring holds two items.
    public static func == (lhs: AccountID, rhs: AccountID) -> Bool {
        lhs.rawValue.utf8.elementsEqual(rhs.rawValue.utf8)
    }

    /// Hashes the bytes, as `==` compares them.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(rawValue.utf8.count)
        for byte in rawValue.utf8 { hasher.combine(byte) }
    }

    /// Byte order, as `accounts` lists them.
    public static func < (lhs: AccountID, rhs: AccountID) -> Bool {
        // Byte order, like `sort` with LC_ALL=C: stable across locales.
        lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }

    /// The id as given.
    public var description: String { rawValue }
}

/// Display names: up to 256 bytes, no control characters.
package enum DisplayName {
    /// Returns `text` if it is a valid display name, or throws ``AuthError/invalidInput(_:)-enum.case``.
    package static func validate(_ text: String) throws(AuthError) -> String {
        guard text.utf8.count <= 256 else {
            throw .invalidInput("invalid display name: it is \(text.utf8.count) bytes long; the limit is 256")
        }
        guard !text.unicodeScalars.contains(where: isControl) else {
            throw .invalidInput("invalid display name: it contains a control character")
        }
        return text
    }
}

/// U+0000–U+001F and U+007F–U+009F.
func isControl(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value <= 0x1F || (0x7F...0x9F).contains(scalar.value)
}

/// A person who signs in: `email` is the account id, `name` the display name.
public struct User: Equatable, Sendable {
    /// The display name (may be empty).
    public var name: String
    /// The account id.
    public var email: String

    /// A user of the original API; nothing is checked until it signs in.
    public init(name: String, email: String) {
        self.name = name
        self.email = email
    }
}
