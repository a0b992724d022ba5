/// The settings file: a GLib key file at `DIRECTORY/settings.ini` with one group per service,
/// written atomically, guarded by an exclusive `flock` on `DIRECTORY/settings.lock`.
///
/// The directory is `$XDG_CONFIG_HOME/authctl`; the caller resolves it (the library reads no
/// environment variables).
public struct KeyFileSettingsStore: SettingsStore {
    /// The folder holding `settings.ini` and `settings.lock`.
    public let directory: String
    /// How long to wait for the lock before giving up with ``AuthError/temporaryFailure(_:detail:)-enum.case``.
    public let lockTimeout: Double

    /// The settings file, `DIRECTORY/settings.ini`.
    public var filePath: String { directory + "/settings.ini" }
    var lockPath: String { directory + "/settings.lock" }
    var corruptCopyPath: String { filePath + ".corrupt" }

    /// The settings in `directory`, whose lock is waited for at most `lockTimeout` seconds. Touches
    /// no file yet: the directory is created by the first write or lock.
    public init(directory: String, lockTimeout: Double = 5) {
        self.directory = directory
        self.lockTimeout = lockTimeout
    }

    // MARK: - SettingsStore

    /// Reads and parses `settings.ini` without the lock; a missing file or directory reads as
    /// nobody signed in. Blocks on the file system only.
    public func read(service: ServiceName) throws(AuthError) -> SettingsRead {
        guard try checkDirectory(), let bytes = try readFileBytes() else { return SettingsRead(record: SessionRecord()) }
        switch Self.decode(bytes, service: service) {
        case .success(let (_, record)): return SettingsRead(record: record)
        case .failure(let corrupt): return SettingsRead(record: SessionRecord(), corruption: corruption(corrupt))
        }
    }

    /// One read of `settings.ini`, a record per group; a group that is not a valid service name is
    /// left out.
    public func readAll() throws(AuthError) -> [ServiceName: SettingsRead] {
        guard try checkDirectory(), let bytes = try readFileBytes() else { return [:] }
        let keyFile: KeyFile
        do throws(GLibError) { keyFile = try KeyFile(parsing: bytes) } catch {
            throw .settingsUnsafe(corruption(Corrupt(reason: error.message)))
        }
        var reads: [ServiceName: SettingsRead] = [:]
        for group in keyFile.groups() {
            guard let service = try? ServiceName(validating: group) else { continue }
            do throws(Corrupt) {
                reads[service] = SettingsRead(record: try Self.record(in: keyFile, service: service))
            } catch {
                reads[service] = SettingsRead(record: SessionRecord(), corruption: corruption(error))
            }
        }
        return reads
    }

    private func corruption(_ corrupt: Corrupt) -> AuthError.Message {
        "the settings file \(filePath) is corrupt (\(corrupt.reason)); \(hint: .signInOrOutToReplaceSettings) and keeps a copy as settings.ini.corrupt"
    }

