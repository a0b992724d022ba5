// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The URL-safe base64 alphabet without padding (RFC 4648 §5), as JOSE (RFC 7515 §2) and PKCE
/// (RFC 7636) use it. By hand: FoundationEssentials' base64 wants the standard alphabet and
/// padding, and JOSE wants the strict form, where a text has one spelling only.
enum Base64URL {
    /// The bytes of `text`, or `nil` when it is not strict unpadded base64url: a character outside
    /// `A–Z a–z 0–9 - _` (padding `=` included), a length of 1 modulo 4, or unused bits in the last
    /// character that are not zero (so that no two texts decode to the same bytes).
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in text.utf8 {
            guard let value = sextet(character) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // 6 bits left over means a length of 1 modulo 4; leftover bits must be zero.
        guard bits < 6, accumulator == 0 else { return nil }
        return bytes
    }

    /// The bytes of `text` read as base64url or base64, padded or not, or `nil` when it is
    /// neither. FoundationEssentials decodes the standard alphabet with padding, which this
    /// first turns `text` into.
    static func decodeLeniently(_ text: some StringProtocol) -> [UInt8]? {
        var base64 = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }

    /// `bytes` as unpadded base64url.
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var output: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = accumulator << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int(accumulator >> UInt32(bits) & 63)])
            }
            accumulator &= (1 << UInt32(bits)) - 1
        }
        if bits > 0 { output.append(alphabet[Int(accumulator << UInt32(6 - bits) & 63)]) }
        return String(decoding: output, as: UTF8.self)
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
