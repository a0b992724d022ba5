// SPDX-License-Identifier: Apache-2.0
/// A JWS in compact serialisation (RFC 7515 §7.1): header, payload and signature, each in
/// base64url, joined by `.`. Split here and decoded part by part; nothing is verified.
struct CompactJWS {
    /// The parts, in the order they are sent.
    enum Part: String, CaseIterable {
        case header, payload, signature
    }

    /// How a part's base64url is read.
    enum Reading {
        /// Unpadded base64url with one spelling per text (``Base64URL/decode(_:)``): what a
        /// signature is checked over, so that no two tokens carry the same claims.
        case strict
        /// Also with padding or the standard alphabet (``Base64URL/decodeLeniently(_:)``): enough
        /// to read a claim of a token that the server checks, not authctl.
        case lenient
    }

    /// The longest part accepted, in characters.
    static let maximumPartLength = 16 * 1024

    private let parts: [Substring]

    /// `token` split; `nil` unless it is three parts joined by `.`.
    init?(_ token: String) {
        let parts = token.split(separator: ".", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        self.parts = parts
    }

    /// A part as it was sent.
    subscript(part: Part) -> Substring {
        parts[Part.allCases.firstIndex(of: part)!]
    }

    /// The header and payload as they were sent, joined by `.`: what the signature covers.
    var signingInput: Substring {
        parts[0].base[parts[0].startIndex..<parts[1].endIndex]
    }

    /// The bytes of `part`, or `nil` when it is longer than ``maximumPartLength`` or is not
    /// base64url as `reading` reads it.
    func decoded(_ part: Part, _ reading: Reading) -> [UInt8]? {
        let text = self[part]
        guard text.utf8.count <= Self.maximumPartLength else { return nil }
        return switch reading {
        case .strict: Base64URL.decode(text)
        case .lenient: Base64URL.decodeLeniently(text)
        }
    }

    /// The payload of `token` read leniently and unverified, or `nil` when `token` is not a JWS:
    /// for a token that the server checks, or one verified before it was stored.
    static func unverifiedPayload(of token: String) -> [UInt8]? {
        CompactJWS(token)?.decoded(.payload, .lenient)
    }
}
