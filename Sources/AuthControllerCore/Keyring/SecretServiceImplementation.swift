// SPDX-License-Identifier: Apache-2.0
/// The program that serves the Secret Service: each has its own habits, and the advice a person
/// needs names the program they run.
enum SecretServiceImplementation: Equatable, Sendable {
    case gnomeKeyring
    case kwallet
    case keePassXC
    /// libsecret's file keyring: no daemon at all.
    case fileKeyring
    /// Another program, by its executable's name, or the bus name when the process cannot be read.
    case other(String)

    /// The executable of `org.freedesktop.secrets`'s owner on `bus`: its process id from the bus,
    /// then `/proc/PID/exe` (`comm` cuts names at 15 characters). `nil` with the process id when
    /// nobody owns the name.
    static func owner(on bus: SessionBus, timeout: Double) -> (implementation: SecretServiceImplementation, processID: UInt32?)? {
        guard let connection = try? bus.connection(timeout: timeout) else { return nil }
        guard let processID = GDBus.connectionOwnerProcessID(connection, of: SecretServiceCalls.busName, Deadline(seconds: timeout)) else {
            return (.other(SecretServiceCalls.busName), nil)
        }
        guard let executable = Posix.readLink("/proc/\(processID)/exe") else { return (.other(SecretServiceCalls.busName), processID) }
        // A binary replaced since it started reads as "… (deleted)".
        var name = executable.split(separator: "/").last.map(String.init) ?? executable
        if name.hasSuffix(" (deleted)") { name.removeLast(" (deleted)".count) }
        return (Self(executableName: name), processID)
    }

    init(executableName name: String) {
        switch name {
        case "gnome-keyring-daemon": self = .gnomeKeyring
        case "kwalletd5", "kwalletd6", "ksecretd": self = .kwallet
        case "keepassxc": self = .keePassXC
        default: self = .other(name)
        }
    }

    /// How `doctor` names it.
    var name: String {
        switch self {
        case .gnomeKeyring: "gnome-keyring-daemon"
        case .kwallet: "kwalletd5"
        case .keePassXC: "keepassxc"
        case .fileKeyring: "libsecret file keyring"
        case .other(let name): name
        }
    }

    /// What unlocks its default collection, for a person.
    var unlockAdvice: String {
        switch self {
        case .kwallet:
            "KWallet reports the wallet locked after a login until a program asks it to unlock, which it then does without a dialog: open the wallet in KWallet Manager (kwalletmanager5)"
        case .keePassXC: "unlock the database in KeePassXC"
        case .other(let name): "unlock the default collection in \(name)"
        default: "unlock the login keyring (e.g. in Seahorse)"
        }
    }

    /// What gives it a default collection, for a person.
    var collectionAdvice: String {
        switch self {
        case .kwallet:
            "create a wallet in KWallet Manager (kwalletmanager5); a wallet created at login is offered to other programs only once kwalletd5 has restarted"
        case .keePassXC: "unlock the database and expose a group to other programs under Tools → Settings → Secret Service Integration"
        case .other(let name): "make a default collection in \(name)"
        default: "create a default keyring, e.g. a \"Login\" keyring in Seahorse (Passwords and Keys)"
        }
    }

    /// Where to look when it takes no item.
    var storeAdvice: String {
        switch self {
        case .keePassXC:
            "unlock the database, expose a group, and turn off the confirmations of access and deletion under Tools → Settings → Secret Service Integration"
        case .kwallet: "check kwalletd5's output (`journalctl --user` on a systemd desktop)"
        case .fileKeyring: "check that the file keyring's folder is writable and its master password is the one it was made with"
        case .other(let name): "check \(name)'s logs (`journalctl --user` on a systemd desktop)"
        default: "check the Secret Service provider's logs (`journalctl --user -u gnome-keyring-daemon`)"
        }
    }
}