    /// Writes the whole key file to a temporary file and renames it over `settings.ini`, so a
    /// reader sees the old file or the new one, never half of one. A corrupt file is first kept as
    /// `settings.ini.corrupt` (a hard link); when it still parses, the other services keep their
    /// groups.
    public func save(_ record: SessionRecord, service: ServiceName) throws(AuthError) -> String? {
        try createDirectory()
        var keyFile = KeyFile()
        var replacedCopy: String?
        if let bytes = try readFileBytes() {
            switch Self.decode(bytes, service: service) {
            case .success(let (parsed, _)):
                keyFile = parsed
            case .failure:
                // A second name for the old file: the rename of the new one below replaces
                // settings.ini, so a failed write leaves the corrupt file where it was.
                try io("keep the corrupt settings file as \(corruptCopyPath)") { () throws(Posix.Failure) in
                    Posix.unlink(corruptCopyPath)
                    try Posix.link(filePath, corruptCopyPath)
                }
                replacedCopy = corruptCopyPath
                // When the file still parses, only this service's group was unusable: the
                // other services keep theirs (their bindings, their signed-in users).
                if let parsed = try? KeyFile(parsing: bytes) {
                    parsed.removeGroup(service.rawValue)
                    keyFile = parsed
                }
            }
        }
        let group = service.rawValue
        func set(_ key: String, _ value: String?) {
            if let value { keyFile.setString(value, group: group, key: key) } else { keyFile.removeKey(group: group, key: key) }
        }
        set("user", record.user?.rawValue)
        set("name", record.user == nil ? nil : record.name ?? "")
        set("signed-in-at", record.user == nil ? nil : record.signedInAt)
        set("server", record.binding?.server.rawValue)
        set("protocol", record.binding?.tokenProtocol.rawValue)
        set("client-id", record.binding?.clientID)
        set("scope", record.binding?.scope)
        set("revoke-url", record.binding?.revokeURL?.rawValue)
        let openID = record.binding?.openID
        set("account-claim", openID?.accountClaim)
        set("device-authorization-url", openID?.deviceAuthorizationURL?.rawValue)
        set("redirect-port", openID?.redirectPort.map { String($0) })
        let provider = openID?.provider
        set("issuer", provider?.issuer)
        set("token-endpoint", provider?.tokenEndpoint.rawValue)
        set("authorization-endpoint", provider?.authorizationEndpoint?.rawValue)
        set("device-authorization-endpoint", provider?.deviceAuthorizationEndpoint?.rawValue)
        set("userinfo-endpoint", provider?.userinfoEndpoint?.rawValue)
        set("revocation-endpoint", provider?.revocationEndpoint?.rawValue)
        set("jwks-uri", provider?.jwksURI.rawValue)
        set("email", record.user == nil ? nil : record.email)
        // GKeyFile's list form (`a;b;`); a host has no `;` or `\\` to escape.
        set("git-hosts", record.gitHosts.isEmpty ? nil : record.gitHosts.map { $0 + ";" }.joined())
        // Likewise: neither a registry nor its user name has a `;` or `\\`.
        set("registries", record.registries.isEmpty ? nil : record.registries.map { $0.description + ";" }.joined())
        let times = record.user == nil ? nil : record.tokenTimes
        set("access-expires-at", times?.accessExpiresAt.map(Timestamp.rfc3339(microseconds:)))
        set("refresh-expires-at", times?.refreshExpiresAt.map(Timestamp.rfc3339(microseconds:)))
        set("clock-offset", times.map { String($0.clockOffset) })
        set("access-lifetime", times?.accessLifetime.map { String($0) })
        set("ended", record.user == nil ? record.endedBecause?.rawValue : nil)
        // Written only when the server issued no refresh token: files of earlier versions, which
        // lack the key, describe renewable tokens.
        set("renewable", times.flatMap { $0.renewable ? nil : "false" })
        keyFile.setString(String(record.sequence), group: group, key: "sequence")
        try writeAtomically(keyFile.data())
        return replacedCopy
    }

    /// Waits for the lock up to ``lockTimeout`` by blocking the calling thread (a lock held by
    /// another process can only be polled): async code reaches it through a blocking context
    /// of its own (`offload`), never on the cooperative pool.
    public func withExclusiveLock<T>(_ body: () throws(AuthError) -> T) throws(AuthError) -> T {
        let descriptor = try openLock(lockPath)
        // Closing the descriptor releases the lock.
        defer { Posix.close(descriptor) }
        var wait = LockWait(timeout: lockTimeout)
        while try !tryLock(descriptor, lockPath) {
            guard let milliseconds = wait.next() else {
                throw .temporaryFailure("another authctl held the settings lock \(lockPath) for more than \(formatSeconds(lockTimeout)) s; try again")
            }
            Posix.pause(milliseconds: milliseconds)
        }
        return try body()
    }

    /// An `flock` on `DIRECTORY/refresh-MD5.lock`, one file per service (named by the MD5 of the
    /// service name), so the refreshes of one service in any process take turns. Waiting polls the
    /// lock and suspends the task between tries, blocking no thread.
    public func withRefreshLock<T: Sendable>(service: ServiceName, timeout: Double,
                                             _ body: () async throws(AuthError) -> T) async throws(AuthError) -> T {
        // One file per service, named by a digest: a service name may be 255 bytes, too long
        // for a file name with a prefix.
        let path = "\(directory)/refresh-\(GLibText.md5Hex(service.rawValue)).lock"
        let descriptor = try openLock(path)
        defer { Posix.close(descriptor) }
        var wait = LockWait(timeout: timeout)
        while try !tryLock(descriptor, path) {
            guard let milliseconds = wait.next() else {
                throw .temporaryFailure("another authctl has been refreshing the token of \(service) for more than \(formatSeconds(timeout)) s; try again")
            }
            // Waiting suspends the task, not a thread.
            try? await Task.sleep(for: .milliseconds(milliseconds))
        }
        return try await body()
    }

