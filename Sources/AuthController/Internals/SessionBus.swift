internal import CLibsecret
import Synchronization

/// The one door to the session bus: it owns the connection (to the bus at a given address, or
/// the session bus), gives every call its own deadline, and turns every GLib error into an
/// ``AuthError`` in one function, ``authError(_:from:while:deadline:)``. The keyring store,
/// the broadcaster, the listener and `doctor` all go through it.
final class SessionBus: Sendable {
    /// Who a failing call was talking to: the message names it.
    enum Peer: Sendable {
        case bus, secretService
    }

    /// The bus address (`unix:path=…`), or `nil` for the session bus (GIO resolves it from
    /// `DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`).
    let address: String?
    private let cached = Mutex<GDBus.Connection?>(nil)

    private init(address: String?) { self.address = address }

    private static let sessions = Mutex<[String: SessionBus]>([:])

    /// The process's one session for `address`, so that every store and broadcaster of a
    /// process shares one connection per bus (each new connection costs an authentication and
    /// a `Hello` round trip).
    static func shared(address: String?) -> SessionBus {
        sessions.withLock { sessions in
            let key = address ?? ""
            if let session = sessions[key] { return session }
            let session = SessionBus(address: address)
            sessions[key] = session
            return session
        }
    }

    /// The open connection, connecting (again) when there is none or it was closed.
    func connection(timeout: Double) throws(AuthError) -> GDBus.Connection {
        if let connection = cached.withLock({ $0 }), !GDBus.connectionIsClosed(connection) { return connection }
        let deadline = Deadline(seconds: timeout)
        do throws(GLibError) {
            let connection = try GDBus.connectionNewForAddress(try resolvedAddress(deadline), deadline)
            cached.withLock { $0 = connection }
            return connection
        } catch {
            throw Self.authError(error, from: .bus, while: "connect to the session bus", deadline: deadline)
        }
    }

    /// A new connection of its own, for a caller that needs its signals delivered on its own
    /// main context (see ``MainLoopThread``) and to learn when the bus goes away.
    func privateConnection(timeout: Double) throws(AuthError) -> GDBus.Connection {
        let deadline = Deadline(seconds: timeout)
        do throws(GLibError) {
            return try GDBus.connectionNewForAddress(try resolvedAddress(deadline), deadline)
        } catch {
            throw Self.authError(error, from: .bus, while: "connect to the session bus", deadline: deadline)
        }
    }

    private func resolvedAddress(_ deadline: Deadline) throws(GLibError) -> String {
        if let address { return address }
        return try GDBus.sessionBusAddress(deadline)
    }

    /// Runs one call on the connection under its own deadline of `timeout` seconds and maps its
    /// error.
    /// - Parameter missingObject: what a "no such object" answer means for this call.
    func call<T>(_ what: String, on peer: Peer = .secretService, timeout: Double, missingObject: AuthError? = nil,
                 _ body: (GDBus.Connection, Deadline) throws(GLibError) -> T) throws(AuthError) -> T {
        let connection = try connection(timeout: timeout)
        let deadline = Deadline(seconds: timeout)
        do {
            return try body(connection, deadline)
        } catch {
            if let missingObject, let name = error.remoteName, Self.missingObjectErrors.contains(name) { throw missingObject }
            throw Self.authError(error, from: peer, while: what, deadline: deadline)
        }
    }

    private static let missingObjectErrors: Set<String> = [
        "org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject",
        "org.freedesktop.DBus.Error.UnknownMethod",
    ]

    // MARK: - The one error map

    static let noSessionBusAdvice = "run inside a desktop session, under `dbus-run-session`, or in `authctl sandbox`"


    /// The one mapping from a GLib error to an ``AuthError``: what a deadline, a missing bus,
    /// a missing Secret Service, a peer that went away or a locked collection becomes.
    /// `detail` keeps the GLib domain and code for bug reports.
    static func authError(_ error: GLibError, from peer: Peer, while what: String, deadline: Deadline) -> AuthError {
        let detail = error.debugDescription
        let seconds = formatSeconds(deadline.seconds)
        if error.isCancelled || error.isTimeout {
            switch peer {
            case .bus:
                return .temporaryFailure("the session bus did not answer within \(seconds) s; try again, or raise --keyring-timeout",
                                         detail: detail)
            case .secretService:
                return .temporaryFailure("could not \(what): the Secret Service did not answer within \(seconds) s; nothing was changed — try again, or raise --keyring-timeout",
                                         detail: detail)
            }
        }
        if peer == .bus && error.remoteName == nil {
            if error.isDisconnection {
                return .unavailable("the session bus went away (\(error.message)); \(noSessionBusAdvice)", detail: detail)
            }
            return .unavailable("no session bus (\(error.message)); \(noSessionBusAdvice)", detail: detail)
        }
        if error.isNoOwner {
            return .unavailable("no Secret Service on the session bus; start gnome-keyring-daemon (Debian package gnome-keyring), or run in `authctl sandbox`",
                                detail: detail)
        }
        if error.isDisconnection {
            return .temporaryFailure("could not \(what): the \(peer == .bus ? "session bus" : "Secret Service") went away mid-call; nothing was changed — try again",
                                     detail: detail)
        }
        if error.remoteName == "org.freedesktop.Secret.Error.IsLocked" { return .keyringLocked }
        return .unavailable("could not \(what): \(error.message)", detail: detail)
    }
}

extension GLibError {
    var isTimeout: Bool {
        (domain == .io && code == Int32(G_IO_ERROR_TIMED_OUT.rawValue))
            || ["org.freedesktop.DBus.Error.TimedOut", "org.freedesktop.DBus.Error.Timeout"].contains(remoteName ?? "")
            || (domain == .dbus && [G_DBUS_ERROR_TIMED_OUT, G_DBUS_ERROR_TIMEOUT].map { Int32($0.rawValue) }.contains(code))
    }

    /// The peer or the connection went away.
    var isDisconnection: Bool {
        ["org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected"].contains(remoteName ?? "")
            || (domain == .dbus && [G_DBUS_ERROR_NO_REPLY, G_DBUS_ERROR_DISCONNECTED].map { Int32($0.rawValue) }.contains(code))
            || (domain == .io && [G_IO_ERROR_CLOSED, G_IO_ERROR_BROKEN_PIPE, G_IO_ERROR_CONNECTION_CLOSED].map { Int32($0.rawValue) }.contains(code))
    }

    /// Nobody owns the name called (the Secret Service is not running).
    var isNoOwner: Bool {
        ["org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
         "org.freedesktop.DBus.Error.Spawn.ServiceNotFound", "org.freedesktop.DBus.Error.Spawn.ChildExited"].contains(remoteName ?? "")
            || (domain == .dbus && [G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER].map { Int32($0.rawValue) }.contains(code))
    }
}

/// `5` rather than `5.0`, `0.5` as is.
func formatSeconds(_ seconds: Double) -> String {
    seconds == seconds.rounded() && abs(seconds) < 1e15 ? String(Int64(seconds)) : String(seconds)
}
