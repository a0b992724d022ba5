// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TestSupport
import Testing

/// A real OpenID Connect provider on 127.0.0.1 — django-oauth-toolkit, started by the test that
/// needs it and stopped with it — and the stand-ins that play the person at it: in their
/// browser (`browserStandIn`, given to authctl as `BROWSER`) and on their other device
/// (`approveDevice`). `identity_provider/README.md` beside this file says what it serves.
/// Its Python environment is made by `.ci/install-deps`.
final class IdentityProvider: Sendable {

    /// The public client of the browser flow (authorization code with PKCE S256; redirect URI
    /// `http://127.0.0.1/callback` on any port).
    static let browserClientID = "authctl-browser"
    /// The public client of the device flow (RFC 8628).
    static let deviceClientID = "authctl-device"
    /// The password of every person below.
    static let password = "correct horse battery staple"

    /// Someone the provider knows, with the claims it answers for them.
    struct Person: Sendable {
        /// What they type to sign in (their e-mail address works too); the `preferred_username` claim.
        let userName: String
        let email: String
        let emailVerified: Bool
        let subject: String
        let name: String
    }

    static let ada = Person(userName: "ada", email: "ada@example.org", emailVerified: true, subject: "sub-ada", name: "Ada Lovelace")
    static let grace = Person(userName: "grace", email: "grace@example.org", emailVerified: true, subject: "sub-grace", name: "Grace Hopper")
    /// Her address is not verified (`email_verified` false).
    static let eve = Person(userName: "eve", email: "eve@example.org", emailVerified: false, subject: "sub-eve", name: "Eve Unverified")

    private let server: ServerProcess
    var port: Int { server.port }
    /// The host name of its HTTPS listener, when it has one (`tls`).
    let tlsName: String?
    /// Every request the provider answered, one JSON object a line (as `log()` returns them).
    let requestLog: URL
    private let folder: URL

    /// Starts the provider and returns once it accepts connections, at most 60 s later.
    /// Lifetimes are whole seconds.
    /// - Parameters:
    ///   - refreshTokenLifetime: how long after its access token expired a refresh token dies; nil, never.
    ///   - refreshGracePeriod: how long a rotated-away refresh token is still taken (it answers the same tokens again).
    ///   - rotation: a refresh gives a new refresh token and retires the old one.
    ///   - reuseProtection: a retired refresh token used again revokes every token of its family.
    ///   - deviceCodeLifetime: the device authorization answer's `expires_in`. Past it the poll still
    ///     answers `authorization_pending` until the person tries the code, then `expired_token`.
    ///   - issParameter: authorization responses carry `iss` (RFC 9207) and discovery says so.
    ///   - completeDiscovery: discovery also names `revocation_endpoint` and
    ///     `device_authorization_endpoint`, which django-oauth-toolkit's leaves out.
    init(accessTokenLifetime: Duration = .seconds(300), idTokenLifetime: Duration = .seconds(300),
         refreshTokenLifetime: Duration? = nil, authorizationCodeLifetime: Duration = .seconds(60),
         refreshGracePeriod: Duration = .zero, rotation: Bool = true, reuseProtection: Bool = true,
         deviceInterval: Duration = .seconds(1), deviceCodeLifetime: Duration = .seconds(1800), issParameter: Bool = true, completeDiscovery: Bool = false,
         tls: TestCertificates? = nil) async throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("identity-provider-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        requestLog = folder.appendingPathComponent("requests.jsonl")
        var arguments = [
            Self.directory.appendingPathComponent("identity_provider.py").path, "--database-dir", folder.path,
            "--log", requestLog.path,
            "--access-token-lifetime", "\(accessTokenLifetime.components.seconds)",
            "--id-token-lifetime", "\(idTokenLifetime.components.seconds)",
            "--authorization-code-lifetime", "\(authorizationCodeLifetime.components.seconds)",
            "--refresh-grace-period", "\(refreshGracePeriod.components.seconds)",
            "--device-interval", "\(deviceInterval.components.seconds)",
            "--device-code-lifetime", "\(deviceCodeLifetime.components.seconds)",
        ]
        if let refreshTokenLifetime { arguments += ["--refresh-token-lifetime", "\(refreshTokenLifetime.components.seconds)"] }
        if !rotation { arguments.append("--no-rotation") }
        if !reuseProtection { arguments.append("--no-reuse-protection") }
        if !issParameter { arguments.append("--no-iss-parameter") }
        if completeDiscovery { arguments.append("--complete-discovery") }
        if let tls { arguments += ["--tls-name", tls.hostName, "--tls-cert", tls.certificate, "--tls-key", tls.key] }
        tlsName = tls?.hostName

        server = try await ServerProcess("identity provider", executable: try Self.python(), arguments: arguments,
                                         within: .seconds(60), slow: true)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }

    func stop() { server.stop() }

    // MARK: Where things are

    /// The issuer, exactly as discovery spells it: no trailing `/`.
    var issuer: String { "http://127.0.0.1:\(port)/o" }