    /// Opens (creating) a lock file in the settings directory.
    private func openLock(_ path: String) throws(AuthError) -> Int32 {
        try createDirectory()
        return try io("open the lock \(path)") { () throws(Posix.Failure) in try Posix.openLockFile(path) }
    }

    private func tryLock(_ descriptor: Int32, _ path: String) throws(AuthError) -> Bool {
        try io("lock \(path)") { () throws(Posix.Failure) in try Posix.tryLockExclusive(descriptor) }
    }

    /// Back-off while waiting for a lock: 1, 2, 4 … 20 ms, until `timeout` seconds have passed.
    private struct LockWait {
        let giveUp: Double
        var backoff = 1

        init(timeout: Double) { giveUp = Posix.monotonicSeconds() + timeout }

        /// Milliseconds to wait before trying again, `nil` once the time is up.
        mutating func next() -> Int? {
            guard Posix.monotonicSeconds() < giveUp else { return nil }
            defer { backoff = min(backoff * 2, 20) }
            return backoff
        }
    }

    // MARK: - Decoding

    struct Corrupt: Error { let reason: String }

    /// The whole key file and the service's record, or why the file is corrupt.
    private static func decode(_ bytes: [UInt8], service: ServiceName) -> Result<(KeyFile, SessionRecord), Corrupt> {
        Result { () throws(Corrupt) in
            let keyFile: KeyFile
            do throws(GLibError) { keyFile = try KeyFile(parsing: bytes) } catch { throw Corrupt(reason: error.message) }
            return (keyFile, try record(in: keyFile, service: service))
        }
    }

    private static func record(in keyFile: KeyFile, service: ServiceName) throws(Corrupt) -> SessionRecord {
        func value(_ key: String) throws(Corrupt) -> String? {
            do { return try keyFile.string(group: service.rawValue, key: key) } catch {
                throw Corrupt(reason: "key '\(key)': \(error.message)")
            }
        }
        var record = SessionRecord()
        if let sequence = try value("sequence") {
            guard let number = UInt64(sequence) else { throw Corrupt(reason: "'sequence' is not an unsigned integer") }
            // The next event's number must exist: a file at the limit is as unusable as one
            // with a word there, and must fail before anything is stored.
            guard number < UInt64.max else { throw Corrupt(reason: "'sequence' is at its limit and cannot be incremented") }
            record.sequence = number
        }
        record.binding = try binding(value)
        if let hosts = try value("git-hosts") {
            record.gitHosts = hosts.split(separator: ";").map(String.init)
            guard record.gitHosts.allSatisfy(GitHost.isValid) else { throw Corrupt(reason: "'git-hosts' holds something that is not a host") }
        }
        if let registries = try value("registries") {
            for entry in registries.split(separator: ";") {
                guard let registry = ServedRegistry(String(entry)) else {
                    throw Corrupt(reason: "'registries' holds something that is not a registry (HOST[:PORT][=USERNAME])")
                }
                record.registries.append(registry)
            }
        }
        guard let user = try value("user"), !user.isEmpty else {
            // A hint only: a value this version does not know is no reason.
            record.endedBecause = try value("ended").flatMap(LoginEvent.Reason.init(rawValue:))
            return record
        }
        guard let account = AccountID(rawValue: user) else { throw Corrupt(reason: "'user' is not a valid account id") }
        record.user = account
        let name = try value("name") ?? ""
        guard (try? DisplayName.validate(name)) != nil else { throw Corrupt(reason: "'name' is not a valid display name") }
        record.name = name
        if let signedInAt = try value("signed-in-at") {
            guard Timestamp.isRFC3339UTC(signedInAt) else { throw Corrupt(reason: "'signed-in-at' is not an RFC 3339 UTC time") }
            record.signedInAt = signedInAt
        }
        if record.binding != nil { record.tokenTimes = try tokenTimes(value) }
        if let email = try value("email") {
            guard (try? DisplayName.validate(email)) != nil, !email.isEmpty else { throw Corrupt(reason: "'email' is not a valid e-mail address") }
            record.email = email
        }
        return record
    }

