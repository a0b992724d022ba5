// SPDX-License-Identifier: Apache-2.0
/// The settings file: a GLib key file at `DIRECTORY/settings.ini` with one group per service,
/// written atomically, guarded by an exclusive `flock` on `DIRECTORY/settings.lock`.
///
/// The directory is `$XDG_CONFIG_HOME/authctl`; the caller resolves it (the library reads no
/// environment variables).
public struct KeyFileSettingsStore: SettingsStore {
    /// The folder holding `settings.ini` and `settings.lock`.
    public let directory: String
    /// How long to wait for the lock before giving up with ``AuthError/temporaryFailure(_:detail:)-enum.case``.
    package let lockTimeout: Double

    /// The settings file, `DIRECTORY/settings.ini`.
    public var filePath: String { directory + "/settings.ini" }
    var lockPath: String { directory + "/settings.lock" }
    var corruptCopyPath: String { filePath + ".corrupt" }

    /// The settings in `directory`, whose lock is waited for at most `lockTimeout`. Touches
    /// no file yet: the directory is created by the first write or lock.
    public init(directory: String, lockTimeout: Duration = .seconds(5)) {
        self.directory = directory
        self.lockTimeout = lockTimeout.seconds
    }

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
        Self.encode(record, into: keyFile, service: service)
        try writeAtomically(keyFile.data())
        return replacedCopy
    }
}
