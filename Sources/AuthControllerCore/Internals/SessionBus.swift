// SPDX-License-Identifier: Apache-2.0
internal import CGLib
import Synchronization

/// The one door to the session bus: it owns the connection (to the bus at a given address, or
/// the session bus) and gives every call its own deadline. The keyring store, the broadcaster,
/// the listener and `doctor` all go through it. Its errors become ``AuthError``s in the one
/// map, ``ErrorMap/authError(_:from:while:deadline:)``.
final class SessionBus: Sendable {
    /// The bus address (`unix:path=…`), or `nil` for the session bus (GIO resolves it from
    /// `DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`).
    let address: String?
    private let cached = Mutex<GDBus.Connection?>(nil)
    private let usedWithoutGIO = Mutex(false)
    private let calledSecretService = Mutex(false)

    /// Whether a method call to the Secret Service went out on the GIO connection: gnome-keyring
    /// sets a new caller up when its first message arrives, and a property read as that first
    /// message (libsecret's first, `GetAll`) races the set-up and can bring the daemon down.
    var hasCalledSecretService: Bool { calledSecretService.withLock { $0 } }

    private init(address: String?) { self.address = address }

    // A list, not a dictionary keyed by address: a process talks to one bus, two at most (README,
    // Performance, the start-up rules).
    private static let sessions = Mutex<[SessionBus]>([])

    /// The process's one session for `address`, so that every store and broadcaster of a
    /// process shares one connection per bus (each new connection costs an authentication and
    /// a `Hello` round trip).
    static func shared(address: String?) -> SessionBus {
        sessions.withLock { sessions in
            let key = address ?? ""
            if let session = sessions.first(where: { ($0.address ?? "") == key }) { return session }
            let session = SessionBus(address: address)
            sessions.append(session)
            return session
        }
    }

    /// At most this long to connect and authenticate, whatever the calls' deadline: a bus that
    /// does not answer its handshake is not there, and a command must end within 5 s: a second is
    /// left for starting and ending the process on a loaded machine.
    static let connectTimeout = 4.0

    /// The open connection, connecting (again) when there is none or it was closed.
    func connection(timeout: Double) throws(AuthError) -> GDBus.Connection {
        if let connection = cached.withLock({ $0 }), !GDBus.connectionIsClosed(connection) { return connection }
        let deadline = Deadline(seconds: min(timeout, Self.connectTimeout))
        do throws(GLibError) {
            // The session bus's connection is GIO's shared one, which libsecret uses too: the
            // Secret Service sees one caller, whose first message is authctl's method call (see
            // `SecretServiceStore`).
            let connection = if address == nil { try GDBus.busGetSession(deadline) }
                             else { try GDBus.connectionNewForAddress(try resolvedAddress(deadline), deadline) }
            cached.withLock { $0 = connection }
            return connection
        } catch {
            throw ErrorMap.authError(error, from: .bus, while: "connect to the session bus", deadline: deadline)
        }
    }

    /// A new connection of its own, for a caller that needs its signals delivered on its own
    /// main context (see ``MainLoopThread``) and to learn when the bus goes away.
    func privateConnection(timeout: Double) throws(AuthError) -> GDBus.Connection {
        let deadline = Deadline(seconds: min(timeout, Self.connectTimeout))
        do throws(GLibError) {
            return try GDBus.connectionNewForAddress(try resolvedAddress(deadline), deadline)
        } catch {
            throw ErrorMap.authError(error, from: .bus, while: "connect to the session bus", deadline: deadline)
        }
    }

    private func resolvedAddress(_ deadline: Deadline) throws(GLibError) -> String {
        if let address { return address }
        return try GDBus.sessionBusAddress(deadline)
    }

