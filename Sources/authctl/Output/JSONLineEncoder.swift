// SPDX-License-Identifier: Apache-2.0
/// Encodes an `Encodable` value as one line of JSON, keeping object keys in the order the
/// value encodes them (declaration order, for synthesised conformances), as the manual lists
/// them. Foundation's `JSONEncoder` keeps no order (only `.sortedKeys`) and would bring
/// Foundation into the executable's start-up.
///
/// Strings escape `"`, `\`, every control character (C0, DEL, C1) and U+2028/U+2029, so a
/// document is always one line; `/` is not escaped. Integers are written exactly; a
/// floating-point value must be finite.
struct JSONLineEncoder {
    func encode(_ value: some Encodable) throws -> String {
        let root = Slot()
        try value.encode(to: NodeEncoder(slot: root, codingPath: []))
        var text = ""
        root.write(to: &text)
        return text
    }
}

/// A place for one JSON value; containers fill it in as the value encodes itself.
private final class Slot {
    enum Value {
        case null
        case literal(String)  // true, false, a number
        case string(String)
        case array([Slot])
        case object([(key: String, slot: Slot)])
    }

    var value: Value = .null

    func write(to text: inout String) {
        switch value {
        case .null: text += "null"
        case .literal(let literal): text += literal
        case .string(let string): Self.write(string, to: &text)
        case .array(let items):
            text += "["
            for (index, item) in items.enumerated() {
                if index > 0 { text += "," }
                item.write(to: &text)
            }
            text += "]"
        case .object(let members):
            text += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { text += "," }
                Self.write(member.key, to: &text)
                text += ":"
                member.slot.write(to: &text)
            }
            text += "}"
        }
    }

    private static func write(_ string: String, to text: inout String) {
        text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }

    /// A new slot appended to this array slot.
    func appendItem() -> Slot {
        let item = Slot()
        if case .array(let items) = value { value = .array(items + [item]) } else { value = .array([item]) }
        return item
    }

    /// The slot for `key` in this object slot; a key encoded twice keeps its first place.
    func member(_ key: String) -> Slot {
        var members: [(key: String, slot: Slot)] = []
        if case .object(let existing) = value { members = existing }
        if let found = members.first(where: { $0.key == key }) { return found.slot }
        let slot = Slot()
        value = .object(members + [(key, slot)])
        return slot
    }
}

private struct NodeEncoder: Encoder {
    let slot: Slot
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object = slot.value {} else { slot.value = .object([]) }
        return KeyedEncodingContainer(KeyedContainer<Key>(slot: slot, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = slot.value {} else { slot.value = .array([]) }
        return UnkeyedContainer(slot: slot, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(slot: slot, codingPath: codingPath)
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: Slot
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws { slot.member(key.stringValue).value = .null }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try value.encode(to: NodeEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        NodeEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        NodeEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        NodeEncoder(slot: slot.member("super"), codingPath: codingPath)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        NodeEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key])
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]
    var count: Int {
        if case .array(let items) = slot.value { return items.count }
        return 0
    }

    mutating func encodeNil() throws { slot.appendItem().value = .null }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try value.encode(to: NodeEncoder(slot: slot.appendItem(), codingPath: codingPath))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        NodeEncoder(slot: slot.appendItem(), codingPath: codingPath).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        NodeEncoder(slot: slot.appendItem(), codingPath: codingPath).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        NodeEncoder(slot: slot.appendItem(), codingPath: codingPath)
    }
}

/// Where every primitive ends up: `String`, `Bool` and the numbers encode themselves
/// through a single-value container.
private struct SingleValueContainer: SingleValueEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { slot.value = .null }
    mutating func encode(_ value: Bool) throws { slot.value = .literal(value ? "true" : "false") }
    mutating func encode(_ value: String) throws { slot.value = .string(value) }
    mutating func encode(_ value: Double) throws { try encodeFloatingPoint(value) }
    mutating func encode(_ value: Float) throws { try encodeFloatingPoint(value) }
    mutating func encode(_ value: Int) throws { slot.value = .literal(String(value)) }
    mutating func encode(_ value: Int8) throws { slot.value = .literal(String(value)) }
    mutating func encode(_ value: Int16) throws { slot.value = .literal(String(value)) }
    mutating func encode(_ value: Int32) throws { slot.value = .literal(String(value)) }
    mutating func encode(_ value: Int64) throws { slot.value = .literal(String(value)) }
    mutating func encode(_ value: UInt) throws { slot.value = .literal(String(value)) }
    mutating func encode(_ value: UInt8) throws { slot.value = .literal(String(value)) }
    mutating func encode(_ value: UInt16) throws { slot.value = .literal(String(value)) }
    mutating func encode(_ value: UInt32) throws { slot.value = .literal(String(value)) }
    mutating func encode(_ value: UInt64) throws { slot.value = .literal(String(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try value.encode(to: NodeEncoder(slot: slot, codingPath: codingPath))
    }

    private func encodeFloatingPoint<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "JSON has no \(value)"))
        }
        slot.value = .literal(String(value))
    }
}