    /// The binding keys; a value authctl would refuse on the command line makes the file corrupt.
    private static func binding(_ value: (String) throws(Corrupt) -> String?) throws(Corrupt) -> ServerBinding? {
        guard let server = try value("server") else { return nil }
        let (tokenProtocol, clientID, scope, revokeURL) = (try value("protocol"), try value("client-id"), try value("scope"),
                                                          try value("revoke-url"))
        let (accountClaim, deviceAuthorizationURL, redirectPort) = (try value("account-claim"), try value("device-authorization-url"),
                                                                    try value("redirect-port"))
        let discovered = try provider(value)
        var binding: ServerBinding
        do throws(AuthError) {
            binding = try ServerBinding(validatingServer: server, protocol: tokenProtocol, clientID: clientID, scope: scope,
                                        revokeURL: revokeURL, accountClaim: accountClaim,
                                        deviceAuthorizationURL: deviceAuthorizationURL, redirectPort: redirectPort)
        } catch {
            throw Corrupt(reason: "the server binding: \(error.message)")
        }
        if let discovered {
            guard Discovery.sameIssuer(discovered.issuer, binding.server) else { throw Corrupt(reason: "'issuer' does not name the server") }
            if binding.tokenProtocol == .oidc { binding.openID?.provider = discovered }
        }
        return binding
    }

    /// What discovery found at an OpenID provider; `nil` before the first discovery (no
    /// `issuer` key). A key that is there must hold what discovery would accept.
    private static func provider(_ value: (String) throws(Corrupt) -> String?) throws(Corrupt) -> OpenIDProvider? {
        guard let issuer = try value("issuer") else { return nil }
        func url(_ key: String) throws(Corrupt) -> ServerURL? {
            guard let text = try value(key) else { return nil }
            guard let url = ServerURL(rawValue: text) else { throw Corrupt(reason: "'\(key)' is not a normalised https URL") }
            return url
        }
        guard let tokenEndpoint = try url("token-endpoint"), let jwksURI = try url("jwks-uri") else {
            throw Corrupt(reason: "'issuer' is there without 'token-endpoint' and 'jwks-uri'")
        }
        return OpenIDProvider(issuer: issuer, tokenEndpoint: tokenEndpoint, authorizationEndpoint: try url("authorization-endpoint"),
                              deviceAuthorizationEndpoint: try url("device-authorization-endpoint"),
                              userinfoEndpoint: try url("userinfo-endpoint"), revocationEndpoint: try url("revocation-endpoint"),
                              jwksURI: jwksURI)
    }

    private static func tokenTimes(_ value: (String) throws(Corrupt) -> String?) throws(Corrupt) -> TokenTimes {
        func time(_ key: String) throws(Corrupt) -> UInt64? {
            guard let text = try value(key) else { return nil }
            guard let microseconds = Timestamp.microseconds(rfc3339: text) else {
                throw Corrupt(reason: "'\(key)' is not an RFC 3339 UTC time")
            }
            return microseconds
        }
        var times = TokenTimes(accessExpiresAt: try time("access-expires-at"), refreshExpiresAt: try time("refresh-expires-at"))
        if let offset = try value("clock-offset") {
            // A server clock decades away is a broken file, not a fact: keep the arithmetic safe.
            guard let seconds = Int64(offset), seconds.magnitude <= TokenTimes.maximumSpan else {
                throw Corrupt(reason: "'clock-offset' is not a whole number of seconds within ten years")
            }
            times.clockOffset = seconds
        }
        if let lifetime = try value("access-lifetime") {
            guard let seconds = UInt64(lifetime), seconds <= TokenTimes.maximumSpan else {
                throw Corrupt(reason: "'access-lifetime' is not a whole number of seconds within ten years")
            }
            times.accessLifetime = seconds
        }
        if let renewable = try value("renewable") {
            guard renewable == "true" || renewable == "false" else { throw Corrupt(reason: "'renewable' is neither true nor false") }
            times.renewable = renewable == "true"
        }
        return times
    }

    // MARK: - Files

