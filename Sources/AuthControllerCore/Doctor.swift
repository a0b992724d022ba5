// SPDX-License-Identifier: Apache-2.0
/// Diagnoses what authctl needs, without prompting and without waiting past its deadlines:
/// the session bus, the Secret Service, its default collection and whether it is locked, a
/// store-and-delete probe, the settings folder and file, and Argon2 hashing.
package struct Doctor: Sendable {
    /// One diagnosis.
    package struct Check: Equatable, Sendable {
        /// A short stable identifier, e.g. `session-bus`.
        package var name: String
        /// What was found (or why it failed).
        package var detail: AuthError.Message
        /// What to do about a failure; `nil` when the check passed.
        package var fix: AuthError.Message?
        /// The failure the check found, whose family a front end reports; `nil` when the check passed.
        package var failure: AuthError?
        /// On the `secret-service` check: the program that serves the Secret Service
        /// (`gnome-keyring-daemon`, `kwalletd5`, `keepassxc`, the bus name when its process cannot
        /// be read, or `libsecret file keyring`).
        package var implementation: String?

        /// Whether the check passed.
        package var ok: Bool { failure == nil }
    }

    /// The service whose settings are checked.
    package let service: ServiceName
    /// The folder of the settings file.
    package let settingsDirectory: String
    /// Seconds the whole diagnosis may take.
    package let timeout: Double
    /// Where libsecret keeps items: the session bus's Secret Service, or its file keyring.
    package let keyringBackend: SecretServiceStore.Backend
    /// The file keyring's path, as libsecret finds it, to name it.
    package let fileKeyringPath: String?

    /// A diagnosis of `service`'s settings in `settingsDirectory` and of the keyring (the session
    /// bus's Secret Service, or libsecret's file keyring), within `timeout` seconds; nothing runs
    /// until ``run()``.
    package init(service: ServiceName, settingsDirectory: String, timeout: Double = 5,
                keyringBackend: SecretServiceStore.Backend = .secretService, fileKeyringPath: String? = nil) {
        self.service = service
        self.settingsDirectory = settingsDirectory
        self.timeout = timeout
        self.keyringBackend = keyringBackend
        self.fileKeyringPath = fileKeyringPath
    }

    /// Runs every check and returns them in order; later keyring checks report "not checked"
    /// when an earlier one they depend on failed. The local checks run first, so that the
    /// D-Bus checks share what is left of ``timeout``: the whole diagnosis ends within it even
    /// when the bus never answers.
    package func run() -> [Check] {
        let started = Posix.monotonicSeconds()
        let settings = settingsCheck()
        let hashing = hashingCheck()
        // What the D-Bus checks may take together, keeping a margin for what the process does
        // outside this call — starting, printing, exiting — which a loaded machine slows: a
        // fifth of a second was found too little there.
        let budget = max(0.1, timeout - (Posix.monotonicSeconds() - started) - 0.5)
        let bus = SessionBus.shared(address: nil)
        let keyring = SecretServiceStore(promptAllowed: false, promptTimeout: .seconds(budget), callTimeout: .seconds(budget), backend: keyringBackend)
        var checks: [Check] = []
        let giveUp = Posix.monotonicSeconds() + budget
        func remaining() -> Double { max(0.05, giveUp - Posix.monotonicSeconds()) }
        var keyringUsable = false
        var implementation = SecretServiceImplementation.other(SecretServiceCalls.busName)
        let busCheck = self.busCheck(bus, remaining())
        checks.append(busCheck)
        if keyringBackend == .fileKeyring {
            // No daemon: the file is the keyring, its own collection, unlocked by its master password.
            implementation = .fileKeyring
            var file = pass("secret-service", "libsecret's file keyring at \(fileKeyringPath ?? "its default path") (SECRET_BACKEND=file)")
            file.implementation = implementation.name
            checks += [file, pass("default-collection", "the file keyring is its own collection"),
                       pass("collection-unlocked", "the file keyring opens with its master password")]
            keyringUsable = true
        } else if busCheck.ok {
            var service = serviceCheck(bus, remaining())
            if service.ok, let owner = SecretServiceImplementation.owner(on: bus, timeout: remaining()) {
                implementation = owner.implementation
                service.implementation = owner.implementation.name
                service.detail = service.detail + " (\(owner.implementation.name)\(owner.processID.map { ", pid \($0)" } ?? ""))"
            }
            checks.append(service)
            if service.ok {
                let collection = collectionCheck(bus, remaining(), implementation)
                checks.append(collection)
                if collection.ok {
                    let locked = lockedCheck(keyring, implementation)
                    checks.append(locked)
                    keyringUsable = locked.ok
                }
            }
        }
        for name in ["secret-service", "default-collection", "collection-unlocked"] where !checks.contains(where: { $0.name == name }) {
            checks.append(notChecked(name, because: checks.first { !$0.ok }))
        }
        checks.append(keyringUsable ? probeCheck(keyring, implementation) : notChecked("store-probe", because: checks.first { !$0.ok }))
        checks.append(settings)
        checks.append(hashing)
        return checks
    }

    // MARK: - Checks

    private func busCheck(_ bus: SessionBus, _ seconds: Double) -> Check {
        do throws(AuthError) {
            _ = try bus.connection(timeout: seconds)
            return pass("session-bus", "the session bus answers")
        } catch {
            // The error ends with the advice the fix gives: it is said once, as the fix.
            let advice = "; " + ErrorMap.noSessionBusAdvice.description
            let cause = error.message.hasSuffix(advice) ? AuthError.Message(String(error.message.dropLast(advice.count))) : error.explanation
            return fail("session-bus", cause, fix: ErrorMap.noSessionBusAdvice, error)
        }
    }

    private func serviceCheck(_ bus: SessionBus, _ seconds: Double) -> Check {
        do throws(AuthError) {
            try bus.call("reach the Secret Service", timeout: seconds) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.ping(connection, deadline)
            }
            return pass("secret-service", "a Secret Service provider answers on the session bus")
        } catch {
            return fail("secret-service", error.explanation,
                        fix: "install and start a provider: `apt-get install gnome-keyring`, then log in again or run `gnome-keyring-daemon --start --components=secrets`",
                        error)
        }
    }

    private func collectionCheck(_ bus: SessionBus, _ seconds: Double, _ implementation: SecretServiceImplementation) -> Check {
        let fix = AuthError.Message(implementation.collectionAdvice)
        do throws(AuthError) {
            let path = try bus.call("read the alias `default`", timeout: seconds) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.readAlias(connection, "default", deadline)
            }
            guard let path else {
                return fail("default-collection", "the alias `default` does not resolve to a collection", fix: fix,
                            .unavailable("no default collection"))
            }
            return pass("default-collection", "the alias `default` is \(path)")
        } catch {
            return fail("default-collection", error.explanation, fix: fix, error)
        }
    }

    private func lockedCheck(_ keyring: SecretServiceStore, _ implementation: SecretServiceImplementation) -> Check {
        do throws(AuthError) {
            if try keyring.isLocked() {
                let fix: AuthError.Message = implementation == .gnomeKeyring
                    ? "unlock it: log in to the desktop, or open Seahorse (Passwords and Keys) and unlock the Login keyring"
                    : "unlock it: \(implementation.unlockAdvice)"
                return fail("collection-unlocked", "the default collection is locked", fix: fix,
                            .unavailable("the default collection is locked"))
            }
            return pass("collection-unlocked", "the default collection is unlocked")
        } catch {
            return fail("collection-unlocked", error.explanation, fix: "see the Secret Service checks above", error)
        }
    }

    private func probeCheck(_ keyring: SecretServiceStore, _ implementation: SecretServiceImplementation) -> Check {
        let probeService = ServiceName(rawValue: "io.github.authctl.doctor")!
        let account = AccountID(rawValue: "probe-\(Posix.randomBytes(6).map { String($0, radix: 16) }.joined())")!
        let fix = AuthError.Message(implementation.storeAdvice)
        do throws(AuthError) {
            try keyring.store("probe", service: probeService, account: account, label: "authctl doctor probe")
        } catch {
            return fail("store-probe", "storing a probe item failed: \(error.explanation)", fix: fix, error)
        }
        do throws(AuthError) {
            guard try keyring.deleteItem(service: probeService, account: account) else {
                return fail("store-probe", "a stored probe item could not be found again", fix: fix, .unavailable("probe item missing"))
            }
            return pass("store-probe", "an item can be stored and deleted in the default collection")
        } catch {
            // Stored, and left: the person is told which item to remove.
            return fail("store-probe", "the probe item (service \(probeService), account \(account)) was stored but could not be deleted: \(error.explanation)",
                        fix: fix + "; then delete the probe item left behind", error)
        }
    }

    private func settingsCheck() -> Check {
        let store = KeyFileSettingsStore(directory: settingsDirectory)
        do throws(AuthError) {
            let read = try store.read(service: service)
            if let corruption = read.corruption {
                return fail("settings", corruption, fix: "\(hint: .signOutToReplaceSettings) (a copy is kept as settings.ini.corrupt)",
                            .settingsUnsafe(corruption))
            }
            return pass("settings", "\(store.filePath) is usable")
        } catch {
            return fail("settings", error.explanation, fix: Self.fix(in: error.message) ?? "check the path named above", error)
        }
    }

    private func hashingCheck() -> Check {
        do throws(AuthError) {
            let hasher = Argon2idHasher()
            let password = try Password("authctl doctor")
            let encoded = try hasher.hash(password)
            guard hasher.verify(password, against: encoded) == .match(upgradedHash: nil) else {
                return fail("argon2", "libargon2 did not verify its own hash", fix: "reinstall libargon2 (`apt-get install --reinstall libargon2-1`)",
                            .unavailable("argon2 broken"))
            }
            return pass("argon2", "libargon2 hashes and verifies with \(hasher.parameters)")
        } catch {
            return fail("argon2", error.explanation, fix: "reinstall libargon2 (`apt-get install --reinstall libargon2-1`) and check free memory", error)
        }
    }

    // MARK: - Helpers

    private func pass(_ name: String, _ detail: AuthError.Message) -> Check { Check(name: name, detail: detail, fix: nil, failure: nil) }

    private func fail(_ name: String, _ detail: AuthError.Message, fix: AuthError.Message, _ failure: AuthError) -> Check {
        Check(name: name, detail: detail, fix: fix, failure: failure)
    }

    private func notChecked(_ name: String, because earlier: Check?) -> Check {
        fail(name, "not checked: \(earlier?.name ?? "an earlier check") failed", fix: "fix the failure above first",
             earlier?.failure ?? .unavailable("not checked"))
    }

    /// The command in backquotes that a settings message proposes.
    private static func fix(in message: String) -> AuthError.Message? {
        let parts = message.split(separator: "`", omittingEmptySubsequences: false)
        return parts.count >= 3 ? "run `\(parts[1])`" : nil
    }
}
