// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// One `AssumeRoleWithWebIdentity` at AWS STS: its query API (version 2011-06-15), unsigned, a
/// form posted, an XML answer read.
struct STSExchange: Sendable {
    let endpoint: ServerURL
    let transport: any HTTPTransport
    let timeout: Double
    let clock: @Sendable () -> UInt64

    /// What STS answered that is not a failure of its own.
    enum Outcome: Equatable {
        case credentials(AuthController.AWSCredentials)
        /// `InvalidIdentityToken` or `ExpiredTokenException`, quoted: a refreshed ID token may pass.
        case refusedToken(String)
    }

    /// The namespace of every element STS answers with.
    static let namespace = "https://sts.amazonaws.com/doc/2011-06-15/"

    func assumeRoleWithWebIdentity(_ role: AuthController.AWSRole, sessionName: String, idToken: String) async throws(AuthError) -> Outcome {
        var form = FormBody()
        form.add("Action", "AssumeRoleWithWebIdentity")
        form.add("Version", "2011-06-15")
        form.add("RoleArn", role.arn)
        form.add("RoleSessionName", sessionName)
        form.add("WebIdentityToken", idToken)
        if let duration = role.duration { form.add("DurationSeconds", String(duration)) }
        let request = HTTPRequest(method: "POST", url: endpoint.rawValue,
                                  headers: [("Content-Type", "application/x-www-form-urlencoded; charset=utf-8"), ("Accept", "text/xml"),
                                            ("User-Agent", TokenExchange.userAgent)],
                                  body: form.bytes)
        let response = try await transport.send(request, timeout: .seconds(timeout))
        let arrivedAt = clock()
        return try Self.outcome(of: response, from: endpoint, arrivedAt: arrivedAt,
                                lasting: UInt64(role.duration ?? Self.longestDuration), idToken: idToken)
    }

    /// The longest STS grants a role session, in seconds (12 hours).
    static let longestDuration = 43_200

    /// What `response` says, its times made local by STS's `Date` (§ clocks: as a token server's).
    /// Credentials expired by the local clock are refused; their expiry is at most `lasting`
    /// seconds away (what was asked for, else the longest STS grants), whatever STS says, so that
    /// a wrong clock or a lying answer cannot keep them for years. STS's words in an error are
    /// quoted without any piece of `idToken` it echoed.
    static func outcome(of response: HTTPResponse, from endpoint: ServerURL, arrivedAt: UInt64,
                        lasting seconds: UInt64 = UInt64(longestDuration), idToken: String = "") throws(AuthError) -> Outcome {
        let sts = "STS at \(endpoint)"
        if (300..<400).contains(response.status) {
            throw .protocolError("\(sts) answered with a redirect (HTTP \(response.status)); authctl does not follow redirects: give the final URL with --sts-endpoint")
        }
        if response.status >= 500 {
            throw .unavailable("\(sts) failed (HTTP \(response.status)); try again later")
        }
        let answer = try STSAnswer(response.body, from: sts)
        switch answer {
        case .error(let code, let message):
            let code = code.withoutPieces(of: idToken), message = message?.withoutPieces(of: idToken)
            let quoted = "\(code.peerText(limit: 100))\(message.map { ": " + $0.peerText(limit: 200) } ?? "")"
            switch code {
            case "InvalidIdentityToken", "ExpiredTokenException": return .refusedToken(quoted)
            case "AccessDenied": throw .denied("\(sts) refused the role: \(quoted)")
            default: throw .unavailable("\(sts) refused: \(quoted)")
            }
        case .credentials(let accessKeyID, let secretAccessKey, let sessionToken, let expiration):
            guard (200..<300).contains(response.status) else {
                throw .protocolError("\(sts) answered HTTP \(response.status) with credentials; that is not STS's answer")
            }
            // STS's clock, however far off: its Expiration is by that clock.
            let serverDate = response.headers["date"].flatMap(HTTPDate.microseconds(imfFixdate:))
            let offset = serverDate.map { Int64(clamping: $0) - Int64(clamping: arrivedAt) } ?? 0
            let serverNow = serverDate ?? arrivedAt
            guard expiration > serverNow else {
                throw .protocolError("\(sts) answered with credentials that have expired (their Expiration is not after its Date)")
            }
            let local = expiration.subtractingClamped(offset)
            guard local > arrivedAt else {
                throw .protocolError("\(sts) answered with credentials that have expired by this machine's clock (Expiration \(Timestamp.rfc3339(microseconds: expiration)), Date \(response.headers["date"]?.peerText(limit: 40) ?? "none")); check both clocks")
            }
            let expiresAt = min(local, arrivedAt.addingClamped(seconds.multipliedClamped(by: 1_000_000)))
            return .credentials(AuthController.AWSCredentials(accessKeyID: accessKeyID, secretAccessKey: secretAccessKey,
                                                              sessionToken: sessionToken, expiresAt: Timestamp.date(microseconds: expiresAt)))
        }
    }
}