    /// The issuer of the HTTPS listener (`tls`), `https://NAME:PORT/o`: a provider away from this
    /// machine, as far as authctl can tell. Its requests are logged with `tls` true.
    func httpsIssuer() async throws -> String {
        let name = try #require(tlsName, "the provider was started without tls")
        let answer = try JSONSerialization.jsonObject(with: try await control.data("/_tls")) as? [String: Any]
        let port = try #require(answer?["port"] as? Int, "\(String(describing: answer))")
        return "https://\(name):\(port)/o"
    }
    var discoveryURL: String { "\(issuer)/.well-known/openid-configuration" }
    var authorizationEndpoint: String { "\(issuer)/authorize/" }
    var tokenEndpoint: String { "\(issuer)/token/" }
    var userinfoEndpoint: String { "\(issuer)/userinfo/" }
    var jwksURI: String { "\(issuer)/.well-known/jwks.json" }
    /// RFC 7009 revocation; discovery names it only with `completeDiscovery` (give it as `--revoke-url`).
    var revocationEndpoint: String { "\(issuer)/revoke_token/" }
    /// RFC 8628 device authorization; discovery names it only with `completeDiscovery`
    /// (give it as `--device-authorization-url`).
    var deviceAuthorizationEndpoint: String { "\(issuer)/device-authorization/" }
    /// The page where the person enters the user code (the answer's `verification_uri`).
    var verificationPage: String { "\(issuer)/device/" }

    // MARK: What it was asked

    /// How many requests each endpoint answered: `discovery`, `jwks`, `authorize`, `login`,
    /// `authorization_code`, `refresh`, `device_poll` (token requests by grant type), `token` (all
    /// of them), `device_authorization`, `device_page`, `device_confirm`, `userinfo`, `revoke`.
    /// An endpoint never asked is absent.
    func stats() async throws -> [String: Int] { try await control.stats([String: Int].self) }

    /// How many requests `endpoint` (a name of `stats()`) answered.
    func count(_ endpoint: String) async throws -> Int { try await stats()[endpoint] ?? 0 }

    /// Every request so far: `endpoint`, `method`, `path`, `query`, `fields` (the form), `authorization`,
    /// `userAgent`, `accept`, `status`, `location`, `time` (seconds since the epoch, when it arrived).
    func log() async throws -> [[String: Any]] { try await control.log() }

    /// How many refresh tokens each person holds that are neither revoked nor rotated away.
    func liveRefreshTokens() async throws -> [String: Int] {
        try await JSONSerialization.jsonObject(with: control.data("/_live")) as? [String: Int] ?? [:]
    }

    /// Changes django-oauth-toolkit settings while the provider runs, by their names
    /// (`ACCESS_TOKEN_EXPIRE_SECONDS`, `ROTATE_REFRESH_TOKEN`, … as the README lists them; and
    /// `DEVICE_CODE_EXPIRE_SECONDS`, the provider's own).
    func configure(_ settings: [String: Any]) async throws {
        try await control.configure(try JSONSerialization.data(withJSONObject: settings))
    }

    private var control: ControlEndpoint { ControlEndpoint("the identity provider", port: port) }

    // MARK: The person

    /// What the person does at the consent page (or, in the device flow, with the code).
    enum Decision: String, Sendable {
        case approve, deny
        /// Stays at the consent page (or before entering the code), as a person who closes the tab.
        case ignore
    }

    /// How the browser stand-in plays the browser.
    enum Engine: String, Sendable {
        /// Python's HTTP client: fast.
        case http
        /// Headless Chromium driven by Selenium: a real browser, some seconds a sign-in.
        case chromium
    }

    /// The program to give authctl as `BROWSER`.
    static var browserStandIn: String { directory.appendingPathComponent("browser-stand-in").path }