    /// What calls made without GIO came to (``callWithoutGIO(_:timeout:_:)``, and what its
    /// callers read from the replies).
    enum CallWithoutGIO<Answer> {
        /// The answer: the replies in order, or what they say.
        case answered(Answer)
        /// Not made this way: make them through GIO.
        case notMade
        /// Made, and answered with an error or with what is not their reply: as a GIO call that
        /// failed, asked again only the way a failed call is.
        case refused
    }

    /// Holds `conversation` without GIO, over a connection of its own (see
    /// ``BareBusConnection``) — but only as the first use of this bus in the process: a `status`
    /// run by a script reads once and exits. Later calls, or calls this way cannot make, are
    /// ``CallWithoutGIO/notMade`` and go through GIO, whose connection then serves the rest of the
    /// process (`serve`, an app checking `isSignedIn` in a loop). A deadline that passes and a
    /// peer that goes away are errors, as through GIO.
    func converseWithoutGIO<Answer>(_ what: String, timeout: Double,
                                    _ conversation: (BareBusConnection.Exchange) throws(BareBusConnection.Failure) -> Answer) throws(AuthError) -> CallWithoutGIO<Answer> {
        let first = usedWithoutGIO.withLock { used in
            defer { used = true }
            return !used && cached.withLock { $0 == nil }
        }
        guard first else { return .notMade }
        let socket = if let address { BareBusConnection.socketAddress(of: address) } else { BareBusConnection.sessionBusSocket() }
        guard let socket else { return .notMade }
        let connectTimeout = min(timeout, Self.connectTimeout)
        do {
            return .answered(try BareBusConnection.converse(socket: socket, connectTimeout: connectTimeout, callTimeout: timeout, conversation))
        } catch {
            switch error {
            case .deadlinePassed(afterHello: true): throw ErrorMap.deadlinePassed(on: .secretService, while: what, seconds: timeout)
            case .deadlinePassed(afterHello: false):
                throw ErrorMap.deadlinePassed(on: .bus, while: "connect to the session bus", seconds: connectTimeout)
            case .wentAway: throw ErrorMap.wentAway(on: .secretService, while: what)
            case .refused: return .refused
            case .notHandled: return .notMade
            }
        }
    }

    /// Runs one call on the connection under its own deadline of `timeout` seconds and maps its
    /// error.
    func call<T>(_ what: String, on peer: ErrorMap.Peer = .secretService, timeout: Double,
                 _ body: (GDBus.Connection, Deadline) throws(GLibError) -> T) throws(AuthError) -> T {
        let connection = try connection(timeout: timeout)
        if peer == .secretService { calledSecretService.withLock { $0 = true } }
        let deadline = Deadline(seconds: timeout)
        do {
            return try body(connection, deadline)
        } catch {
            throw ErrorMap.authError(error, from: peer, while: what, deadline: deadline)
        }
    }

    /// As ``call(_:on:timeout:_:)``, for a call on an object found a moment
    /// before: `nil` when the object is gone by the time it is called (another process deleted
    /// the item meanwhile), which is "not there", not a broken service.
    func callUnlessGone<T>(_ what: String, timeout: Double, _ body: (GDBus.Connection, Deadline) throws(GLibError) -> T) throws(AuthError) -> T? {
        let connection = try connection(timeout: timeout)
        calledSecretService.withLock { $0 = true }
        let deadline = Deadline(seconds: timeout)
        do {
            return try body(connection, deadline)
        } catch {
            if error.isMissingObject { return nil }
            throw ErrorMap.authError(error, from: .secretService, while: what, deadline: deadline)
        }
    }
}

extension GLibError {
    /// The object called is not there: the Secret Service answers `NoSuchObject` for an item
    /// it no longer has, and the bus `UnknownObject` or `UnknownMethod` for a path at which
    /// nothing is exported any more (gnome-keyring's answer for a deleted item).
    var isMissingObject: Bool {
        guard let remoteName, !isDeclinedAsUnknown else { return false }
        return ["org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject",
                "org.freedesktop.DBus.Error.UnknownMethod"].contains(remoteName)
    }
}

