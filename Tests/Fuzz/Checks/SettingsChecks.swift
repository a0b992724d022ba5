// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore

/// The settings file, which people edit by hand and other versions of authctl write.
enum SettingsChecks {
    private static let service = ServiceName(rawValue: "io.github.authctl")!

    /// A file the codec reads gives a record that, written back into the same file (as every
    /// change does) or into an empty one, reads back as the same record; other groups stay.
    @Sendable static func keyFile(_ input: [UInt8]) throws(PropertyViolation) {
        guard case .success(let (keyFile, read)) = KeyFileSettingsStore.decode(input, service: service) else { return }
        // Times are written in whole seconds (Timestamp.rfc3339): a fraction written by hand is
        // dropped the first time the file is written.
        var record = read
        if var times = record.tokenTimes {
            times.accessExpiresAt = times.accessExpiresAt.map(wholeSeconds)
            times.refreshExpiresAt = times.refreshExpiresAt.map(wholeSeconds)
            record.tokenTimes = times
        }
        let groups = keyFile.groups()
        KeyFileSettingsStore.encode(read, into: keyFile, service: service)
        let rewritten = keyFile.data()
        switch KeyFileSettingsStore.decode(rewritten, service: service) {
        case .success(let (again, reread)):
            try require(reread == record, "a record written back reads as another:\n\(record)\n\(reread)")
            try require(Set(again.groups()) == Set(groups + [service.rawValue]), "writing the record changed the other groups")
        case .failure(let corrupt):
            throw PropertyViolation(description: "a record written back reads as corrupt: \(corrupt.reason)")
        }
        let fresh = KeyFile()
        KeyFileSettingsStore.encode(read, into: fresh, service: service)
        switch KeyFileSettingsStore.decode(fresh.data(), service: service) {
        case .success(let (_, reread)):
            try require(reread == record, "a record written to a new file reads as another:\n\(record)\n\(reread)")
        case .failure(let corrupt):
            throw PropertyViolation(description: "a record written to a new file reads as corrupt: \(corrupt.reason)")
        }
    }

    private static func wholeSeconds(_ microseconds: UInt64) -> UInt64 {
        microseconds / 1_000_000 * 1_000_000
    }
}
