// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Foundation
import Testing
import TestSupport

/// Keys and ID tokens that Tests/Fixtures/IDTokens/make-id-tokens.py signed. Their times are
/// fixed, and every check passes the provider's clock, so they never age.
struct IDTokenFixtures: Decodable {
    let issuer: String
    let clientID: String
    let nonce: String
    let issuedAt: UInt64
    let expiresAt: UInt64
    let keySets: [String: String]
    let tokens: [String: String]

    static let shared: IDTokenFixtures = {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/IDTokens/id-tokens.json")
        return try! JSONDecoder().decode(IDTokenFixtures.self, from: Data(contentsOf: file))
    }()

    func keySet(_ name: String = "main") throws -> JSONWebKeySet {
        try JSONWebKeySet(json: Array(keySets[name]!.utf8))
    }

    func token(_ name: String) -> String { tokens[name]! }

    /// A moment when the fixtures' tokens are valid: ten minutes after they were issued.
    var validNow: UInt64 { (issuedAt + 600) * 1_000_000 }
    /// A moment when the refreshed tokens, issued half an hour after the others, are valid too.
    var refreshNow: UInt64 { (issuedAt + 1900) * 1_000_000 }

    func verify(_ token: String, keys: String = "main", nonce: String?? = .none, serverNow: UInt64? = nil) throws -> IDTokenClaims {
        let expectedNonce: String? = switch nonce {
        case .none: self.nonce
        case .some(let given): given
        }
        return try IDToken.verify(token, keys: keySet(keys), issuer: issuer, clientID: clientID, nonce: expectedNonce,
                                  serverNow: serverNow ?? validNow)
    }
}

/// A token whose parts are those given, base64url-encoded; the signature is garbage.
private func token(header: String, payload: String = #"{"sub":"x"}"#, signature: [UInt8] = [1, 2, 3]) -> String {
    [Base64URL.encode(Array(header.utf8)), Base64URL.encode(Array(payload.utf8)), Base64URL.encode(signature)].joined(separator: ".")
}

/// `token` with bit `bit` of byte `index` of part `part` (0 header, 1 payload, 2 signature) flipped.
private func flipping(bit: Int = 0, ofByte index: Int, inPart part: Int, of token: String) -> String {
    var parts = token.split(separator: ".").map(String.init)
    var bytes = Base64URL.decode(parts[part])!
    bytes[index] ^= 1 << UInt8(bit)
    parts[part] = Base64URL.encode(bytes)
    return parts.joined(separator: ".")
}

/// Whether `body` throws a protocol error (exit 76) whose message contains `text`.
private func expectProtocolError(_ text: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    #expect(sourceLocation: sourceLocation) {
        try body()
    } throws: { error in
        guard let error = error as? AuthError, case .protocolError = error else { return false }
        return error.exitCode == 76 && error.message.contains(text)
    }
}

@Suite("ID tokens")
struct IDTokenTests {
    let fixtures = IDTokenFixtures.shared

    @Test("a token of every accepted algorithm verifies", arguments: JWSAlgorithm.allCases.map(\.rawValue))
    func everyAlgorithmVerifies(_ algorithm: String) throws {
        let claims = try fixtures.verify(fixtures.token(algorithm))
        #expect(claims.subject == "248289761001")
    }

    @Test("a flipped bit in the signature does not verify", arguments: JWSAlgorithm.allCases.map(\.rawValue))
    func flippedSignatureBit(_ algorithm: String) {
        let forged = flipping(bit: 3, ofByte: 5, inPart: 2, of: fixtures.token(algorithm))
        expectProtocolError("signature does not verify with the provider's key") { _ = try fixtures.verify(forged) }
    }

    @Test("a flipped bit in the payload does not verify", arguments: JWSAlgorithm.allCases.map(\.rawValue))
    func flippedPayloadBit(_ algorithm: String) {
        // Byte 30 is inside the issuer's URL, so the payload is still JSON.
        let forged = flipping(bit: 0, ofByte: 30, inPart: 1, of: fixtures.token(algorithm))
        expectProtocolError("signature does not verify") { _ = try fixtures.verify(forged) }
    }

