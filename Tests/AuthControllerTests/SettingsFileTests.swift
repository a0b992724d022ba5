// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import Foundation
import Testing
import TestSupport

/// The key-file settings store on a temporary folder of its own.
struct SettingsFolder: ~Copyable {
    let root: String
    var directory: String { root + "/config/authctl" }
    var file: String { directory + "/settings.ini" }
    var store: KeyFileSettingsStore { KeyFileSettingsStore(directory: directory, lockTimeout: .milliseconds(300)) }
    let service = ServiceName(rawValue: "svc")!

    init() {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-settings-" + UUID().uuidString).path
        try! FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func write(_ text: String, mode: Int = 0o600) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        try text.write(toFile: file, atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file)
    }

    func contents() throws -> String { try String(contentsOfFile: file, encoding: .utf8) }
}

/// The file the README's "Where data lives" describes.
@Suite("Settings file")
struct SettingsFileTests {
    let alice = AccountID(rawValue: "alice@example.org")!

    @Test("a missing file reads as nobody signed in and is not created by reading")
    func missing() throws {
        let folder = SettingsFolder()
        #expect(try folder.store.read(service: folder.service) == SettingsRead(record: SessionRecord()))
        #expect(!FileManager.default.fileExists(atPath: folder.directory))
    }

    @Test("writes create the folder 0700 and the file 0600, round-trip, and leave no temporary file")
    func roundTrip() throws {
        let folder = SettingsFolder()
        let record = SessionRecord(user: alice, name: " Ä \"q\" $(x) `y` \\", signedInAt: "2026-11-22T01:00:00Z", sequence: 7)
        try folder.store.withExclusiveLock { () throws(AuthError) in _ = try folder.store.save(record, service: folder.service) }
        #expect(try folder.mode(folder.directory) == 0o700)
        #expect(try folder.mode(folder.file) == 0o600)
        #expect(try folder.store.read(service: folder.service).record == record)
        let entries = try FileManager.default.contentsOfDirectory(atPath: folder.directory).sorted()
        #expect(entries == ["settings.ini", "settings.lock"])
        let text = try folder.contents()
        #expect(text.contains("[svc]\nuser=alice@example.org\n"))
        #expect(text.contains("sequence=7\n"))
    }

    @Test("a binding and token times round-trip; signing out keeps the binding and drops the token times")
    func binding() throws {
        let folder = SettingsFolder()
        let binding = ServerBinding(server: try ServerURL(validating: "https://Auth.example.org/token"), tokenProtocol: .json,
                                    clientID: "cli", scope: "openid profile", revokeURL: try ServerURL(validating: "https://auth.example.org/revoke"))
        let times = TokenTimes(accessExpiresAt: 1_795_000_060_000_000, refreshExpiresAt: 1_795_003_600_000_000, clockOffset: -10_800,
                               accessLifetime: 60)
        let record = SessionRecord(user: alice, name: "A", signedInAt: "2026-11-22T01:00:00Z", sequence: 1, binding: binding, tokenTimes: times)
        _ = try folder.store.save(record, service: folder.service)
        #expect(try folder.store.read(service: folder.service).record == record)
        let text = try folder.contents()
        #expect(text.contains("server=https://auth.example.org/token\nprotocol=json\nclient-id=cli\nscope=openid profile\n"))
        #expect(text.contains("access-expires-at=2026-11-18T11:07:40Z\nrefresh-expires-at=2026-11-18T12:06:40Z\nclock-offset=-10800\naccess-lifetime=60\n"))
        _ = try folder.store.save(record.signedOut(sequence: 2), service: folder.service)
        #expect(try folder.store.read(service: folder.service).record == SessionRecord(sequence: 2, binding: binding))
        #expect(!(try folder.contents()).contains("expires-at"))
    }

