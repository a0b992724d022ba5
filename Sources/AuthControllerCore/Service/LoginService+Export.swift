// SPDX-License-Identifier: Apache-2.0
import Synchronization
import SystemPackage

// `serve`'s objects on the bus: exporting them, subscribing to what may change the state, and
// answering the methods of `io.github.authctl.AuthController1`.
extension LoginService {
    /// The objects on the bus. Touched on the loop's thread only, except ``loop``.
    final class Exported: @unchecked Sendable {
        // Sendable: every member but `loop` is used on the loop's thread only (through
        // `MainLoopThread.perform`), where GDBus wants them.
        let loop: MainLoopThread
        let controllerObject: BusObjects.ControllerObject
        let manager: BusObjects.ObjectManager
        var sessions: [ServiceName: BusObjects.SessionObject] = [:]
        var subscriptions: [UInt32] = []
        var filter: UInt32 = 0
        var fileWatch: BusObjects.FileWatch?
        var folderWatch: BusObjects.FileWatch?
        var nameOwner: UInt32 = 0
        var callerWatches: [String: UInt32] = [:]
        /// The watch of who owns the notification server's name; 0 for none.
        var notificationServerWatch: UInt32 = 0

        init(loop: MainLoopThread, controllerObject: BusObjects.ControllerObject, manager: BusObjects.ObjectManager) {
            self.loop = loop
            self.controllerObject = controllerObject
            self.manager = manager
        }

        /// Exports new services' objects (the manager announces them), updates the others
        /// (their skeletons emit `PropertiesChanged` for what differs), and unexports those
        /// whose settings group is gone. A service whose state is unknown (`nil`) keeps what
        /// its object shows; a new one shows its name only.
        func show(_ properties: [ServiceName: BusObjects.SessionProperties?]) {
            for (service, object) in sessions where properties[service] == nil {
                manager.unexport(object)
                sessions[service] = nil
            }
            for (service, values) in properties {
                if let object = sessions[service] {
                    if let values { object.update(values) }
                } else {
                    let object = BusObjects.SessionObject(path: LoginService.objectPath(of: service))
                    object.update(values ?? BusObjects.SessionProperties(service: service.rawValue))
                    manager.export(object)
                    sessions[service] = object
                }
            }
        }

        func watchCaller(_ sender: String, connection: GDBus.Connection, _ vanished: GDBus.Callback) {
            callerWatches[sender] = BusObjects.watchPeer(connection, sender, vanished: vanished)
        }

        func unwatchCaller(_ sender: String) {
            if let id = callerWatches.removeValue(forKey: sender) { BusObjects.unwatchPeer(id) }
        }

        /// Undoes ``LoginService/export(on:loop:calls:trigger:)``.
        func withdraw(from connection: GDBus.Connection) {
            for id in subscriptions { GDBus.connectionSignalUnsubscribe(connection, id) }
            for id in callerWatches.values { BusObjects.unwatchPeer(id) }
            if notificationServerWatch != 0 { BusObjects.unwatchPeer(notificationServerWatch) }
            fileWatch?.cancel()
            folderWatch?.cancel()
            controllerObject.unexport()
            manager.setConnection(nil)
            GDBus.connectionRemoveFilter(connection, filter)
        }
    }

