// SPDX-License-Identifier: Apache-2.0
internal import Glibc
internal import SystemPackage

/// A tool's own configuration file that a set-up changes (Docker's `config.json`, AWS's
/// `config`): read whole up to a limit, its symbolic links followed as the tool follows them,
/// and replaced atomically, keeping its mode. Messages name it as `name` ("the Docker
/// configuration").
package struct ConfigurationFile {
    let path: String
    let name: String
    let sizeLimit: Int

    package init(path: String, named name: String, sizeLimit: Int) {
        self.path = path
        self.name = name
        self.sizeLimit = sizeLimit
    }

    /// Runs `body` (which reads, edits and writes the file) while this process holds the lock
    /// on the file's folder: two set-ups at once would otherwise each write the file as it was
    /// before the other's edit, and one edit would be lost. A missing folder is made first,
    /// under the lock of the nearest folder above it that exists, so that every set-up locks
    /// the same folder; it goes again should `body` fail. Waits at most 5 s for each lock, then
    /// ``AuthError/temporaryFailure(_:)-enum.case``.
    func locked<T>(_ body: (String) throws(AuthError) -> T) throws(AuthError) -> T {
        let directory = Self.folder(of: try resolvingLinks())
        var made: [String] = []
        if (try? Posix.lstatus(directory)) == nil {
            var existing = Self.folder(of: directory)
            while (try? Posix.lstatus(existing)) == nil, existing != "/", existing != "." { existing = Self.folder(of: existing) }
            try holdingLock(on: existing) { () throws(AuthError) in
                do { try Self.makeFolders(directory, made: &made) } catch {
                    for folder in made.reversed() { _ = rmdir(folder) }
                    throw .settingsIO("cannot make the folder \(directory) of \(name): \(error)")
                }
            }
        }
        do {
            // Found again under the lock: another set-up may have replaced the link's target.
            return try holdingLock(on: directory) { () throws(AuthError) in try body(try resolvingLinks()) }
        } catch {
            for folder in made.reversed() { _ = rmdir(folder) }
            throw error
        }
    }

    private func holdingLock<T>(on folder: String, _ body: () throws(AuthError) -> T) throws(AuthError) -> T {
        let descriptor: Int32
        do { descriptor = try Posix.openFolder(folder) } catch {
            throw .settingsIO("cannot open the folder \(folder) of \(name): \(error)")
        }
        defer { Posix.close(descriptor) }
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            do {
                if try Posix.tryLockExclusive(descriptor) { break }
            } catch {
                throw .settingsIO("cannot lock the folder \(folder) of \(name): \(error)")
            }
            guard ContinuousClock.now < deadline else {
                throw .temporaryFailure("another program has been changing \(name) in \(folder) for more than 5 s; try again")
            }
            Posix.pause(milliseconds: 10)
        }
        return try body()
    }

    /// The file ``path`` names, its symbolic links followed (at most 40, as the kernel does),
    /// even to a file that does not exist yet.
    func resolvingLinks() throws(AuthError) -> String {
        var current = path
        for _ in 0..<40 {
            let status: Posix.FileStatus?
            do { status = try Posix.lstatus(current) } catch {
                throw .settingsIO("cannot read \(name) \(current): \(error)")
            }
            guard let status, status.isSymbolicLink else { return current }
            guard let target = Posix.readLink(current) else { throw .settingsIO("cannot read the symbolic link \(current)") }
            current = target.hasPrefix("/") ? target : Self.folder(of: current) + "/" + target
        }
        throw .settingsIO("\(name) \(path) is a loop of symbolic links")
    }

    /// The bytes and mode of the file at `target`; `nil` when there is none. Over the size
    /// limit is ``AuthError/invalidInput(_:)-enum.case``: it is not a file the tool wrote.
    func read(_ target: String) throws(AuthError) -> (bytes: [UInt8], mode: mode_t)? {
        let descriptor: Int32
        do { descriptor = try Posix.openForReading(target) } catch .noSuchFileOrDirectory {
            return nil
        } catch {
            throw .settingsIO("cannot read \(name) \(target): \(error)")
        }
        defer { Posix.close(descriptor) }
        do {
            let status = try Posix.fstatus(descriptor)
            guard status.isRegularFile else { throw AuthError.settingsIO("\(name) \(target) is not a regular file") }
            let bytes = try Posix.readAll(descriptor, limit: sizeLimit + 1)
            guard bytes.count <= sizeLimit else {
                throw AuthError.invalidInput("\(name) \(target) is over \(sizeLimit / 1024 / 1024) MiB: it is not one the tool wrote")
            }
            return (bytes, status.permissions)
        } catch let error as AuthError {
            throw error
        } catch {
            throw .settingsIO("cannot read \(name) \(target): \(error)")
        }
    }

    /// Replaces the file at `target` with `bytes` through a new file beside it, renamed over
    /// it; missing folders are made with mode 0700.
    func write(_ bytes: [UInt8], to target: String, mode: mode_t) throws(AuthError) {
        // Never renamed over a device, a pipe, a socket or a folder that has the name: as root,
        // `setup /dev/null` would replace the machine's /dev/null.
        let status: Posix.FileStatus?
        do { status = try Posix.lstatus(target) } catch { throw .settingsIO("cannot read \(name) \(target): \(error)") }
        if let status, !status.isRegularFile {
            throw .settingsIO("\(name) \(target) is not a regular file; give the path of a file")
        }
        let directory = Self.folder(of: target)
        // The folders made for the file go again if it cannot be written: a failure changes nothing.
        var made: [String] = []
        func removeMade() { for folder in made.reversed() { _ = rmdir(folder) } }
        do { try Self.makeFolders(directory, made: &made) } catch {
            removeMade()
            throw .settingsIO("cannot make the folder \(directory) of \(name): \(error)")
        }
        let fileName = target.split(separator: "/").last.map(String.init) ?? "config"
        let temporary = "\(directory)/.\(fileName).\(Posix.randomBytes(8).map { String($0, radix: 16) }.joined()).tmp"
        do {
            let descriptor = try Posix.createExclusive(temporary, mode: 0o600)
            defer { Posix.close(descriptor) }
            try Posix.fchmod(descriptor, mode)
            try Posix.writeAll(descriptor, bytes)
            try Posix.fsync(descriptor)
            try Posix.rename(temporary, target)
        } catch {
            Posix.unlink(temporary)
            removeMade()
            throw .settingsIO("cannot write \(name) \(target): \(error)")
        }
        try? Posix.syncDirectory(directory)
    }

    /// Replaces the file ``path`` names (its symbolic links followed) with `bytes`, with mode
    /// `mode` whatever it had.
    package func replace(with bytes: [UInt8], mode: UInt32) throws(AuthError) {
        try write(bytes, to: try resolvingLinks(), mode: mode)
    }

    /// Makes `directory` and each missing folder above it, with mode 0700; `made` gets each
    /// folder made, the outermost first.
    private static func makeFolders(_ directory: String, made: inout [String]) throws(Errno) {
        guard try Posix.lstatus(directory) == nil else { return }
        let parent = folder(of: directory)
        if parent != directory { try makeFolders(parent, made: &made) }
        try Posix.makeDirectory(directory, mode: 0o700)
        made.append(directory)
    }

    private static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