    @Test("RFC 3339 UTC times parse back to the microseconds they were written from", arguments: [
        UInt64(0), 951_782_400_000_000, 1_795_000_000_000_000, 4_102_444_799_000_000,
    ])
    func timeRoundTrip(_ microseconds: UInt64) {
        #expect(Timestamp.microseconds(rfc3339: Timestamp.rfc3339(microseconds: microseconds)) == microseconds)
        #expect(Timestamp.microseconds(rfc3339: "2026-11-18T11:06:40.5Z") == 1_795_000_000_500_000)
        #expect(Timestamp.microseconds(rfc3339: "2026-11-18T11:06:40.1234567891234567890123Z") == nil)  // over 40 bytes
        #expect(Timestamp.microseconds(rfc3339: "2026-02-29T00:00:00Z") == nil)
        #expect(Timestamp.microseconds(rfc3339: "2026-11-18T11:06:40.Z") == nil)
    }

    @Test("signing out keeps the sequence and drops the user keys")
    func signedOut() throws {
        let folder = SettingsFolder()
        _ = try folder.store.save(SessionRecord(user: alice, name: "A", signedInAt: "2026-11-22T01:00:00Z", sequence: 3), service: folder.service)
        _ = try folder.store.save(SessionRecord(sequence: 4), service: folder.service)
        #expect(try folder.contents() == "[svc]\nsequence=4\n")
    }

    @Test("a key named twice, or a group written twice, is corrupt: a save replaces it and keeps a copy", arguments: [
        "[svc]\nuser=bob\nname=B\nsequence=3\nuser=alice@example.org\n",
        "[svc]\nuser=bob\nsequence=3\n[other]\nsequence=1\n[svc]\nsequence=4\n",
    ])
    func keyNamedTwice(_ text: String) throws {
        let folder = SettingsFolder()
        try folder.write(text)
        let read = try folder.store.read(service: folder.service)
        #expect(read.corruption?.description.contains("appears more than once") == true)
        _ = try folder.store.save(SessionRecord(sequence: 5), service: folder.service)
        #expect(try folder.store.read(service: folder.service).corruption == nil)
        #expect(try !folder.contents().contains("user="))
        #expect(FileManager.default.fileExists(atPath: folder.file + ".corrupt"))
    }

    @Test("unknown groups, keys and comments are preserved")
    func preservesUnknown() throws {
        let folder = SettingsFolder()
        try folder.write("# my notes\n[other.service]\nuser=bob\nsequence=9\n\n[svc]\ncolour=blue\nsequence=1\n")
        _ = try folder.store.save(SessionRecord(user: alice, name: "", signedInAt: "2026-11-22T01:00:00Z", sequence: 2), service: folder.service)
        let text = try folder.contents()
        #expect(text.hasPrefix("# my notes\n"))
        #expect(text.contains("[other.service]\nuser=bob\nsequence=9\n"))
        #expect(text.contains("colour=blue"))
        #expect(try folder.store.read(service: ServiceName(rawValue: "other.service")!).record.user?.rawValue == "bob")
    }