/// STS's XML answer, read through ``XMLElement`` (libxml2, no DTD, no entities): the
/// credentials of `AssumeRoleWithWebIdentityResponse`, or the `Code` and `Message` of an
/// `ErrorResponse`. Anything else is ``AuthError/protocolError(_:)-enum.case``.
enum STSAnswer: Equatable {
    case credentials(accessKeyID: String, secretAccessKey: String, sessionToken: String, expiration: UInt64)
    case error(code: String, message: String?)

    init(_ body: [UInt8], from sts: String) throws(AuthError) {
        func malformed(_ why: String) -> AuthError { .protocolError("\(sts) answered with \(why); that is not STS's answer") }
        let root: XMLElement
        do {
            root = try XMLElement.document(body)
        } catch {
            switch error {
            case .tooLarge: throw malformed("more than 64 KiB")
            case .notWellFormed: throw malformed("something that is not well-formed XML")
            case .declarations: throw malformed("XML that declares a DTD or entities")
            case .tooDeep: throw malformed("XML nested more than \(XMLElement.maximumDepth) deep")
            case .unavailable: throw .unavailable("libxml2 is not installed, and authctl needs it to read STS's answers; install the Debian package libxml2")
            }
        }
        let namespace = STSExchange.namespace
        func only(_ parent: XMLElement, _ name: String, in namespace: String?) throws(AuthError) -> XMLElement {
            let found = parent.children(name, in: namespace)
            guard found.count == 1 else { throw malformed(found.isEmpty ? "no \(name)" : "more than one \(name)") }
            return found[0]
        }
        func value(_ element: XMLElement, limit: Int) throws(AuthError) -> String {
            var text = Substring(element.text)
            while let first = text.first, first.isWhitespace { text.removeFirst() }
            while let last = text.last, last.isWhitespace { text.removeLast() }
            guard !text.isEmpty, text.utf8.count <= limit, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), element.children.isEmpty else {
                throw malformed("a \(element.name) that is empty, too long or not visible ASCII")
            }
            return String(text)
        }
        switch (root.name, root.namespace) {
        case ("AssumeRoleWithWebIdentityResponse", namespace):
            let result = try only(root, "AssumeRoleWithWebIdentityResult", in: namespace)
            let credentials = try only(result, "Credentials", in: namespace)
            let expirationText = try value(try only(credentials, "Expiration", in: namespace), limit: 64)
            guard let expiration = Timestamp.microseconds(rfc3339: expirationText) else {
                throw malformed("an Expiration that is not an ISO 8601 time")
            }
            self = .credentials(accessKeyID: try value(try only(credentials, "AccessKeyId", in: namespace), limit: 128),
                                secretAccessKey: try value(try only(credentials, "SecretAccessKey", in: namespace), limit: 1024),
                                sessionToken: try value(try only(credentials, "SessionToken", in: namespace), limit: 16 * 1024),
                                expiration: expiration)
        case ("ErrorResponse", let errorNamespace) where errorNamespace == namespace || errorNamespace == nil:
            // Errors without the namespace too: STS's front ends answer some of them so.
            let error = try only(root, "Error", in: errorNamespace)
            let code = try value(try only(error, "Code", in: errorNamespace), limit: 256)
            let messages = error.children("Message", in: errorNamespace)
            guard messages.count <= 1 else { throw malformed("more than one Message") }
            self = .error(code: code, message: messages.first.map(\.text))
        default:
            throw malformed("a document that is neither AssumeRoleWithWebIdentityResponse nor ErrorResponse in STS's namespace")
        }
    }
}

extension String {
    /// The text without any piece of `secret` at least `length` bytes long, each replaced by
    /// `…`: STS may quote the web identity token it was sent back in its error message, and an
    /// error message goes to the terminal and into logs.
    func withoutPieces(of secret: String, length: Int = 16) -> String {
        let secret = Array(secret.utf8), bytes = Array(utf8)
        guard secret.count >= length, bytes.count >= length else { return self }
        var pieces = Set<ArraySlice<UInt8>>()
        for start in 0...(secret.count - length) { pieces.insert(secret[start..<(start + length)]) }
        var hidden = [Bool](repeating: false, count: bytes.count)
        for start in 0...(bytes.count - length) where pieces.contains(bytes[start..<(start + length)]) {
            for index in start..<(start + length) { hidden[index] = true }
        }
        guard hidden.contains(true) else { return self }
        var result: [UInt8] = []
        for (index, byte) in bytes.enumerated() {
            if !hidden[index] { result.append(byte) } else if index == 0 || !hidden[index - 1] { result += Array("…".utf8) }
        }
        return String(decoding: result, as: UTF8.self)
    }
}
