// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// Any JSON value: to read a document of someone else's (a Docker config.json) and write it
/// back with one member changed, the others keeping their values; and to read the claims of a
/// token or a userinfo answer, whatever types the provider gave the claims authctl does not
/// read. FoundationEssentials decodes and encodes only types it knows, and Foundation's
/// `JSONSerialization` would bring all of Foundation into the executable's start-up.
///
/// Integers stay exact (within 64 bits); other numbers go through `Double`, as every JSON
/// library reads them. Members come back in sorted order.
enum JSONValue: Codable, Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case unsigned(UInt64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(UInt64.self) {
            self = .unsigned(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else if decoder.userInfo[Self.readsUnreadableAsNull] as? Bool == true {
            self = (try? container.decode([String: JSONValue].self)).map(Self.object) ?? .null
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .unsigned(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The text, when this is a string.
    var string: String? {
        if case .string(let text) = self { text } else { nil }
    }

    /// The value, when this is a number, whichever case holds it.
    var number: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .unsigned(let value): Double(value)
        case .number(let value): value
        default: nil
        }
    }

    /// A decoder for claims: a value that no case can hold (a string with a lone surrogate
    /// escape, which FoundationEssentials refuses) is read as `.null`. A claim authctl does not
    /// read must not make the provider's whole answer unreadable; a document that is written
    /// back (a Docker config.json) must fail instead, or the value would be lost.
    static func claimsDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.userInfo[readsUnreadableAsNull] = true
        return decoder
    }

    private static let readsUnreadableAsNull = CodingUserInfoKey(rawValue: "JSONValue.readsUnreadableAsNull")!
}