    @Test("corrupt files are reported with their path and replaced only by a save, which keeps a copy", arguments: [
        "not a key file\u{1}", "[svc]\nsequence=minus one\n", "[svc]\nuser=\\sleading\n", "[svc\n", "[svc]\nuser=a\nname=a\\tb\n",
        "[svc]\nsequence=18446744073709551615\n", "[svc]\nsequence=18446744073709551616\n", "[svc]\nsequence=-1\n",
        "[svc]\nuser=a\nsigned-in-at=yesterday\n", "[svc]\nuser=a\nsigned-in-at=2026-13-01T00:00:00Z\n",
        "[svc]\nuser=a\nsigned-in-at=2026-11-22T01:00:00+01:00\n", "[svc]\nuser=a\nsigned-in-at=\n",
        "[svc]\nserver=http://example.com/token\n", "[svc]\nserver=\n", "[svc]\nserver=https://h/\nprotocol=soap\n",
        "[svc]\nserver=https://h/\nclient-id=a b\n", "[svc]\nserver=https://h/\nscope=a  b\n",
        "[svc]\nserver=https://h/\nrevoke-url=ftp://h/\n",
        "[svc]\nserver=https://h/\nuser=a\naccess-expires-at=soon\n",
        "[svc]\nserver=https://h/\nuser=a\nclock-offset=9223372036854775807\n",
        "[svc]\nserver=https://h/\nuser=a\naccess-lifetime=-5\n",
    ].map(Sample.init))
    func corrupt(_ sample: Sample<String>) throws {
        let text = sample.value
        let folder = SettingsFolder()
        try folder.write(text)
        let read = try folder.store.read(service: folder.service)
        #expect(read.corruption?.description.contains(folder.file) == true)
        #expect(try folder.contents() == text)  // reads never rewrite it
        let copy = try folder.store.save(SessionRecord(), service: folder.service)
        #expect(copy == folder.file + ".corrupt")
        #expect(try String(contentsOfFile: folder.file + ".corrupt", encoding: .utf8) == text)
        #expect(try folder.store.read(service: folder.service) == SettingsRead(record: SessionRecord()))
    }

    @Test("a corrupt group of one service is replaced alone: other services keep their groups")
    func corruptGroupAlone() throws {
        let folder = SettingsFolder()
        let other = "[other]\nuser=bob\nsequence=9\nserver=https://auth.example.org/token\nprotocol=oauth2\n"
        try folder.write(other + "\n[svc]\nsequence=abc\n")
        #expect(try folder.store.read(service: folder.service).corruption != nil)
        let copy = try folder.store.save(SessionRecord(sequence: 0), service: folder.service)
        #expect(copy == folder.file + ".corrupt")
        let otherRead = try folder.store.read(service: ServiceName(rawValue: "other")!)
        #expect(otherRead.corruption == nil)
        #expect(otherRead.record.user?.rawValue == "bob")
        #expect(otherRead.record.binding != nil)
        #expect(try folder.store.read(service: folder.service) == SettingsRead(record: SessionRecord()))
    }

    @Test("readAll gives every group that names a service, with its record as read(service:) gives it, a corrupt group marked")
    func readAll() throws {
        let folder = SettingsFolder()
        #expect(try folder.store.readAll().isEmpty, "no file: no services")
        try folder.write("[zeta]\nuser=bob\nname=Bob\nsequence=9\nserver=https://auth.example.org/token\nprotocol=oauth2\n"
                         + "\n[svc]\nsequence=abc\n\n[alpha]\nsequence=2\n\n[not a service!]\nsequence=1\n")
        let reads = try folder.store.readAll()
        #expect(Set(reads.keys.map(\.rawValue)) == ["zeta", "svc", "alpha"])
        for (service, read) in reads { #expect(read == (try folder.store.read(service: service)), "\(service)") }
        #expect(reads[folder.service]?.corruption != nil)
        try folder.write("not a key file")
        #expect { try folder.store.readAll() } throws: { ($0 as? AuthError)?.exitCode == 78 }
    }

    @Test("a symlink is refused with 78 and the fix")
    func symlink() throws {
        let folder = SettingsFolder()
        try folder.write("[svc]\nsequence=1\n")
        try FileManager.default.moveItem(atPath: folder.file, toPath: folder.root + "/elsewhere.ini")
        try FileManager.default.createSymbolicLink(atPath: folder.file, withDestinationPath: folder.root + "/elsewhere.ini")
        #expect(throws: AuthError.settingsUnsafe("the settings file \(folder.file) is a symbolic link; remove it (`rm \(folder.file)`) and sign in again")) {
            try folder.store.read(service: folder.service)
        }
        #expect { try folder.store.save(SessionRecord(), service: folder.service) } throws: { ($0 as? AuthError)?.exitCode == 78 }
        #expect(try String(contentsOfFile: folder.root + "/elsewhere.ini", encoding: .utf8) == "[svc]\nsequence=1\n")
    }