    /// The environment that makes authctl's browser the stand-in, signing in as `person` and
    /// deciding as `decision`; the callback page authctl served then lands in `result` as JSON
    /// (`standInOutcome(at:)`).
    /// - Parameters:
    ///   - callbackChanges: callback parameters replaced or added on the way (`["iss": "…"]`: a mix-up).
    ///   - callbackDrops: callback parameters removed on the way (`["iss"]`).
    ///   - callbackReplays: how many more times the stand-in fetches the callback; their answers are `again`.
    ///   The three need the `http` engine.
    static func browserEnvironment(result: URL, person: Person = ada, password: String = password,
                                   decision: Decision = .approve, engine: Engine = .http,
                                   callbackChanges: [String: String] = [:], callbackDrops: [String] = [],
                                   callbackReplays: Int = 0) throws -> [String: String] {
        var changes = URLComponents()
        changes.queryItems = callbackChanges.map { URLQueryItem(name: $0.key, value: $0.value) }
        return [
            "BROWSER": browserStandIn, "IDP_PYTHON": try python(), "IDP_USER": person.userName, "IDP_PASSWORD": password,
            "IDP_DECISION": decision.rawValue, "IDP_ENGINE": engine.rawValue, "IDP_RESULT": result.path,
            "IDP_CALLBACK_SET": (changes.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B"), "IDP_CALLBACK_DROP": callbackDrops.joined(separator: ","),
            "IDP_CALLBACK_AGAIN": "\(callbackReplays)",
        ]
    }

    /// What a stand-in wrote to `result` — `status` and `body` of the callback page,
    /// `callbackURL`, `contentType`, `error` when it did not get there, `steps` — or nil while it
    /// has not finished.
    static func standInOutcome(at result: URL) -> [String: Any]? {
        guard let data = try? Data(contentsOf: result) else { return nil }
        return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    }

    /// Plays the person on their other device: opens `verificationURI`, signs in as `person`, enters
    /// `userCode` (nil: the one `verification_uri_complete` carries) and decides. Returns what the
    /// stand-in saw (`status`, `error`); true in `decided` when the provider took the decision.
    func approveDevice(verificationURI: String, userCode: String?, person: Person = ada,
                       decision: Decision = .approve) async throws -> (decided: Bool, outcome: [String: Any]) {
        let result = folder.appendingPathComponent("device-\(UUID().uuidString).json")
        let process = try await Spawned(
            try Self.python(), [Self.directory.appendingPathComponent("device_stand_in.py").path, verificationURI] + (userCode.map { [$0] } ?? []),
            input: nil, environment: ProcessInfo.processInfo.environment.merging(
                ["IDP_USER": person.userName, "IDP_PASSWORD": Self.password, "IDP_DECISION": decision.rawValue, "IDP_RESULT": result.path]) { $1 },
            leadsProcessGroup: true)
        guard await eventually(within: .seconds(60), { process.hasEnded }) else {
            process.signal(SIGTERM)
            Issue.record("the device stand-in did not finish within 60 s: \(process.stderr)")
            throw CocoaError(.fileReadUnknown)
        }
        let run = await process.wait(timeout: 10)
        let outcome = Self.standInOutcome(at: result) ?? ["error": "the device stand-in wrote no outcome: \(run.stderr)"]
        return (run.status == 0, outcome)
    }

    // MARK: Installation

    /// The folder of the provider's Python files.
    static var directory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("identity_provider")
    }

    /// The Python of the provider's environment, made by `.ci/install-deps`.
    static func python() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let python = root.appendingPathComponent(".build/identity-provider-venv/bin/python3").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("the identity provider's Python environment is missing: run .ci/install-deps")
            throw CocoaError(.fileNoSuchFile)
        }
        return python
    }
}

// MARK: Tokens of a sign-in, for the servers that take them

extension IdentityProvider {
    /// Tokens of one sign-in at the provider.
    struct SignedIn: Sendable {
        /// Opaque, good at userinfo: the refresh's (the refresh revoked the device flow's).
        let accessToken: String
        /// RS256, `aud` `authctl-device`, its lifetime the provider's `ID_TOKEN_EXPIRE_SECONDS` at the
        /// refresh (negative: already expired).
        let idToken: String
    }

    /// Signs `person` in through the device flow (the device stand-in approves) and refreshes once,
    /// since the device flow's answer has no ID token: what a Kubernetes client holds after a sign-in,
    /// and an access token for the servers that ask the userinfo endpoint (git, the registry).
    func signIn(_ person: Person = ada) async throws -> SignedIn {
        let device = try await Self.json(deviceAuthorizationEndpoint, form: ["client_id": Self.deviceClientID, "scope": "openid profile email"]).body
        let (decided, outcome) = try await approveDevice(verificationURI: try #require(device["verification_uri"] as? String),
                                                         userCode: device["user_code"] as? String, person: person)
        try #require(decided, "\(outcome)")
        let tokens = try await Self.json(tokenEndpoint, form: [
            "grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": device["device_code"] as? String ?? "",
            "client_id": Self.deviceClientID,
        ]).body
        let refreshed = try await Self.json(tokenEndpoint, form: [
            "grant_type": "refresh_token", "refresh_token": try #require(tokens["refresh_token"] as? String, "\(tokens)"),
            "client_id": Self.deviceClientID,
        ]).body
        return SignedIn(accessToken: try #require(refreshed["access_token"] as? String, "\(refreshed)"),
                        idToken: try #require(refreshed["id_token"] as? String, "\(refreshed)"))
    }

    /// Asks one of the provider's endpoints as a client would: a GET, or a POST of `form`, with
    /// `bearer` as the access token when given; the answer's status and its JSON object (empty
    /// when it has none).
    static func json(_ url: String, form: [String: String]? = nil, bearer: String? = nil) async throws -> (status: Int, body: [String: Any]) {
        var request = URLRequest(url: URL(string: url)!)
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        if let form {
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            var components = URLComponents()
            components.queryItems = form.map { URLQueryItem(name: $0.key, value: $0.value) }
            request.httpBody = Data((components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B").utf8)
        }
        let (data, answer) = try await URLSession.shared.data(for: request)
        return ((answer as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
    }
}
