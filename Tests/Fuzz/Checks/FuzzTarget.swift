// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Dispatch
import FoundationEssentials
import Synchronization

/// One parser of input authctl does not control, with what must hold for any input: it never
/// crashes, and what it accepts keeps the parser's own promises (a normalised value normalises
/// to itself, a record written back reads back the same, a refusal changes nothing). The same
/// check runs under libFuzzer (`authctl-fuzz`) and in the unit tests, over the committed inputs.
public struct FuzzTarget: Sendable {
    /// The name the fuzzer is called by, and the folder of its inputs under Tests/Fuzz.
    public let name: String
    private let check: @Sendable ([UInt8]) throws(PropertyViolation) -> Void

    init(_ name: String, _ check: @escaping @Sendable ([UInt8]) throws(PropertyViolation) -> Void) {
        self.name = name
        self.check = check
    }

    /// Runs the check on `input`; throws when a property does not hold. A crash in the parser is a
    /// crash here too.
    public func check(_ input: [UInt8]) throws(PropertyViolation) {
        try check(input)
    }

    /// Every target, in the order `make fuzz` runs them.
    public static let all: [FuzzTarget] = [
        FuzzTarget("bus-message", BusChecks.message),
        FuzzTarget("bus-conversation", BusChecks.conversation),
        FuzzTarget("bus-signal", BusChecks.signal),
        FuzzTarget("jws", TokenChecks.compactJWS),
        FuzzTarget("jwks", TokenChecks.keySet),
        FuzzTarget("discovery", ProviderChecks.discovery),
        FuzzTarget("token-answer", ProviderChecks.tokenAnswer),
        FuzzTarget("device-flow", ProviderChecks.deviceFlow),
        FuzzTarget("git-credential", ToolChecks.gitCredential),
        FuzzTarget("docker-config", ToolChecks.dockerConfiguration),
        FuzzTarget("kube-exec-info", ToolChecks.kubernetesExecInfo),
        FuzzTarget("settings", SettingsChecks.keyFile),
        FuzzTarget("loopback-query", ProviderChecks.loopbackQuery),
        FuzzTarget("loopback-request", ListenerChecks.request),
        FuzzTarget("validators", ValidatorChecks.validators),
        FuzzTarget("proxy-variables", ProxyChecks.variables),
        FuzzTarget("pasted-address", PastedAddressChecks.pasted),
        FuzzTarget("sts-answer", AWSChecks.answer),
        FuzzTarget("aws-config", AWSChecks.configuration),
    ]

    /// The target called `name`, if there is one.
    public static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }

    /// The committed inputs of this target: its seed corpus (Tests/Fuzz/Corpus/NAME) and every
    /// input that once broke a check (Tests/Fuzz/Regressions/NAME), by path.
    public var committedInputs: [(path: String, bytes: [UInt8])] {
        var inputs: [(path: String, bytes: [UInt8])] = []
        for folder in ["Corpus", "Regressions"] {
            let directory = Self.fuzzFolder + "/" + folder + "/" + name
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for file in names.sorted() where !file.hasPrefix(".") {
                let path = directory + "/" + file
                guard let bytes = try? Posix.readAll(path: path) else { continue }
                inputs.append((path, bytes))
            }
        }
        return inputs
    }

    /// Tests/Fuzz, found from this file's place in the source tree.
    static let fuzzFolder: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(2)
        return parts.joined(separator: "/")
    }()

    /// Tests/Fixtures.
    static var fixturesFolder: String { fuzzFolder + "/../Fixtures" }
}

/// A property that did not hold for an input.
public struct PropertyViolation: Error, CustomStringConvertible {
    /// What did not hold.
    public let description: String
}

func require(_ condition: Bool, _ what: @autoclosure () -> String) throws(PropertyViolation) {
    guard condition else { throw PropertyViolation(description: what()) }
}

/// An error caused by a peer's input is shown to people and sent to apps: the library's rule is
/// that peer text in it is quoted (``Swift/String/peerText(limit:)``), so no control character or
/// bidirectional override reaches a terminal or a notification.
func requireQuoted(_ error: AuthError, _ context: String) throws(PropertyViolation) {
    let text = error.message
    let unquoted = text.unicodeScalars.first { scalar in
        isControl(scalar) || scalar == "\u{2028}" || scalar == "\u{2029}"
            || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
    }
    try require(unquoted == nil,
                "\(context): the error message carries U+\(String(unquoted?.value ?? 0, radix: 16, uppercase: true)) unquoted: \(text.debugDescription)")
}

/// The token server and OpenID provider every network check talks to.
enum Peer {
    static let server = ServerURL(rawValue: "https://id.example.com/realms/desk")!
    static let tokenEndpoint = ServerURL(rawValue: "https://id.example.com/realms/desk/token")!
    /// 2030-03-17, the fixtures' time, in µs.
    static let now: UInt64 = 1_900_000_100_000_000

    static func binding(_ tokenProtocol: ServerBinding.TokenProtocol) -> ServerBinding {
        ServerBinding(server: server, tokenProtocol: tokenProtocol, clientID: "authctl", scope: nil)
    }

    static let provider = OpenIDProvider(issuer: server.rawValue, tokenEndpoint: tokenEndpoint,
                                         authorizationEndpoint: ServerURL(rawValue: "https://id.example.com/realms/desk/auth")!,
                                         deviceAuthorizationEndpoint: ServerURL(rawValue: "https://id.example.com/realms/desk/device")!,
                                         jwksURI: ServerURL(rawValue: "https://id.example.com/realms/desk/certs")!)
}

/// A server that answers each request with the next of `answers` (the last one again when they
/// run out), at once.
final class ScriptedTransport: HTTPTransport {
    private let answers: [HTTPResponse]
    private let next = Mutex(0)

    init(_ answers: [HTTPResponse]) { self.answers = answers }

    func send(_ request: HTTPRequest, timeout: Duration) async throws(AuthError) -> HTTPResponse {
        let index = next.withLock { index in
            defer { index += 1 }
            return min(index, answers.count - 1)
        }
        return answers[index]
    }
}

/// Runs async library code from the fuzzer's (synchronous) callback: on a task, with this thread
/// waiting. Never called from a task: the replay test calls the checks from a thread of its own.
func waitFor<Value: Sendable>(_ work: @escaping @Sendable () async -> Value) -> Value {
    let box = WaitedValue<Value>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        let value = await work()
        box.value.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return box.value.withLock { $0! }
}

private final class WaitedValue<Value: Sendable>: Sendable {
    let value = Mutex<Value?>(nil)
}

/// What an async call of the library returned or threw.
func outcome<Value>(_ call: () async throws(AuthError) -> Value) async -> Result<Value, AuthError> {
    do { return .success(try await call()) } catch { return .failure(error) }
}

/// The input split at NUL bytes: several texts from one input.
func texts(_ input: [UInt8], count: Int) -> [String] {
    var parts = input.split(separator: 0, maxSplits: count - 1, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    while parts.count < count { parts.append("") }
    return parts
}

/// Visible ASCII, as a token must be to be stored, printed on one line and sent in a header.
func isVisibleASCII(_ text: String) -> Bool {
    !text.isEmpty && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
}
