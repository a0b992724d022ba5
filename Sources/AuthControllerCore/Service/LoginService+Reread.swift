// SPDX-License-Identifier: Apache-2.0
import Synchronization

// Reading every service's state into its object on the bus.
extension LoginService {
    /// Ends sessions that are over (with `endingSessions`), then reads every service's state
    /// into its object. Returns when each needs the loop again, and the records read; `nil` when the settings
    /// cannot be read (unsafe, corrupt, unreadable): the objects then stay as they were, and
    /// GetStatus says why.
    ///
    /// The settings are read once, not once per service, and the keyring is asked only about
    /// signed-in services (and once for its lock state): a change re-reads everything, and a
    /// settings file with hundreds of services made each re-read cost seconds of CPU and
    /// PropertiesChanged come late. The reading blocks (the keyring's replies, the settings
    /// lock when a session is ended), so it runs on a thread of its own.
    ///
    /// State that cannot be read (the keyring gone) is unknown, not absent: the service keeps
    /// its object as it was and nothing is scheduled for it until a later re-read.
    /// What a re-read hands the run loop.
    struct Synced: Sendable {
        /// When each service needs the loop again.
        var schedules: [ServiceName: Schedule]
        /// Each readable service's record.
        var records: [ServiceName: SessionRecord]
    }

    func syncAll(endingSessions: Bool = true) async -> Synced? {
        guard let objects = exportedObjects.withLock({ $0 }) else { return nil }
        let generation = knownStates.generation
        guard let reread = try? await offload({ () throws(AuthError) in try self.readStates(endingSessions: endingSessions) }) else {
            return nil
        }
        knownStates.store(reread.known, keeping: reread.unknown, readAt: generation)
        let properties = reread.properties
        await objects.loop.performAndWait { objects.show(properties) }
        return Synced(schedules: reread.schedules, records: reread.records)
    }

    /// What one re-read found.
    struct Reread: Sendable {
        var schedules: [ServiceName: Schedule] = [:]
        var properties: [ServiceName: BusObjects.SessionProperties?] = [:]
        /// The states `GetStatus` may answer from; none when the keyring's lock state is unknown.
        var known: [ServiceName: KnownStates.Entry] = [:]
        /// The services whose state could not be read (the keyring did not answer): what was
        /// known of them before stays in use until something may have changed it.
        var unknown: Set<ServiceName> = []
        /// The record of each service whose settings group could be read.
        var records: [ServiceName: SessionRecord] = [:]
    }

    /// Blocking: reads the settings once and each signed-in service's item.
    private func readStates(endingSessions: Bool) throws(AuthError) -> Reread {
        // One read of the file for every service: a re-read costs one parse however many
        // services there are, and a keyring search only for those with someone signed in.
        let reads = try settings.readAll()
        knownServices.withLock { $0 = Set(reads.keys) }
        var reread = Reread()
        var keyringLocked: Bool?
        // A keyring that does not answer within its deadline is not asked again about each
        // signed-in service (each question would wait as long): their state is unknown, and a
        // re-read under way, which stopping waits for, takes one deadline, not one per service.
        var keyringAnswers = true
        if let any = reads.keys.first {
            do throws(AuthError) { keyringLocked = try controller(for: any).keyring.isLocked() } catch {
                if case .temporaryFailure = error { keyringAnswers = false }
            }
        }
        for (service, first) in reads {
            let controller = controller(for: service)
            var read: SettingsRead? = first
            let readable = first.corruption == nil && (keyringAnswers || first.record.user == nil)
            var status = readable ? try? controller.status(of: first.record, keyringLocked: keyringLocked ?? false) : nil
            // The record names a user the status does not: the item was removed or the refresh
            // token expired. The event goes out now, and the record is read again.
            if endingSessions, first.record.user != nil, status?.isSignedIn == false,
               let ended = try? controller.endSessionIfOver(), !ended.events.isEmpty {
                read = try? settings.read(service: service)
                status = read.flatMap { $0.corruption == nil ? try? controller.status(of: $0.record, keyringLocked: keyringLocked ?? false) : nil }
            }
            // The settings alone tell who is signed in, whatever the keyring answered.
            if let read, read.corruption == nil { reread.records[service] = read.record }
            guard let read, let status else {
                reread.properties[service] = .some(nil)
                reread.unknown.insert(service)
                continue
            }
            let schedule = Schedule(status, read.record)
            reread.properties[service] = Self.properties(status)
            reread.schedules[service] = schedule
            if keyringLocked != nil {
                reread.known[service] = KnownStates.Entry(status: status, record: read.record, endsAt: schedule.endsAt)
            } else {
                reread.unknown.insert(service)
            }
        }
        return reread
    }

    static func properties(_ status: LoginStatus) -> BusObjects.SessionProperties {
        BusObjects.SessionProperties(
            service: status.service.rawValue, signedIn: status.isSignedIn, user: status.account?.rawValue ?? "",
            name: status.name ?? "",
            signedInAt: status.signedInAt.map(Timestamp.microseconds(_:)) ?? 0, sequence: status.sequence,
            server: status.server?.rawValue ?? "", accessTokenExpiresAt: status.accessTokenExpiresAt.map(Timestamp.microseconds(_:)) ?? 0,
            refreshTokenExpiresAt: status.refreshTokenExpiresAt.map(Timestamp.microseconds(_:)) ?? 0)
    }
}