    /// On the loop's thread: exports the objects and subscribes to what may change the state.
    /// `GetToken`'s refreshes pass `gate`, which closes when serve stops.
    func export(on connection: GDBus.Connection, loop: MainLoopThread, calls: InFlight, gate: RefreshGate,
                trigger: AsyncStream<Trigger>.Continuation) throws(AuthError) -> Exported {
        let handlers = BusObjects.MethodHandlers(
            getStatus: { invocation, service in
                self.answer(invocation, service, .read, calls: calls, trigger: trigger) { controller throws(AuthError) in
                    let status = try await offload { () throws(AuthError) in try self.currentStatus(controller) }
                    return { invocation.returnStatus(Self.statusFields(status)) }
                }
            },
            listAccounts: { invocation, service in
                self.answer(invocation, service, .read, calls: calls, trigger: trigger) { controller throws(AuthError) in
                    let accounts = try await offload { () throws(AuthError) in try controller.accounts().map(\.id.rawValue) }
                    return { invocation.returnAccounts(accounts) }
                }
            },
            getToken: { invocation, service, minValid in
                self.answer(invocation, service, .change, refreshing: true, calls: calls, trigger: trigger) { controller throws(AuthError) in
                    let token = try await gate.guarding { () async throws(AuthError) in
                        try await offload(async: { () async throws(AuthError) in try await controller.accessToken(minValid: .seconds(minValid)) })
                    }
                    for warning in token.warnings { self.warn("\(controller.service): \(warning)") }
                    return { invocation.returnToken(token.token, expiresAt: token.expiresAt.map(Timestamp.microseconds(_:)) ?? 0) }
                }
            },
            signOut: { invocation, service in
                self.answer(invocation, service, .change, calls: calls, trigger: trigger) { controller throws(AuthError) in
                    // The same sign-out as the command line's: the refresh token is revoked too.
                    let outcome = try await offload(async: { () async throws(AuthError) in
                        try await controller.signOut(keepingCredentials: false)
                    })
                    for warning in outcome.warnings { self.warn("\(controller.service): \(warning)") }
                    return { invocation.returnSignedOut() }
                }
            })
        let controllerObject = BusObjects.ControllerObject(handlers)
        do throws(GLibError) {
            try controllerObject.export(on: connection, at: Self.objectPath)
        } catch {
            throw .unavailable("cannot export \(Self.objectPath) on the session bus: \(error.message)")
        }
        let objects = Exported(loop: loop, controllerObject: controllerObject,
                               manager: BusObjects.ObjectManager(path: Self.objectPath))
        objects.manager.setConnection(connection)
        // Each runs on the loop's thread, before any call that came after it is dispatched
        // there: the known states are forgotten before such a call could be answered from them.
        let knownStates = knownStates
        let mayHaveChanged: @Sendable () -> Void = {
            knownStates.forget()
            trigger.yield(.changed)
        }
        let changed = GDBus.SignalHandler { _ in mayHaveChanged() }
        // The event it announces, before the re-read it triggers: an end it claims is told once
        // that re-read confirms it.
        let announced = GDBus.SignalHandler { signal in
            if let service = signal.strings.first.flatMap(ServiceName.init(rawValue:)),
               let event = LoginEventListener.event(from: signal, service: service) {
                trigger.yield(.loginSignal(event))
            }
            mayHaveChanged()
        }
        objects.subscriptions = [
            GDBus.connectionSignalSubscribe(connection, interface: DBusBroadcaster.interface, path: DBusBroadcaster.objectPath,
                                            handler: announced),
            // ItemCreated, ItemDeleted, ItemChanged of any collection, from any sender: a forged
            // one only makes serve look at the keyring itself.
            GDBus.connectionSignalSubscribe(connection, interface: "org.freedesktop.Secret.Collection", handler: changed),
            // CollectionChanged and the collection's PropertiesChanged: a collection locked or
            // unlocked (GetStatus's keyringLocked).
            GDBus.connectionSignalSubscribe(connection, interface: "org.freedesktop.Secret.Service", handler: changed),
            GDBus.connectionSignalSubscribe(connection, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                                            arg0: "org.freedesktop.Secret.Collection", handler: changed),
            // A keyring daemon that (re)starts announces no items: what it holds is read again.
            GDBus.connectionSignalSubscribe(connection, sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus",
                                            member: "NameOwnerChanged", path: "/org/freedesktop/DBus",
                                            arg0: "org.freedesktop.secrets", handler: changed),
        ]
        if notifications {
            objects.subscriptions.append(DesktopNotificationCalls.subscribe(connection, DesktopNotificationCalls.SignalHandler { signal in
                trigger.yield(.notificationSignal(signal))
            }))
            objects.notificationServerWatch = DesktopNotificationCalls.watchOwner(connection, DesktopNotificationCalls.OwnerHandler { owner in
                trigger.yield(.notificationServer(owner))
            })
        }
        if let settingsFile {
            // Without the watch (no inotify left), changes that send no event show at the next
            // one; the rest of serve works, so it is not a reason to stop.
            let fileChanged = GDBus.Callback(mayHaveChanged)
            objects.fileWatch = try? BusObjects.FileWatch(path: settingsFile, fileChanged)
            // A watch on a file whose folder is missing (no settings yet, or the folder
            // removed) is GLib's poll every 4 s: the folder's parent is watched too, and when
            // the folder comes or goes the file's watch is made again, at once (on the loop's
            // thread, where the watch reports).
            let folder = FilePath(settingsFile).removingLastComponent()
            objects.folderWatch = try? BusObjects.FileWatch(path: folder.removingLastComponent().string,
                                                            child: folder.lastComponent?.string ?? "", GDBus.Callback {
                [weak objects] in
                guard let objects else { return }
                objects.fileWatch?.cancel()
                objects.fileWatch = try? BusObjects.FileWatch(path: settingsFile, fileChanged)
                // What was written before the new watch began.
                mayHaveChanged()
            })
        }
        objects.filter = BusObjects.observeIncomingCalls(connection, BusObjects.PeerHandler { trigger.yield(.called($0)) })
        exportedObjects.withLock { $0 = objects }
        return objects
    }

