/// A JSON value whose object keys keep the order they are given in.
enum JSON {
    case string(String)
    case number(UInt64)
    case bool(Bool)
    case null
    case array([JSON])
    case object(KeyValuePairs<String, JSON>)
    case orderedObject([(String, JSON)])

    /// `.string(text)`, or `.null` for `nil`.
    static func optional(_ text: String?) -> JSON { text.map(JSON.string) ?? .null }

    var serialized: String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .string(let text): Self.writeString(text, to: &output)
        case .number(let number): output += String(number)
        case .bool(let flag): output += flag ? "true" : "false"
        case .null: output += "null"
        case .array(let values):
            output += "["
            for (index, value) in values.enumerated() {
                if index > 0 { output += "," }
                value.write(to: &output)
            }
            output += "]"
        case .object(let pairs): Self.writeObject(pairs.map { ($0.key, $0.value) }, to: &output)
        case .orderedObject(let pairs): Self.writeObject(pairs, to: &output)
        }
    }

    private static func writeObject(_ pairs: [(String, JSON)], to output: inout String) {
        output += "{"
        for (index, (key, value)) in pairs.enumerated() {
            if index > 0 { output += "," }
            writeString(key, to: &output)
            output += ":"
            value.write(to: &output)
        }
        output += "}"
    }

    private static func writeString(_ text: String, to output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x2028...0x2029).contains(scalar.value):
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
