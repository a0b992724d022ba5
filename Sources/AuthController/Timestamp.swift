/// RFC 3339 timestamps in UTC, without Foundation's date formatters.
public enum Timestamp {
    /// `2026-11-22T01:48:31Z` for a time in microseconds since the Unix epoch.
    public static func rfc3339(microseconds: UInt64) -> String {
        let seconds = Int64(microseconds / 1_000_000)
        let days = seconds / 86_400
        let secondOfDay = seconds % 86_400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let shifted = days + 719_468
        let era = shifted / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay % 3600 / 60, 2)):\(pad(secondOfDay % 60, 2))Z"
    }

    /// Whether `text` is an RFC 3339 time in UTC: `YYYY-MM-DDTHH:MM:SS`, optional fraction, `Z`.
    public static func isRFC3339UTC(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40, bytes.last == UInt8(ascii: "Z") else { return false }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        let separators: [(Int, Character)] = [(4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":")]
        guard separators.allSatisfy({ bytes[$0.0] == $0.1.asciiValue! || ($0.1 == "T" && bytes[$0.0] == UInt8(ascii: "t")) }),
              number(0..<4) != nil, let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour <= 23, minute <= 59, second <= 60 else { return false }
        let rest = bytes[19..<(bytes.count - 1)]
        if rest.isEmpty { return true }
        return rest.first == UInt8(ascii: ".") && rest.count >= 2 && rest.dropFirst().allSatisfy { (0x30...0x39).contains($0) }
    }
}