    /// Runs one method call in a task of its own and answers it: with what `body` returns, or
    /// the D-Bus error of its failure's family. `body` does its blocking steps through
    /// ``offload(_:)``, never on the cooperative pool.
    ///
    /// A change forgets its service's known state before it begins and again before it is
    /// answered, so that no call answered after it shows the state before it. A refresh
    /// (`refreshing`) forgets it only before it is answered: until it stores new tokens it has
    /// changed nothing, and what it stores goes to the service's settings record, which a known
    /// state is checked against, so `GetStatus` of the service still answers at once while the
    /// refresh waits for a keyring that does not answer.
    private func answer(_ invocation: BusObjects.Invocation, _ service: String, _ kind: InFlight.Kind, refreshing: Bool = false,
                        calls: InFlight, trigger: AsyncStream<Trigger>.Continuation,
                        _ body: @escaping @Sendable (AuthController) async throws(AuthError) -> @Sendable () -> Void) {
        // A change of a service forgets that service's known state only: the others' GetStatus
        // still answers at once while, say, a refresh waits for a keyring that does not answer.
        let changed = kind == .change ? ServiceName(rawValue: service) : nil
        if let changed, !refreshing { knownStates.forget(changed) }
        let ticket = calls.begin(kind, answering: invocation)
        Task {
            let reply: @Sendable () -> Void
            do throws(AuthError) {
                reply = try await body(self.controller(for: try ServiceName(validating: service)))
            } catch {
                reply = { invocation.returnError(name: error.dbusErrorName, message: error.message.controlCharactersEscaped) }
            }
            if let changed { self.knownStates.forget(changed) }
            // Answered before the work counts as done: stopping waits for the answer to be
            // sent, not only for the work.
            reply()
            calls.end(ticket)
            trigger.yield(.callEnded)
            // A sign-out or a refresh may have changed the state: the objects show it now, not
            // only after the signal or the file watch. A read changes nothing.
            if kind == .change { trigger.yield(.changed) }
        }
    }

    /// Blocking: the status of `controller`'s service, from the last re-read when nothing may
    /// have changed it since (its settings record is read again to be sure), else from the
    /// settings and the keyring.
    func currentStatus(_ controller: AuthController) throws(AuthError) -> LoginStatus {
        let read = try settings.read(service: controller.service)
        if read.corruption == nil,
           let known = knownStates.status(of: controller.service, record: read.record, now: Posix.wallClockMicroseconds()) {
            return known
        }
        return try controller.status()
    }

    /// `GetStatus`'s fields: those of `status --json` (``LoginStatus/documentFields``), times
    /// in µs, absent fields left out.
    static func statusFields(_ status: LoginStatus) -> [(String, GDBus.Value)] {
        status.documentFields.compactMap { field -> (String, GDBus.Value)? in
            switch field.value {
            case .text(let text): (field.name, .string(text))
            case .flag(let flag): (field.name, .boolean(flag))
            case .number(let number): (field.name, .uint64(number))
            case .time(_, let microseconds): (field.name, .uint64(microseconds))
            case .absent: nil
            }
        }
    }
}
