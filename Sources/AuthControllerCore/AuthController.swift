// SPDX-License-Identifier: Apache-2.0
public import FoundationEssentials
import Synchronization

/// Signs accounts in and out of one service.
///
/// The password hash of each account lives in a ``SecretStore`` (the desktop Secret Service),
/// the signed-in account in a ``SettingsStore`` (the settings file), and every change of login
/// status is handed to the controller's ``LoginEventObserver``s (an app's `NotificationCenter`),
/// yielded to ``events()`` streams, and broadcast by an ``EventBroadcaster`` (a D-Bus signal).
///
/// Each operation has one name, and one rule says which are `async`: a call that may ask a
/// token server or an identity provider, may wait for a person (a prompt, a browser), or changes
/// who is signed in is `async`, and runs its blocking keyring, settings and Argon2 work on
/// threads of its own, never on the cooperative pool — ``signIn(account:name:password:register:binding:)``,
/// ``signOut(keepingCredentials:)``, ``forget(_:)``, ``verify(_:)``, ``accessToken(minValid:forceRefresh:checkingIDToken:)``.
/// A call that only reads or writes this machine's state and never prompts is synchronous and
/// bounded by the keyring's and the settings lock's deadlines — ``status()``, ``accounts()``,
/// ``binding()``, ``setBinding(_:)``. The original API (``signIn(_:password:)``, ``signOut()``,
/// ``isSignedIn``, ``currentUser``) is the one exception: synchronous conveniences over the full
/// operations, kept for the callers they were written for.
///
/// Changes happen under the settings lock, so concurrent processes never lose an update and
/// their events are broadcast in the order of the changes. Argon2 runs outside the lock, and
/// no token server is ever asked while it is held. A failed operation changes nothing.
public final class AuthController: Sendable {
    /// The service this controller acts on.
    public let service: ServiceName
    /// How long each request to a token server may take.
    public let serverTimeout: Duration
    let keyring: any SecretStore
    let settings: any SettingsStore
    let hasher: any PasswordHasher
    let broadcaster: any EventBroadcaster
    let observers: [any LoginEventObserver]
    let clock: @Sendable () -> UInt64
    // A list, not a dictionary keyed by id: destroying even an empty `[Int: …]` costs every
    // command a conformance scan when its controller goes away (README, Performance, the start-up
    // rules).
    let subscribers = Mutex<(next: Int, continuations: [(id: Int, continuation: AsyncStream<LoginEvent>.Continuation)])>((0, []))
    /// Makes the token client of a binding (bound services only).
    let tokenClients: @Sendable (ServerBinding) -> any TokenClient
    /// The refresh of this controller's service in flight in this process, if any.
    let refreshes = RefreshFlight()
    /// How token servers and OpenID providers are reached; `nil` when they cannot be.
    let transport: (any HTTPTransport)?

    /// A controller made of the given parts; ``desktop(service:environment:prompting:keyringTimeout:serverTimeout:busAddress:observers:)``
    /// wires the desktop's own in one call.
    ///
    /// - Parameters:
    ///   - service: the service whose accounts this controller signs in and out.
    ///   - keyring: where password hashes and tokens are kept (``SecretServiceStore`` on the desktop).
    ///   - settings: where the signed-in account is recorded (``KeyFileSettingsStore`` on the desktop).
    ///   - hasher: how passwords are hashed and checked; Argon2id with the default parameters.
    ///   - broadcaster: who tells other processes of each event (``DBusBroadcaster`` on the desktop).
    ///   - observers: who hears each event in this process, after it is stored and broadcast
    ///     (an app that imports `AuthController` passes its `NotificationCenter` through the
    ///     initialiser that takes one).
    ///   - tokenTransport: how to reach token servers (bound services); `nil` for a
    ///     controller of local accounts only.
    ///   - serverTimeout: how long each request to a token server may take.
    ///   - clock: the time now; tests pass a clock they move by hand.
    public init(service: ServiceName = .standard, keyring: any SecretStore, settings: any SettingsStore,
                hasher: any PasswordHasher = Argon2idHasher(), broadcaster: any EventBroadcaster,
                observers: [any LoginEventObserver], tokenTransport: (any HTTPTransport)? = nil,
                serverTimeout: Duration = .seconds(10), clock: @escaping @Sendable () -> Date = { Date() }) {
        // Microseconds since the Unix epoch inside, as the settings file and the D-Bus signal keep time.
        let clock: @Sendable () -> UInt64 = { Timestamp.microseconds(clock()) }
        self.tokenClients = { binding in
            guard let tokenTransport else { return UnreachableTokenClient() }
            return makeTokenClient(for: binding, transport: tokenTransport, timeout: serverTimeout.seconds, clock: clock)
        }
        self.serverTimeout = serverTimeout
        self.transport = tokenTransport
        self.service = service
        self.keyring = keyring
        self.settings = settings
        self.hasher = hasher
        self.broadcaster = broadcaster
        self.observers = observers
        self.clock = clock
    }

    /// A controller of `service` made of `other`'s parts: for the services a call about every
    /// service reaches (a registry that another service serves).
    init(_ other: AuthController, service: ServiceName) {
        self.service = service
        tokenClients = other.tokenClients
        serverTimeout = other.serverTimeout
        transport = other.transport
        keyring = other.keyring
        settings = other.settings
        hasher = other.hasher
        broadcaster = other.broadcaster
        observers = other.observers
        clock = other.clock
    }

    /// The controller of `other`, this one when it is this controller's service.
    func controller(of other: ServiceName) -> AuthController {
        other == service ? self : AuthController(self, service: other)
    }

    /// The version of the library, as its command line and the token client's `User-Agent` give it.
    public static let version = "0.2.0"

    /// Microseconds since the Unix epoch, from the system's real-time clock.
    package static let systemClock: @Sendable () -> UInt64 = { Posix.wallClockMicroseconds() }

    // MARK: - In-process events

    /// A stream of this controller's events, from now on: each ``LoginEvent`` after it is
    /// stored and broadcast (the D-Bus signal `LoginStatusChanged`). Never blocks.
    public func events() -> AsyncStream<LoginEvent> {
        let (stream, continuation) = AsyncStream<LoginEvent>.makeStream()
        let id = subscribers.withLock { state in
            state.next += 1
            state.continuations.append((state.next, continuation))
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            self?.subscribers.withLock { $0.continuations.removeAll { $0.id == id } }
        }
        return stream
    }

    /// Posts in-process, after the lock is released, so an observer may call the controller.
    func post(_ events: [LoginEvent]) {
        let continuations = subscribers.withLock { $0.continuations.map(\.continuation) }
        for event in events {
            for observer in observers { observer.observe(event, from: self) }
            for continuation in continuations { continuation.yield(event) }
        }
    }
}
