// SPDX-License-Identifier: Apache-2.0
public import Testing

/// A test argument named by a short label in test names and the log, not by its value: a
/// 4 KiB password or a 255-byte id would otherwise fill a line of the CI log per case.
public struct Sample<Value: Sendable>: Sendable, CustomTestStringConvertible {
    public let value: Value
    public let label: String

    public var testDescription: String { label }
}

extension Sample where Value == String {
    /// The text itself when it is short; its first characters and byte count when it is long.
    public init(_ text: String) {
        value = text
        label = text.utf8.count <= 24 ? String(reflecting: text) : String(reflecting: String(text.prefix(8))) + "… (\(text.utf8.count) bytes)"
    }
}

extension Sample where Value == [UInt8] {
    /// The bytes as hex when there are few; their count when there are many.
    public init(_ bytes: [UInt8]) {
        value = bytes
        label = bytes.count <= 8 ? "[" + bytes.map { String($0, radix: 16) }.joined(separator: " ") + "]" : "\(bytes.count) bytes"
    }
}

extension Sample where Value == [String] {
    /// Command-line arguments, each long one shortened.
    public init(_ arguments: [String]) {
        value = arguments
        label = "[" + arguments.map { Sample<String>($0).label }.joined(separator: ", ") + "]"
    }
}