    @Test("a signature of another token does not verify")
    func swappedSignature() {
        let parts = fixtures.token("RS256").split(separator: ".")
        let other = fixtures.token("another audience").split(separator: ".")
        let forged = [parts[0], other[1], parts[2]].joined(separator: ".")
        expectProtocolError("signature does not verify with the provider's key 'rsa-1'") { _ = try fixtures.verify(forged) }
    }

    @Test("an ECDSA signature that is not r and s of the curve's size does not verify", arguments: ["ES256", "ES384"])
    func ecdsaSignatureLength(_ algorithm: String) {
        var parts = fixtures.token(algorithm).split(separator: ".").map(String.init)
        parts[2] = Base64URL.encode(Base64URL.decode(parts[2])!.dropLast())
        expectProtocolError("signature does not verify") { _ = try fixtures.verify(parts.joined(separator: ".")) }
    }

    @Test("a point off the curve is refused")
    func pointOffCurve() {
        let point = Base64URL.encode([UInt8](repeating: 1, count: 32))
        let keys = #"{"keys":[{"kty":"EC","crv":"P-256","kid":"ec-256","x":"\#(point)","y":"\#(point)"}]}"#
        expectProtocolError("GnuTLS refuses the provider's key 'ec-256' as a public key") {
            _ = try IDToken.verify(fixtures.token("ES256"), keys: JSONWebKeySet(json: Array(keys.utf8)), issuer: fixtures.issuer,
                                   clientID: fixtures.clientID, nonce: nil, serverNow: fixtures.validNow)
        }
    }

    @Test("RSA-PSS needs a salt as long as the hash")
    func pssSaltLength() {
        expectProtocolError("signature does not verify") { _ = try fixtures.verify(fixtures.token("PS256 with a salt of 0")) }
    }

    @Test("the claims are the token's")
    func claims() throws {
        let claims = try fixtures.verify(fixtures.token("ES256"))
        #expect(claims.issuer == fixtures.issuer)
        #expect(claims.audiences == ["authctl"])
        #expect(claims.profile.string("email") == "jane@example.com")
        #expect(claims.profile.emailVerified == true)
        #expect(claims.profile.string("name") == "Jane Doe")
        #expect(claims.profile.string("preferred_username") == "jane")
        #expect(claims.nonce == fixtures.nonce)
        #expect(claims.expiry == fixtures.expiresAt * 1_000_000)
        #expect(claims.issuedAt == fixtures.issuedAt * 1_000_000)
    }

    @Test("any claim reads as a string when it is one, and only then")
    func stringClaims() throws {
        let claims = try fixtures.verify(fixtures.token("RS256"))
        #expect(claims.profile.string("upn") == "jane.doe@corp.example.com")
        #expect(claims.profile.string("sub") == "248289761001")
        #expect(claims.profile.string("employee_number") == nil)
        #expect(claims.profile.string("groups") == nil)
        #expect(claims.profile.string("email_verified") == nil)
        #expect(claims.profile.string("missing") == nil)
    }

    @Test("email_verified sent as a string counts")
    func emailVerifiedAsString() throws {
        let claims = try fixtures.verify(fixtures.token("email_verified as strings"))
        #expect(claims.profile.emailVerified == false)
        #expect(claims.profile.verifiedEmail == nil)
    }

    @Test("a token with only the required claims has no profile")
    func onlyRequiredClaims() throws {
        let claims = try fixtures.verify(fixtures.token("only sub"), nonce: .some(nil))
        #expect(claims.subject == "u-7")
        #expect(claims.profile.string("email") == nil)
        #expect(claims.profile.emailVerified == nil)
        #expect(claims.profile.string("name") == nil)
        #expect(claims.profile.string("preferred_username") == nil)
    }

    // MARK: The algorithm