    /// Refuses an unsafe directory; returns whether it exists.
    private func checkDirectory() throws(AuthError) -> Bool {
        let status = try io("inspect \(directory)") { () throws(Posix.Failure) in try Posix.lstatus(directory) }
        guard let status else { return false }
        if status.isSymbolicLink {
            throw .settingsUnsafe("the settings directory \(directory) is a symbolic link; remove it (`rm \(directory)`) and sign in again")
        }
        guard status.isDirectory else {
            throw .settingsIO("cannot use the settings directory \(directory): it is not a directory; move that file away")
        }
        try checkOwnership(status, path: directory, mode: "700")
        return true
    }

    private func checkOwnership(_ status: Posix.FileStatus, path: String, mode: String) throws(AuthError) {
        if status.owner != Posix.effectiveUserID {
            throw .settingsUnsafe("\(path) is not owned by you; fix it with `chown \(Posix.effectiveUserID) \(path)`")
        }
        if status.permissions & 0o022 != 0 {
            throw .settingsUnsafe("\(path) is writable by group or others; fix it with `chmod \(mode) \(path)`")
        }
    }

    /// Creates `$XDG_CONFIG_HOME` and the settings directory (mode 0700) as needed.
    private func createDirectory() throws(AuthError) {
        if try checkDirectory() { return }
        var path = ""
        for component in directory.split(separator: "/") {
            path += "/" + component
            try io("create the settings directory \(path)") { () throws(Posix.Failure) in
                try Posix.makeDirectory(path, mode: 0o700)
            }
        }
        guard try checkDirectory() else {
            throw .settingsIO("cannot create the settings directory \(directory)")
        }
    }

    /// The file's bytes, or `nil` if it does not exist. Refuses an unsafe file.
    private func readFileBytes() throws(AuthError) -> [UInt8]? {
        let descriptor: Int32
        do {
            descriptor = try Posix.openForReading(filePath)
        } catch {
            if error.isNotFound { return nil }
            if error.isSymbolicLink {
                throw .settingsUnsafe("the settings file \(filePath) is a symbolic link; remove it (`rm \(filePath)`) and sign in again")
            }
            throw .settingsIO("cannot read the settings file \(filePath): \(error.message)")
        }
        defer { Posix.close(descriptor) }
        let status = try io("inspect \(filePath)") { () throws(Posix.Failure) in try Posix.fstatus(descriptor) }
        guard status.isRegularFile else {
            throw .settingsUnsafe("the settings file \(filePath) is not a regular file; remove it and sign in again")
        }
        try checkOwnership(status, path: filePath, mode: "600")
        return try io("read the settings file \(filePath)") { () throws(Posix.Failure) in try Posix.readAll(descriptor) }
    }

    /// Temporary file with a random name, `O_EXCL|O_NOFOLLOW`, fsync, rename, fsync of the
    /// directory: readers see the old file or the new one, never a part.
    private func writeAtomically(_ bytes: [UInt8]) throws(AuthError) {
        let suffix = Posix.randomBytes(8).map { String($0, radix: 16) }.joined()
        let temporary = "\(directory)/.settings.ini.\(suffix).tmp"
        let descriptor = try io("write the settings file \(filePath)") { () throws(Posix.Failure) in
            try Posix.createExclusive(temporary, mode: 0o600)
        }
        do {
            try io("write the settings file \(filePath)") { () throws(Posix.Failure) in
                defer { Posix.close(descriptor) }
                try Posix.fchmod(descriptor, 0o600)
                try Posix.writeAll(descriptor, bytes)
                try Posix.fsync(descriptor)
            }
            try io("replace the settings file \(filePath)") { () throws(Posix.Failure) in
                try Posix.rename(temporary, filePath)
            }
        } catch {
            Posix.unlink(temporary)
            throw error
        }
        // The rename is durable only once the directory entry is on disk. It has taken effect
        // already, so a failure here is not reported as a failed write: that would undo the
        // keyring side of a change whose settings side stands.
        try? Posix.syncDirectory(directory)
    }

    /// Runs one file-system step; a failure becomes ``AuthError/settingsIO(_:)-enum.case`` naming the step.
    private func io<T>(_ what: String, _ body: () throws(Posix.Failure) -> T) throws(AuthError) -> T {
        do { return try body() } catch {
            throw .settingsIO("cannot \(what): \(error.message)")
        }
    }
}
