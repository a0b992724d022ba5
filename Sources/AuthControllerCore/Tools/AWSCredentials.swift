// SPDX-License-Identifier: Apache-2.0
public import FoundationEssentials

extension AuthController {
    /// An IAM role to assume with the session's ID token (STS `AssumeRoleWithWebIdentity`), and
    /// how to ask for it. The role's trust policy must accept the OpenID provider as a federated
    /// principal, with the client id as the audience (`aud`).
    public struct AWSRole: Sendable, Hashable {
        /// The role's ARN, `arn:PARTITION:iam::ACCOUNT:role/PATH`.
        public let arn: String
        /// How long the credentials last, 900–43200 seconds; `nil`: the role's own default.
        public let duration: Int?
        /// The role session's name; `nil`: made from the signed-in account's id.
        public let sessionName: String?
        /// Where STS is asked.
        public let stsEndpoint: ServerURL

        /// The role `arn`, checked. `stsEndpoint` (§ the server URL's rules: `https`, or `http` to
        /// a loopback host) wins over `region` (`https://sts.REGION.amazonaws.com/`); with
        /// neither, STS's global endpoint `https://sts.amazonaws.com/`. What is not valid is
        /// ``AuthError/usage(_:)-enum.case``.
        public init(arn: String, duration: Int? = nil, sessionName: String? = nil, region: String? = nil,
                    stsEndpoint: String? = nil) throws(AuthError) {
            guard Self.isRoleARN(arn) else {
                throw .usage("'\(arn.peerText(limit: 120))' is not an IAM role's ARN (arn:aws:iam::123456789012:role/NAME)")
            }
            if let duration, !(900...43_200).contains(duration) {
                throw .usage("the duration must be 900 to 43200 seconds (15 minutes to 12 hours), not \(duration)")
            }
            if let sessionName, !Self.isSessionName(sessionName) {
                throw .usage("the session name must be 2 to 64 of the characters A-Z a-z 0-9 + = , . @ _ -")
            }
            // Checked even when the endpoint is given: the set-up writes it into the config file.
            if let region {
                guard (1...64).contains(region.utf8.count), region.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "-") }),
                      !region.hasPrefix("-") else {
                    throw .usage("'\(region.peerText(limit: 64))' is not an AWS region (us-east-1, eu-west-3, …)")
                }
            }
            let endpoint: String
            if let stsEndpoint {
                endpoint = stsEndpoint
            } else if let region {
                endpoint = "https://sts.\(region).amazonaws.com/"
            } else {
                endpoint = "https://sts.amazonaws.com/"
            }
            do {
                self.stsEndpoint = try ServerURL(validating: endpoint, role: "STS endpoint")
            } catch {
                throw .usage(error.message)
            }
            self.arn = arn
            self.duration = duration
            self.sessionName = sessionName
        }

        /// `arn:PARTITION:iam::ACCOUNT:role/PATH/NAME`, as IAM names a role: a partition
        /// (`aws`, `aws-cn`, …), twelve digits, and a path and name of `[A-Za-z0-9+=,.@_-]`.
        static func isRoleARN(_ text: String) -> Bool {
            guard (20...2048).contains(text.utf8.count) else { return false }
            let parts = text.split(separator: ":", maxSplits: 5, omittingEmptySubsequences: false)
            guard parts.count == 6, parts[0] == "arn", parts[2] == "iam", parts[3].isEmpty,
                  (1...32).contains(parts[1].count), parts[1].first?.isLetter == true,
                  parts[1].utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "-") }),
                  parts[4].utf8.count == 12, parts[4].utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                  parts[5].hasPrefix("role/") else { return false }
            let path = parts[5].dropFirst("role/".count)
            let segments = path.split(separator: "/", omittingEmptySubsequences: false)
            return !segments.isEmpty && segments.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy(Self.isNameByte) }
                && segments.last!.count <= 64
        }

        /// 2–64 of `[A-Za-z0-9+=,.@_-]`, as STS takes a `RoleSessionName`.
        static func isSessionName(_ text: String) -> Bool {
            (2...64).contains(text.utf8.count) && text.utf8.allSatisfy(Self.isNameByte)
        }

        private static func isNameByte(_ byte: UInt8) -> Bool {
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || "+=,.@_-".utf8.contains(byte)
        }

        /// The session name STS is given for `account`: ``sessionName``, else the account's id
        /// with every character STS does not take made `-`, cut to 64 (and made two long).
        func sessionName(for account: AccountID) -> String {
            if let sessionName { return sessionName }
            var name = String(decoding: account.rawValue.utf8.map { Self.isNameByte($0) ? $0 : UInt8(ascii: "-") }, as: UTF8.self)
            // A multi-byte character became as many '-': cut by bytes, all of them ASCII now.
            name = String(name.utf8.prefix(64))!
            while name.utf8.count < 2 { name += "-" }
            return name
        }
    }

    /// Temporary AWS credentials for a role, as AWS's tools sign requests with them.
    public struct AWSCredentials: Sendable, Equatable, Codable {
        /// The access key id (`ASIA…`).
        public let accessKeyID: String
        /// The secret access key.
        public let secretAccessKey: String
        /// The session token that goes with them.
        public let sessionToken: String
        /// When they expire, by the local clock.
        public let expiresAt: Date

        package init(accessKeyID: String, secretAccessKey: String, sessionToken: String, expiresAt: Date) {
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
            self.sessionToken = sessionToken
            self.expiresAt = expiresAt
        }

        // As kept in the keyring.
        private enum CodingKeys: String, CodingKey {
            case accessKeyID = "AccessKeyId", secretAccessKey = "SecretAccessKey", sessionToken = "SessionToken", expiresAt = "Expiration"
        }

        /// Credentials as the keyring keeps them: `AccessKeyId`, `SecretAccessKey`,
        /// `SessionToken` and `Expiration` (RFC 3339).
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            accessKeyID = try container.decode(String.self, forKey: .accessKeyID)
            secretAccessKey = try container.decode(String.self, forKey: .secretAccessKey)
            sessionToken = try container.decode(String.self, forKey: .sessionToken)
            let expiration = try container.decode(String.self, forKey: .expiresAt)
            guard let microseconds = Timestamp.microseconds(rfc3339: expiration) else {
                throw DecodingError.dataCorruptedError(forKey: .expiresAt, in: container, debugDescription: "not an RFC 3339 time")
            }
            expiresAt = Timestamp.date(microseconds: microseconds)
        }

        /// The credentials as ``init(from:)`` reads them.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(accessKeyID, forKey: .accessKeyID)
            try container.encode(secretAccessKey, forKey: .secretAccessKey)
            try container.encode(sessionToken, forKey: .sessionToken)
            try container.encode(Timestamp.rfc3339(expiresAt), forKey: .expiresAt)
        }
    }

    /// How long before they expire kept credentials are asked for again: AWS's tools refresh
    /// credentials from a process when less than that is left.
    static let awsCredentialsMargin: UInt64 = 5 * 60 * 1_000_000

    /// Credentials for `role`, from the keyring while they have more than five minutes left
    /// (by the local clock), else from STS with the session's verified ID token — refreshed
    /// first when it is due, and once more when STS calls it invalid or expired — and then kept
    /// in the keyring (one item per service, account and role: attributes `service`, `account`
    /// and `aws-role`; never in a file) until they are due or the session ends. Any number of
    /// callers at once, in any processes, make one STS request per role.
    ///
    /// Needs a service bound to an OpenID provider (``AuthError/invalidInput(_:)-enum.case``
    /// otherwise). Nobody signed in is ``AuthError/notSignedIn(_:)-enum.case``; an ID token STS
    /// refuses, or `AccessDenied`, ``AuthError/denied(_:)-enum.case``; another STS error
    /// ``AuthError/unavailable(_:detail:)-enum.case``; an answer that is not STS's
    /// ``AuthError/protocolError(_:)-enum.case``. Never prompts but for the keyring's unlock,
    /// and never opens a browser.
    public func awsCredentials(for role: AWSRole) async throws(AuthError) -> AWSCredentials {
        let session = try await offload { () throws(AuthError) -> SessionRecord in try self.oidcSession() }
        let account = session.user!
        let key = ItemKey(service: service, account: account, awsRole: role.arn)
        let request = KeptAWSCredentials.Request(role, account: account)
        if let kept = try await offload({ () throws(AuthError) in try self.keptAWSCredentials(key, asked: request) }) { return kept }
        return try await settings.withCredentialLock(service: service, subject: role.arn, timeout: serverTimeout * 2 + .seconds(10)) { () async throws(AuthError) -> AWSCredentials in
            // Another caller may have asked while this one waited for the lock.
            if let kept = try await offload({ () throws(AuthError) in try self.keptAWSCredentials(key, asked: request) }) { return kept }
            let credentials = try await self.assume(role, account: account)
            let kept = KeptAWSCredentials(credentials: credentials, request: request)
            try await offload { () throws(AuthError) in try self.keep(kept, at: key, role: role, of: session) }
            return credentials
        }
    }

    /// Credentials as the keyring keeps them, with what they were asked for: kept ones serve a
    /// caller who asks for the same session name, duration and STS, and no other.
    struct KeptAWSCredentials: Codable {
        struct Request: Codable, Equatable {
            var sessionName: String
            var duration: Int?
            var endpoint: String

            init(_ role: AWSRole, account: AccountID) {
                (sessionName, duration, endpoint) = (role.sessionName(for: account), role.duration, role.stsEndpoint.rawValue)
            }

            private enum CodingKeys: String, CodingKey {
                case sessionName = "RoleSessionName", duration = "DurationSeconds", endpoint = "STSEndpoint"
            }
        }

        var credentials: AWSCredentials
        var request: Request?

        init(credentials: AWSCredentials, request: Request) {
            (self.credentials, self.request) = (credentials, request)
        }

        /// The credentials' own members beside the request's, in one JSON object.
        init(from decoder: any Decoder) throws {
            credentials = try AWSCredentials(from: decoder)
            request = try? Request(from: decoder)
        }

        func encode(to encoder: any Encoder) throws {
            try credentials.encode(to: encoder)
            try request?.encode(to: encoder)
        }
    }

    /// The record of an OpenID service's signed-in session, from the settings alone. Blocks.
    private func oidcSession() throws(AuthError) -> SessionRecord {
        let record = try intactRecord()
        guard let binding = record.binding else {
            throw .invalidInput("\(service) is not bound to a token server; \(hint: .bindServer)")
        }
        guard binding.tokenProtocol == .oidc else {
            throw .invalidInput("\(service) is bound to a token server that issues no verified ID token (protocol \(binding.tokenProtocol.rawValue)), and STS takes only those; bind an OpenID provider with `authctl server set URL --protocol oidc`")
        }
        guard record.user != nil else { throw .notSignedIn("nobody is signed in to \(service); \(hint: .signIn(service))") }
        return record
    }

    /// The credentials kept at `key` while they have more than the margin left, when they were
    /// asked for as `request` asks. Credentials that do not read (another tool's item, damaged)
    /// are not kept ones. Blocks.
    private func keptAWSCredentials(_ key: ItemKey, asked request: KeptAWSCredentials.Request) throws(AuthError) -> AWSCredentials? {
        guard let bytes = try keyring.secret(key),
              let kept = try? JSONDecoder().decode(KeptAWSCredentials.self, from: Data(bytes)), kept.request == request else { return nil }
        return Timestamp.microseconds(kept.credentials.expiresAt) > clock().addingClamped(Self.awsCredentialsMargin) ? kept.credentials : nil
    }

    /// Keeps `credentials` at `key`, unless `session` ended meanwhile: written under the settings
    /// lock, which every sign-out holds while it deletes kept credentials, so none is written
    /// after it. A session signed out and in again is another one: credentials asked for with
    /// the old one's ID token are not kept for it. Blocks; an unlock prompt comes before the lock.
    private func keep(_ credentials: KeptAWSCredentials, at key: ItemKey, role: AWSRole, of session: SessionRecord) throws(AuthError) {
        try keyring.unlock()
        try settings.withExclusiveLock { () throws(AuthError) in
            let now = try settings.read(service: service).record
            guard now.user == session.user, now.signedInAt == session.signedInAt else {
                throw .notSignedIn("\(key.account) was signed out of \(service) meanwhile; \(hint: .signIn(service))")
            }
            try keyring.store(credentials, for: key, label: "AWS credentials of \(key.account) for \(role.arn) (\(service))")
        }
    }

    /// Asks STS, with the session's ID token; once more with a refreshed one when STS calls it
    /// invalid or expired.
    private func assume(_ role: AWSRole, account: AccountID) async throws(AuthError) -> AWSCredentials {
        guard let transport else {
            throw .unavailable("authctl has no HTTP client to reach STS at \(role.stsEndpoint)")
        }
        var refreshed = false
        while true {
            let (token, idToken) = try await verifiedIDToken(for: "STS", forceRefresh: refreshed)
            guard token.account == account else {
                throw .notSignedIn("\(account) was signed out of \(service) meanwhile; \(hint: .signIn(service))")
            }
            let exchange = STSExchange(endpoint: role.stsEndpoint, transport: transport, timeout: serverTimeout.seconds, clock: clock)
            switch try await exchange.assumeRoleWithWebIdentity(role, sessionName: role.sessionName(for: account), idToken: idToken) {
            case .credentials(let credentials):
                return credentials
            case .refusedToken where !refreshed:
                refreshed = true
            case .refusedToken(let quoted):
                throw .denied("STS at \(role.stsEndpoint) refused the ID token of \(account), also once refreshed: \(quoted); the role's trust policy must accept the provider's issuer, with the client id as the audience")
            }
        }
    }
}
