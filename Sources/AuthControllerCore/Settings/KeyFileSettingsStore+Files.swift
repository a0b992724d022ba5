// SPDX-License-Identifier: Apache-2.0
/// The settings directory's and file's safety checks, and the atomic replacement of the file.
extension KeyFileSettingsStore {
    /// Refuses an unsafe directory; returns whether it exists.
    func checkDirectory() throws(AuthError) -> Bool {
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
    func createDirectory() throws(AuthError) {
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
    func readFileBytes() throws(AuthError) -> [UInt8]? {
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
    func writeAtomically(_ bytes: [UInt8]) throws(AuthError) {
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
    func io<T>(_ what: String, _ body: () throws(Posix.Failure) -> T) throws(AuthError) -> T {
        do { return try body() } catch {
            throw .settingsIO("cannot \(what): \(error.message)")
        }
    }
}
