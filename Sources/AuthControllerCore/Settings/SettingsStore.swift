// SPDX-License-Identifier: Apache-2.0
/// One service's group of the settings file: who is signed in, the event sequence, and — for a
/// service bound to a token server — the binding and what is known of the tokens' lifetimes.
public struct SessionRecord: Equatable, Sendable {
    /// The signed-in account, or `nil` when nobody is.
    package var user: AccountID?
    /// The signed-in account's display name.
    package var name: String?
    /// When the account signed in (RFC 3339, UTC).
    package var signedInAt: String?
    /// The number of the last event of the service; kept after sign-out.
    package var sequence: UInt64
    /// The token server the service is bound to; kept after sign-out.
    package var binding: ServerBinding?
    /// The signed-in account's token lifetimes (bound services only).
    package var tokenTimes: TokenTimes?
    /// While nobody is signed in: why the last session ended (the reason of its `signed-out`
    /// event), so a process that waited while it ended can tell a session the server ended from
    /// one that was signed out, and `serve` an end another process announced from a forged one.
    package var endedBecause: LoginEvent.Reason?
    /// The signed-in account's e-mail address, as an OpenID provider vouched for it; the avatar
    /// is that address's.
    package var email: String?
    /// The hosts (`HOST` or `HOST:PORT`) that `git` may be given the session's access token
    /// for; kept after sign-out, as the binding is.
    package var gitHosts: [String] = []
    /// The container registries that get the session's access token through the Docker
    /// credential helper; kept after sign-out, as the binding is.
    package var registries: [ServedRegistry] = []

    /// The record of a service nobody has signed in to yet: no account, no events, no binding.
    public init() { self.init(sequence: 0) }

    /// A record with every field given; the defaults make the record of a service nobody ever signed
    /// in to.
    package init(user: AccountID? = nil, name: String? = nil, signedInAt: String? = nil, sequence: UInt64 = 0,
                binding: ServerBinding? = nil, tokenTimes: TokenTimes? = nil, endedBecause: LoginEvent.Reason? = nil,
                email: String? = nil) {
        self.user = user
        self.name = name
        self.signedInAt = signedInAt
        self.sequence = sequence
        self.binding = binding
        self.tokenTimes = tokenTimes
        self.endedBecause = endedBecause
        self.email = email
    }

    /// The record once nobody is signed in, the last event being `sequence`, for `reason`: the
    /// binding stays.
    package func signedOut(sequence: UInt64, because reason: LoginEvent.Reason? = nil) -> SessionRecord {
        var record = SessionRecord(sequence: sequence, binding: binding, endedBecause: reason)
        record.keepLists(of: self)
        return record
    }

    /// Takes from `record` the lists that outlive its sessions: the git hosts and the registries
    /// that get the session's token. Sign-in and sign-out both keep them, through this one list.
    mutating func keepLists(of record: SessionRecord) {
        gitHosts = record.gitHosts
        registries = record.registries
    }
}

/// What reading the settings found.
public struct SettingsRead: Equatable, Sendable {
    /// The record of the service (empty when the file is missing or corrupt).
    public var record: SessionRecord
    /// Set when the file is corrupt: why, in a message that names the file and what replaces
    /// it. The record is then empty.
    public var corruption: AuthError.Message?

    /// What a read found: `record`, or (with an empty record) a corrupt file.
    public init(record: SessionRecord, corruption: AuthError.Message? = nil) {
        self.record = record
        self.corruption = corruption
    }

    /// What a read found, the corruption said in plain text.
    public init(record: SessionRecord, corruption: String?) {
        self.init(record: record, corruption: corruption.map { AuthError.Message($0) })
    }
}

/// Remembers who is signed in, per service.
public protocol SettingsStore: Sendable {
    /// Reads the record of `service` without taking the lock and without ever writing. An
    /// unsafe file throws ``AuthError/settingsUnsafe(_:)-enum.case``; a corrupt one is reported in ``SettingsRead/corruption``.
    func read(service: ServiceName) throws(AuthError) -> SettingsRead

    /// Every service that has a group in the settings, with what reading it found (as
    /// ``read(service:)`` would), from one read of the file; none when the file is missing. A
    /// file that does not parse at all is ``AuthError/settingsUnsafe(_:)-enum.case``. Never writes.
    func readAll() throws(AuthError) -> [ServiceName: SettingsRead]

    /// Writes `record` as the group of `service`, keeping every other group and key. A corrupt
    /// file is first kept aside as `settings.ini.corrupt`; its path is returned then.
    /// Call under ``withExclusiveLock(_:)``.
    @discardableResult
    func save(_ record: SessionRecord, service: ServiceName) throws(AuthError) -> String?

    /// Runs `body` holding the exclusive settings lock, waited for at most a few seconds,
    /// then ``AuthError/temporaryFailure(_:detail:)-enum.case``.
    func withExclusiveLock<T>(_ body: () throws(AuthError) -> T) throws(AuthError) -> T

    /// Runs `body` holding the refresh lock of `service` — one token refresh at a time per
    /// service, across processes — waited for at most `timeout` (then
    /// ``AuthError/temporaryFailure(_:detail:)-enum.case``). It is a lock of
    /// its own: the settings lock stays free while a slow server is asked.
    func withRefreshLock<T: Sendable>(service: ServiceName, timeout: Duration,
                                      _ body: () async throws(AuthError) -> T) async throws(AuthError) -> T

    /// Runs `body` holding the lock of `service`'s credentials for `subject` (an AWS role) — one
    /// request for them at a time, across processes — waited for as ``withRefreshLock(service:timeout:_:)``.
    /// It is a lock of its own, beside the refresh lock, which `body` may take.
    func withCredentialLock<T: Sendable>(service: ServiceName, subject: String, timeout: Duration,
                                         _ body: () async throws(AuthError) -> T) async throws(AuthError) -> T
}