    @Test("an unsigned token is refused")
    func algorithmNone() {
        let unsigned = token(header: #"{"alg":"none"}"#, signature: [])
        expectProtocolError("not signed") { _ = try fixtures.verify(unsigned) }
        let withSignature = token(header: #"{"alg":"none"}"#)
        expectProtocolError("not signed") { _ = try fixtures.verify(withSignature) }
    }

    @Test("HMAC is refused, even keyed with the provider's public key")
    func algorithmHMAC() {
        expectProtocolError("signed with HS256, a shared secret") {
            _ = try fixtures.verify(fixtures.token("HS256 keyed with the RSA key's modulus"))
        }
    }

    @Test("an algorithm off the list is refused", arguments: ["ES512", "RS1", "PS256K", "rs256", ""])
    func unknownAlgorithm(_ algorithm: String) {
        expectProtocolError("which authctl does not accept") { _ = try fixtures.verify(token(header: #"{"alg":"\#(algorithm)","kid":"rsa-1"}"#)) }
    }

    @Test("an algorithm of another kind than the named key is refused (algorithm confusion)")
    func algorithmConfusion() {
        expectProtocolError("the provider's key 'ec-256' is an EC P-256 key, which cannot check an ID token signed with RS256") {
            _ = try fixtures.verify(fixtures.token("RS256 naming the P-256 key"))
        }
        expectProtocolError("cannot check an ID token signed with ES384") {
            _ = try fixtures.verify(fixtures.token("ES384 naming the P-256 key"))
        }
    }

    @Test("a key whose alg is another than the token's is refused")
    func keyAlgorithmMismatch() throws {
        var keySet = try JSONSerialization.jsonObject(with: Data(fixtures.keySets["main"]!.utf8)) as! [String: Any]
        var keys = keySet["keys"] as! [[String: Any]]
        keys[0]["alg"] = "PS256"
        keySet["keys"] = keys
        let json = try JSONSerialization.data(withJSONObject: keySet)
        expectProtocolError("is for PS256, not for the ID token's RS256") {
            _ = try IDToken.verify(fixtures.token("RS256"), keys: JSONWebKeySet(json: Array(json)), issuer: fixtures.issuer,
                                   clientID: fixtures.clientID, nonce: fixtures.nonce, serverNow: fixtures.validNow)
        }
    }

    @Test("critical header extensions are refused")
    func criticalExtensions() {
        expectProtocolError("'crit'") { _ = try fixtures.verify(token(header: #"{"alg":"RS256","kid":"rsa-1","crit":["b64"]}"#)) }
    }

    // MARK: The key

    @Test("without a kid, the only key that fits the algorithm checks it")
    func withoutKeyID() throws {
        #expect(try fixtures.verify(fixtures.token("RS256 without kid")).subject == "248289761001")
        #expect(try fixtures.verify(fixtures.token("ES256 without kid")).subject == "248289761001")
    }

    @Test("without a kid, several keys that fit are refused")
    func withoutKeyIDSeveralKeys() {
        expectProtocolError("names no key, and the provider's key set has several for RS256") {
            _ = try fixtures.verify(fixtures.token("RS256 without kid"), keys: "two RSA keys")
        }
    }

    @Test("without a kid, no key that fits is refused")
    func withoutKeyIDNoKey() {
        expectProtocolError("names no key, and the provider's key set has none for ES256") {
            _ = try fixtures.verify(fixtures.token("ES256 without kid"), keys: "two RSA keys")
        }
    }

    @Test("an unknown kid is told apart, to fetch the key set again")
    func unknownKeyID() throws {
        let token = fixtures.token("RS256 naming an unknown kid")
        #expect(IDToken.keyID(of: token) == "rsa-2")
        #expect(try !fixtures.keySet().hasKey(id: "rsa-2"))
        #expect(try fixtures.keySet().hasKey(id: "rsa-1"))
        expectProtocolError("names the key 'rsa-2', which the provider's key set does not have") { _ = try fixtures.verify(token) }
    }

    @Test("a token without a kid names none")
    func keyIDAbsent() {
        #expect(IDToken.keyID(of: fixtures.token("RS256 without kid")) == nil)
        #expect(IDToken.keyID(of: "not a token") == nil)
    }

    @Test("keys of unknown kinds, curves or uses are left out")
    func unusableKeysLeftOut() throws {
        let keys = try fixtures.keySet("only unusable keys")
        #expect(keys.keys.isEmpty)
        #expect(try fixtures.keySet().keys.compactMap(\.id) == ["rsa-1", "ec-256", "ec-384", "ed-1"])
    }

    @Test("an RSA key under 2048 bits is refused")
    func weakRSAKey() {
        expectProtocolError("the provider's key 'weak' cannot be used: its RSA modulus has 1024 bits") {
            _ = try fixtures.verify(fixtures.token("RS256 by the 1024-bit key"), keys: "weak")
        }
    }

    @Test("a key set that is not an object with keys is refused", arguments: [#"[]"#, #"{"keys":{}}"#, #"{}"#, "<html>", ""])
    func malformedKeySet(_ json: String) {
        expectProtocolError("key set") { _ = try JSONWebKeySet(json: Array(json.utf8)) }
    }

    @Test("a key with a malformed member is named when used")
    func malformedKey() {
        let keys = #"{"keys":[{"kty":"EC","crv":"P-256","kid":"ec-256","x":"AA==","y":"AA"}]}"#
        expectProtocolError("the provider's key 'ec-256' cannot be used: its 'x' is not base64url") {
            _ = try IDToken.verify(fixtures.token("ES256"), keys: JSONWebKeySet(json: Array(keys.utf8)), issuer: fixtures.issuer,
                                   clientID: fixtures.clientID, nonce: nil, serverNow: fixtures.validNow)
        }
    }

    // MARK: The claims

    @Test("a token of another issuer is refused")
    func wrongIssuer() {
        expectProtocolError("was issued by 'https://evil.example.com/realms/desk', not by the provider") {
            _ = try fixtures.verify(fixtures.token("another issuer"))
        }
    }

    @Test("the issuer must match exactly, trailing slash included")
    func issuerTrailingSlash() {
        expectProtocolError("was issued by") { _ = try fixtures.verify(fixtures.token("issuer with a trailing slash")) }
    }

    @Test("a token for another client is refused")
    func wrongAudience() {
        expectProtocolError("the ID token was issued for another client") { _ = try fixtures.verify(fixtures.token("another audience")) }
        expectProtocolError("the ID token was issued for another client") {
            _ = try fixtures.verify(fixtures.token("audiences without the client"))
        }
    }

    @Test("several audiences need azp equal to the client")
    func severalAudiences() throws {
        #expect(try fixtures.verify(fixtures.token("audiences with azp")).audiences == ["authctl", "api"])
        expectProtocolError("authorized party ('azp') is not this client") { _ = try fixtures.verify(fixtures.token("audiences without azp")) }
        expectProtocolError("authorized party ('azp') is not this client") {
            _ = try fixtures.verify(fixtures.token("audiences with another azp"))
        }
    }

    @Test("an expired token is refused, by the provider's clock")
    func expired() throws {
        let atExpiry = fixtures.expiresAt * 1_000_000
        expectProtocolError("the ID token has expired") { _ = try fixtures.verify(fixtures.token("RS256"), serverNow: atExpiry) }
        #expect(try fixtures.verify(fixtures.token("RS256"), serverNow: atExpiry - 1).subject == "248289761001")
    }

    @Test("the server's clock decides, not the local one")
    func serverClockOffset() throws {
        let hour: UInt64 = 3_600_000_000
        // Locally an hour past the expiry, but the provider's clock is two hours behind.
        let localNow = fixtures.expiresAt * 1_000_000 + hour
        #expect(try fixtures.verify(fixtures.token("RS256"), serverNow: localNow - 2 * hour).subject == "248289761001")
        // Locally ten minutes before the expiry, but the provider's clock is an hour ahead.
        let earlierLocalNow = fixtures.expiresAt * 1_000_000 - hour / 6
        expectProtocolError("has expired") { _ = try fixtures.verify(fixtures.token("RS256"), serverNow: earlierLocalNow + hour) }
    }

    @Test("a token issued more than 5 minutes ahead is refused")
    func issuedAhead() throws {
        let issued = fixtures.issuedAt * 1_000_000
        #expect(try fixtures.verify(fixtures.token("RS256"), serverNow: issued - 300_000_000).subject == "248289761001")
        expectProtocolError("issued more than 5 minutes ahead") {
            _ = try fixtures.verify(fixtures.token("RS256"), serverNow: issued - 300_000_001)
        }
    }

    @Test("the nonce must be the one sent")
    func nonce() throws {
        expectProtocolError("the ID token's nonce does not match the sign-in") { _ = try fixtures.verify(fixtures.token("RS256"), nonce: "other") }
        expectProtocolError("the ID token has no nonce, and the sign-in sent one") { _ = try fixtures.verify(fixtures.token("no nonce")) }
        #expect(try fixtures.verify(fixtures.token("no nonce"), nonce: .some(nil)).nonce == nil)
    }

    @Test("required claims must be there")
    func requiredClaims() {
        expectProtocolError("has no subject ('sub')") { _ = try fixtures.verify(fixtures.token("no sub")) }
        expectProtocolError("has no expiry ('exp')") { _ = try fixtures.verify(fixtures.token("no exp")) }
    }

    @Test("a payload that is not an object is refused, once its signature holds")
    func payloadNotObject() {
        expectProtocolError("payload is not a JSON object") { _ = try fixtures.verify(fixtures.token("payload is an array")) }
    }

    // MARK: The form

    @Test("malformed compact forms are refused", arguments: [
        "", "a.b", "a.b.c.d", "..", "e30.e30.", "e30=.e30.AQID", "e30.e30.AQ+D", "e30.e30.AQ/D", "e30.e30.AQI", "e30.e30.A",
        "e30 .e30.AQID", "e30.e30.AQID\n",
    ].map(Sample.init))
    func malformed(_ text: Sample<String>) {
        expectProtocolError("the ID token") { _ = try fixtures.verify(text.value) }
    }

    @Test("a header that is not an object with an alg is refused", arguments: [#""RS256""#, #"[]"#, #"{"kid":"rsa-1"}"#, #"{"alg":256}"#, "not json"])
    func malformedHeader(_ header: String) {
        expectProtocolError("header is not a JSON object with an 'alg'") { _ = try fixtures.verify(token(header: header)) }
    }

    @Test("parts longer than 16 KiB are refused", arguments: [0, 1, 2])
    func hugeParts(_ part: Int) {
        var parts = fixtures.token("RS256").split(separator: ".").map(String.init)
        parts[part] = String(repeating: "A", count: 16 * 1024 + 4)
        expectProtocolError("is longer than 16 KiB") { _ = try fixtures.verify(parts.joined(separator: ".")) }
    }

    @Test("base64url is strict", arguments: [
        ("", [UInt8]()), ("AA", [0]), ("AAE", [0, 1]), ("_-8", [255, 239]),
    ])
    func base64URL(_ text: String, _ bytes: [UInt8]) {
        #expect(Base64URL.decode(text) == bytes)
        #expect(Base64URL.encode(bytes) == text)
    }

    @Test("base64url refuses padding, other alphabets and non-zero unused bits", arguments: ["AA==", "A", "+/8", "AB", "AAF", "A A"])
    func base64URLRefused(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    // MARK: Refreshes

    @Test("a refreshed token of the same issuer, audience and subject is accepted")
    func refreshed() throws {
        let stored = try IDToken.storedClaims(of: fixtures.token("RS256"))
        let claims = try IDToken.verifyRefreshed(fixtures.token("refreshed"), stored: stored, keys: fixtures.keySet(), issuer: fixtures.issuer,
                                                 clientID: fixtures.clientID, serverNow: fixtures.refreshNow)
        #expect(claims.issuedAt == (fixtures.issuedAt + 1800) * 1_000_000)
    }

    @Test("a refreshed token of another subject or audience is refused")
    func refreshedForOther() throws {
        let stored = try IDToken.storedClaims(of: fixtures.token("RS256"))
        expectProtocolError("names another subject") {
            _ = try IDToken.verifyRefreshed(fixtures.token("refreshed for another subject"), stored: stored, keys: fixtures.keySet(),
                                            issuer: fixtures.issuer, clientID: fixtures.clientID, serverNow: fixtures.refreshNow)
        }
        expectProtocolError("names other audiences") {
            _ = try IDToken.verifyRefreshed(fixtures.token("refreshed with an added audience"), stored: stored, keys: fixtures.keySet(),
                                            issuer: fixtures.issuer, clientID: fixtures.clientID, serverNow: fixtures.refreshNow)
        }
    }

    @Test("a refreshed token is verified as a new one")
    func refreshedIsVerified() throws {
        let stored = try IDToken.storedClaims(of: fixtures.token("RS256"))
        let forged = flipping(ofByte: 0, inPart: 2, of: fixtures.token("refreshed"))
        expectProtocolError("signature does not verify") {
            _ = try IDToken.verifyRefreshed(forged, stored: stored, keys: fixtures.keySet(), issuer: fixtures.issuer,
                                            clientID: fixtures.clientID, serverNow: fixtures.refreshNow)
        }
    }
}
