// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
import DesktopSandbox
import Foundation
import Testing

/// The Secret Service implementations desktop users run, each started for a test on a private bus
/// of its own (a ``DesktopSandbox``'s, which has no service directories, so nothing else can take
/// `org.freedesktop.secrets`). None is skipped: a missing daemon fails the test, naming its
/// Debian package.
enum Implementation: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case gnomeKeyring = "gnome-keyring"
    /// KeePassXC with its Secret Service confirmations off, as most of its users run it.
    case keePassXC = "KeePassXC"
    /// KeePassXC as it comes: it asks a person before a client reads an item it did not create,
    /// and holds a search in a locked database behind its unlock dialog.
    case keePassXCDefaults = "KeePassXC, default settings"
    case kwallet = "KWallet"
    /// libsecret's own file keyring (`SECRET_BACKEND=file`): no daemon at all.
    case fileKeyring = "libsecret file keyring"

    var testDescription: String { rawValue }

    /// The ones a person can lock while signed in (the file keyring has no lock).
    static let lockable: [Implementation] = [.gnomeKeyring, .keePassXC, .keePassXCDefaults, .kwallet]

    /// The name `keyring-daemon` knows it by, for the daemons it starts.
    fileprivate var daemonKind: String? {
        switch self {
        case .keePassXC: "keepassxc"
        case .keePassXCDefaults: "keepassxc-defaults"
        case .kwallet: "kwallet"
        case .gnomeKeyring, .fileKeyring: nil
        }
    }

    fileprivate var package: (program: String, package: String)? {
        switch self {
        case .keePassXC, .keePassXCDefaults: ("keepassxc", "keepassxc")
        case .kwallet: ("kwalletd5", "libkf5wallet-bin")
        case .gnomeKeyring, .fileKeyring: nil
        }
    }
}

/// One implementation, running for one test.
struct KeyringUnderTest: Sendable {
    let implementation: Implementation
    let sandbox: DesktopSandbox
    /// The daemon's own folder (its database, wallet or keyring file).
    let directory: String
    /// What a command needs beside the sandbox's variables: the file keyring's.
    let environment: [String: String]
    /// What `keyring-daemon` is told beside the bus (`KEEPASSXC_RECYCLE_BIN`).
    var daemonSettings: [String: String] = [:]

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("keyrings/keyring-daemon").path

    /// Starts `implementation` on a bus of its own.
    static func start(_ implementation: Implementation, settings: [String: String] = [:]) async throws -> KeyringUnderTest {
        if let package = implementation.package { _ = try which(package.program, package: package.package) }
        let sandbox = try await DesktopSandbox.started(keyring: implementation == .gnomeKeyring)
        let directory = sandbox.directory + "/keyring"
        var environment: [String: String] = [:]
        if implementation == .fileKeyring {
            environment = ["SECRET_BACKEND": "file", "SECRET_FILE_TEST_PATH": directory + "/default.keyring",
                           "SECRET_FILE_TEST_PASSWORD": "test-password"]
        }
        let keyring = KeyringUnderTest(implementation: implementation, sandbox: sandbox, directory: directory, environment: environment,
                                       daemonSettings: settings)
        if let kind = implementation.daemonKind {
            let run = try await keyring.daemon("start", kind)
            guard run.status == 0, let pid = Int32(run.output.split(separator: " ").last ?? "") else {
                await sandbox.stop()
                Issue.record("\(implementation.rawValue) did not start: \(run)")
                throw AuthError.unavailable("\(implementation.rawValue) did not start")
            }
            // Stopped with the sandbox's daemons even if this test process dies.
            sandbox.supervise(processID: pid)
        }
        return keyring
    }

    /// A scenario of its own on this keyring.
    func scenario() async throws -> Scenario {
        var scenario = try await Scenario(sandbox: sandbox)
        for (key, value) in environment { scenario.extraEnvironment[key] = value }
        if implementation == .kwallet { scenario.secretToolLookAgain = 2 }
        return scenario
    }

    /// Locks the default collection as a person (or the screen lock) does.
    func lock() async throws {
        switch implementation {
        case .gnomeKeyring: try await scenario().lockKeyring()
        case .fileKeyring: Issue.record("the file keyring has no lock")
        default: try await daemon("lock", implementation.daemonKind!).expect(0)
        }
    }

    /// Unlocks it again without a person (gnome-keyring cannot here: its prompt has no prompter).
    func unlock() async throws {
        guard let kind = implementation.daemonKind else { Issue.record("\(implementation.rawValue) cannot be unlocked here"); return }
        try await daemon("unlock", kind).expect(0)
    }

    /// Stops the daemon and starts it again on the same data: a Secret Service that restarted,
    /// under a new unique name on the bus.
    func restart() async throws {
        guard let kind = implementation.daemonKind else { Issue.record("\(implementation.rawValue) is not restarted here"); return }
        try await daemon("stop", kind).expect(0)
        let run = try await daemon("start", kind)
        #expect(run.status == 0, "\(run)")
        if let pid = Int32(run.output.split(separator: " ").last ?? "") { sandbox.supervise(processID: pid) }
    }

    /// The daemon's process id.
    var processID: Int32? { Int32((try? String(contentsOfFile: directory + "/daemon.pid", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") }

    /// Stops the daemon, then the sandbox.
    func stop() async {
        if let kind = implementation.daemonKind { _ = try? await daemon("stop", kind) }
        await sandbox.stop()
    }

    private func daemon(_ action: String, _ kind: String) async throws -> Run {
        var variables = ProcessInfo.processInfo.environment
        for (key, value) in sandbox.environment { variables[key] = value }
        for (key, value) in daemonSettings { variables[key] = value }
        return try await runProcess(Self.script, [action, kind, directory], input: nil, environment: variables, timeout: 60)
    }
}
