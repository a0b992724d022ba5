// SPDX-License-Identifier: Apache-2.0
package import FoundationEssentials

/// RFC 3339 timestamps in UTC, without Foundation's date formatters, and the conversions between
/// the microseconds since the Unix epoch that the settings file, the D-Bus API and the clock
/// speak and the `Date`s of the Swift API.
package enum Timestamp {
    /// The `Date` `microseconds` after the Unix epoch, exact to the microsecond for any time
    /// before 2070.
    package static func date(microseconds: UInt64) -> Date {
        // Counted from the reference date (2001), whose seconds a `Date` keeps: the offset is
        // exact in integers, and then rounded once.
        Date(timeIntervalSinceReferenceDate: Double(Int64(clamping: microseconds) - referenceDateMicroseconds) / 1_000_000)
    }

    /// Microseconds since the Unix epoch of `date`, rounded to the nearest; 0 for a date before
    /// 1970. The inverse of ``date(microseconds:)``, as the settings file and the D-Bus API
    /// carry times.
    package static func microseconds(_ date: Date) -> UInt64 {
        let offset = (date.timeIntervalSinceReferenceDate * 1_000_000).rounded()
        guard offset > -Double(referenceDateMicroseconds) else { return 0 }
        // Far beyond any time authctl meets, and short of where `Int64` would overflow.
        guard offset < 9e18 else { return .max }
        return UInt64(Int64(offset) + referenceDateMicroseconds)
    }

    /// 2001-01-01T00:00:00Z, the reference date of `Date`, in microseconds since the Unix epoch.
    private static let referenceDateMicroseconds: Int64 = 978_307_200_000_000

    /// `2026-11-22T01:48:31Z` for `date`, in whole seconds (the fraction is dropped).
    package static func rfc3339(_ date: Date) -> String {
        rfc3339(microseconds: microseconds(date))
    }

    /// `2026-11-22T01:48:31Z` for a time in microseconds since the Unix epoch.
    package static func rfc3339(microseconds: UInt64) -> String {
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
    package static func isRFC3339UTC(_ text: String) -> Bool {
        microseconds(rfc3339: text) != nil
    }

    /// Microseconds since the Unix epoch of an RFC 3339 UTC time (`…Z`, optional fraction);
    /// `nil` for anything else, or a time before 1970.
    package static func microseconds(rfc3339 text: String) -> UInt64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40, bytes.last == UInt8(ascii: "Z") || bytes.last == UInt8(ascii: "z") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for byte in bytes[range] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            return value
        }
        let separators: [(Int, UInt8)] = [(4, UInt8(ascii: "-")), (7, UInt8(ascii: "-")), (13, UInt8(ascii: ":")), (16, UInt8(ascii: ":"))]
        guard separators.allSatisfy({ bytes[$0.0] == $0.1 }), bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              year >= 1970, (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
              hour <= 23, minute <= 59, second <= 60 else { return nil }
        var fraction: Int64 = 0
        let rest = bytes[19..<(bytes.count - 1)]
        if !rest.isEmpty {
            // Microseconds are kept: the first six digits of the fraction (so no overflow).
            let count = rest.count - 1
            guard rest.first == UInt8(ascii: "."), count >= 1, rest.dropFirst().allSatisfy({ (0x30...0x39).contains($0) }),
                  let digits = number(20..<(20 + min(count, 6))) else { return nil }
            fraction = digits * pow10(6 - min(count, 6))
        }
        // Days since 1970-01-01 from the civil date (Howard Hinnant's algorithm, inverse of rfc3339).
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = shiftedYear / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second
        return UInt64(seconds) * 1_000_000 + UInt64(fraction)
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    private static func pow10(_ exponent: Int) -> Int64 {
        (0..<exponent).reduce(1) { value, _ in value * 10 }
    }
}