    @Test("a file writable by group or others is refused with the chmod to run", arguments: [0o620, 0o602, 0o666])
    func groupWritable(_ mode: Int) throws {
        let folder = SettingsFolder()
        try folder.write("[svc]\nsequence=1\n", mode: mode)
        #expect(throws: AuthError.settingsUnsafe("\(folder.file) is writable by group or others; fix it with `chmod 600 \(folder.file)`")) {
            try folder.store.read(service: folder.service)
        }
    }

    @Test("a file or folder owned by someone else is refused with the chown to run (78)", arguments: [false, true])
    func foreignOwner(_ folderToo: Bool) throws {
        let folder = SettingsFolder()
        try folder.write("[svc]\nsequence=1\n")
        let path = folderToo ? folder.directory : folder.file
        // The suite runs as root in CI, and root can give a file away; a user cannot, and then
        // this rule cannot be shown from inside.
        try #require(chown(path, 65534, 65534) == 0, "chown needs root: run the tests as root")
        #expect(throws: AuthError.settingsUnsafe("\(path) is not owned by you; fix it with `chown \(geteuid()) \(path)`")) {
            try folder.store.read(service: folder.service)
        }
    }

    @Test("not a regular file: 78")
    func directoryAsFile() throws {
        let folder = SettingsFolder()
        try FileManager.default.createDirectory(atPath: folder.file, withIntermediateDirectories: true)
        #expect(throws: AuthError.settingsUnsafe("the settings file \(folder.file) is not a regular file; remove it and sign in again")) {
            try folder.store.read(service: folder.service)
        }
    }

    @Test("a file where the settings folder must be: 74 with the path")
    func fileInsteadOfDirectory() throws {
        let folder = SettingsFolder()
        try FileManager.default.createDirectory(atPath: folder.root + "/config", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: folder.directory, contents: Data("x".utf8))
        #expect {
            try folder.store.withExclusiveLock { () throws(AuthError) in _ = try folder.store.save(SessionRecord(), service: folder.service) }
        } throws: { error in
            (error as? AuthError)?.exitCode == 74 && "\(error)".contains(folder.directory)
        }
        let blocked = KeyFileSettingsStore(directory: folder.directory + "/nested")
        #expect { try blocked.save(SessionRecord(), service: folder.service) } throws: { ($0 as? AuthError)?.exitCode == 74 }
    }

    @Test("the lock is exclusive across descriptors and gives up with 75")
    func lockTimeout() async throws {
        let folder = SettingsFolder()
        let store = folder.store
        let holding = AsyncStream<Void>.makeStream()
        let release = AsyncStream<Void>.makeStream()
        let holder = Thread {
            try? store.withExclusiveLock { () throws(AuthError) in
                holding.continuation.yield()
                // Blocks this thread until the test is done with the contended attempt.
                let semaphore = DispatchSemaphore(value: 0)
                Task { for await _ in release.stream { break }; semaphore.signal() }
                semaphore.wait()
            }
        }
        holder.start()
        for await _ in holding.stream { break }
        let started = Date()
        #expect {
            try store.withExclusiveLock { () throws(AuthError) in }
        } throws: { error in
            (error as? AuthError)?.exitCode == 75
        }
        #expect(Date().timeIntervalSince(started) >= 0.3)
        release.continuation.yield()
    }

    @Test("timestamps are RFC 3339 UTC")
    func timestamps() {
        #expect(Timestamp.rfc3339(microseconds: 0) == "1970-01-01T00:00:00Z")
        #expect(Timestamp.rfc3339(microseconds: 951_782_400_000_000) == "2000-02-29T00:00:00Z")
        #expect(Timestamp.rfc3339(microseconds: 1_795_000_000_999_999) == "2026-11-18T11:06:40Z")
    }
}
