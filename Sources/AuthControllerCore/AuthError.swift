// SPDX-License-Identifier: Apache-2.0
/// Every failure the library reports, in few families: nobody signed in, a wrong request, bad
/// input, something unavailable, the settings file, a deadline, the token server's answer, a
/// refusal, an unsafe settings file: one case per family, so a front end tells them apart with one
/// `switch`.
///
/// The ``message`` is one line that says what happened and what to do next, in the library's
/// own words. Where the next step is something a front end offers (sign out, forget an
/// account, allow the unlock prompt), the message carries it as a ``Hint`` too, which a front
/// end may word its own way: ``message(wordingHints:)``. `detail`, where present, keeps the
/// underlying GLib error domain and code for bug reports.
public enum AuthError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Nobody is signed in to the service: a clean "no", not a fault.
    case notSignedIn(Message)
    /// The request was wrong as a whole: options that do not go together, or no source for the
    /// password.
    case usage(Message)
    /// Input data broke a rule: account id, display name, service, password, or a stored
    /// secret that is not a usable authctl hash.
    case invalidInput(Message)
    /// The session bus, the Secret Service or its default collection is not there, the
    /// collection is locked and no prompt may be shown, a required daemon is missing, or the
    /// token server is unreachable or failing.
    case unavailable(Message, detail: String? = nil)
    /// The settings file or its directory cannot be read or written.
    case settingsIO(Message)
    /// A deadline passed (keyring call, prompt, settings lock, token server) or the Secret
    /// Service went away mid-call; nothing changed.
    case temporaryFailure(Message, detail: String? = nil)
    /// The token server's answer was not understood: not JSON, no access token, a token type
    /// other than Bearer, over 64 KiB, or a redirect.
    case protocolError(Message)
    /// Wrong password (locally or at the token server), the unlock prompt was dismissed, or the
    /// token server ended the session.
    case denied(Message)
    /// The settings file is corrupt or unsafe to use.
    case settingsUnsafe(Message)

    /// ``notSignedIn(_:)`` with a message of plain text.
    package static func notSignedIn(_ text: String) -> AuthError { .notSignedIn(Message(text)) }
    /// ``usage(_:)`` with a message of plain text.
    package static func usage(_ text: String) -> AuthError { .usage(Message(text)) }
    /// ``invalidInput(_:)`` with a message of plain text.
    package static func invalidInput(_ text: String) -> AuthError { .invalidInput(Message(text)) }
    /// ``unavailable(_:detail:)`` with a message of plain text.
    package static func unavailable(_ text: String, detail: String? = nil) -> AuthError { .unavailable(Message(text), detail: detail) }
    /// ``settingsIO(_:)`` with a message of plain text.
    package static func settingsIO(_ text: String) -> AuthError { .settingsIO(Message(text)) }
    /// ``temporaryFailure(_:detail:)`` with a message of plain text.
    package static func temporaryFailure(_ text: String, detail: String? = nil) -> AuthError { .temporaryFailure(Message(text), detail: detail) }
    /// ``protocolError(_:)`` with a message of plain text.
    package static func protocolError(_ text: String) -> AuthError { .protocolError(Message(text)) }
    /// ``denied(_:)`` with a message of plain text.
    package static func denied(_ text: String) -> AuthError { .denied(Message(text)) }
    /// ``settingsUnsafe(_:)`` with a message of plain text.
    package static func settingsUnsafe(_ text: String) -> AuthError { .settingsUnsafe(Message(text)) }

    /// The process exit status for this error's family: 1 for nobody signed in, otherwise the
    /// code of sysexits.h (64 usage, 65 data, 69 unavailable, 74 I/O, 75 temporary failure,
    /// 76 protocol, 77 permission, 78 configuration).
    package var exitCode: Int32 {
        switch self {
        case .notSignedIn: 1
        case .usage: 64
        case .invalidInput: 65
        case .unavailable: 69
        case .settingsIO: 74
        case .temporaryFailure: 75
        case .protocolError: 76
        case .denied: 77
        case .settingsUnsafe: 78
        }
    }

    /// The one-line human message, in the library's own words.
    public var message: String { explanation.description }

    /// The message with each of its ``hints`` worded by `word`, as a front end says it (a
    /// command line names its command or option there).
    public func message(wordingHints word: (Hint) -> String) -> String {
        explanation.worded(hints: word)
    }

    /// The next steps and settings the message points to, in its order.
    public var hints: [Hint] { explanation.hints }

    /// The message as the case holds it: text and hints.
    public var explanation: Message {
        switch self {
        case .notSignedIn(let message), .usage(let message), .invalidInput(let message),
             .unavailable(let message, _), .settingsIO(let message),
             .temporaryFailure(let message, _), .protocolError(let message), .denied(let message),
             .settingsUnsafe(let message):
            message
        }
    }

    /// The underlying GLib error (domain, code, text), when the failure came from GLib.
    public var detail: String? {
        switch self {
        case .unavailable(_, let detail), .temporaryFailure(_, let detail): detail
        default: nil
        }
    }

    /// The message, in the library's own words.
    public var description: String { message }
}

extension AuthError {
    /// The same failure with `note` added to its message.
    func adding(_ note: String) -> AuthError {
        // Every case spelled out, no `default`: a case added later must not lose the note.
        switch self {
        case .notSignedIn(let message): .notSignedIn(message + note)
        case .usage(let message): .usage(message + note)
        case .invalidInput(let message): .invalidInput(message + note)
        case .unavailable(let message, let detail): .unavailable(message + note, detail: detail)
        case .settingsIO(let message): .settingsIO(message + note)
        case .temporaryFailure(let message, let detail): .temporaryFailure(message + note, detail: detail)
        case .protocolError(let message): .protocolError(message + note)
        case .denied(let message): .denied(message + note)
        case .settingsUnsafe(let message): .settingsUnsafe(message + note)
        }
    }
}

extension AuthError {
    /// A next step or a setting that a message points to, which each front end names in its
    /// own way: the library in plain words (its ``description``), a command line as the
    /// command or option that does it.
    public enum Hint: Sendable, Hashable, CustomStringConvertible {
        /// Sign out of the service before the change asked for.
        case signOutFirst
        /// Forget the account, which clears its keyring item.
        case forget(AccountID)
        /// Forget these accounts first: their tokens are kept in the keyring, and the change
        /// asked for would put them out of reach.
        case forgetFirst([AccountID])
        /// Bind the service to a token server.
        case bindServer
        /// Bind the service to a token server of protocol `json`, the one with registration.
        case bindRegistrationServer
        /// Registering a new account at the token server, which only protocol `json` offers.
        case registration
        /// Sign in without registering: the account exists at the token server already.
        case signInWithoutRegistering
        /// Allow the keyring's unlock prompt, which this request ruled out.
        case allowUnlockPrompt
        /// Give Secret Service calls a longer deadline.
        case raiseKeyringTimeout
        /// Give requests to the token server a longer deadline.
        case raiseServerTimeout
        /// A private session bus and keyring of their own, as the DesktopSandbox module starts them.
        case sandbox
        /// The login service that exports the login state on the session bus.
        case loginService
        /// Start the login service so that it takes the bus name over from the one running.
        case replaceLoginService
        /// The shell command that runs once per login event.
        case eventCommand
        /// Sign out, which writes a new settings file and keeps the corrupt one as a copy.
        case signOutToReplaceSettings
        /// Sign in or out, either of which writes a new settings file.
        case signInOrOutToReplaceSettings
        /// The client id an OpenID provider registered for this program.
        case clientID
        /// The options only an OpenID Connect binding takes (account claim, device authorization
        /// URL, redirect port).
        case openIDOptions
        /// Sign in at the OpenID provider again, in the browser or with a device code.
        case signInAgain
        /// Give the person more time to sign in at the provider.
        case raiseSignInTimeout
        /// Present the access token instead of an ID token the server does not issue.
        case presentAccessToken
        /// Sign in to this service.
        case signIn(ServiceName)

        /// The hint in the library's words, as ``AuthError/message`` says it.
        public var description: String {
            switch self {
            case .signOutFirst: "sign out first"
            case .forget(let account): "clear it by forgetting \(account)"
            case .forgetFirst(let accounts): "forget \(accounts.map(\.rawValue).joined(separator: ", ")) first"
            case .bindServer: "bind it to a token server"
            case .bindRegistrationServer: "; bind it to one first"
            case .registration: "registration"
            case .signInWithoutRegistering: "sign in without registering"
            case .allowUnlockPrompt: "allow the unlock prompt"
            case .raiseKeyringTimeout: "allow the keyring more time"
            case .raiseServerTimeout: "allow the token server more time"
            case .sandbox: "in a private desktop sandbox"
            case .loginService: "the login service"
            case .replaceLoginService: "take the name over by starting the login service as its replacement"
            case .eventCommand: "the event command"
            case .signOutToReplaceSettings: "sign out to replace it"
            case .signInOrOutToReplaceSettings: "signing in or out replaces it"
            case .clientID: "give it as the client id"
            case .openIDOptions: "the account claim, device authorization URL and redirect port"
            case .signInAgain: "sign in again"
            case .raiseSignInTimeout: "allow more time to sign in"
            case .presentAccessToken: "present the access token instead"
            case .signIn(let service): "sign in to \(service)"
            }
        }
    }

    /// A one-line message: text, with ``Hint``s where a front end may word the next step its
    /// own way. Written as a string literal, with `\(hint: …)` for a hint:
    /// `"\(account) is signed in; \(hint: .signOutFirst), then change the server"`.
    ///
    /// A message interpolated into another keeps its hints only where the literal is known to
    /// be a `Message` (a parameter or a variable of that type); in a `String` it becomes the
    /// library's words.
    public struct Message: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringInterpolation {
        /// One piece of a message.
        public enum Part: Sendable, Hashable {
            /// Words that every front end says alike.
            case text(String)
            /// A hint, worded by the front end.
            case hint(Hint)
        }

        /// The pieces in order; neighbouring text is one piece, and no text piece is empty.
        public private(set) var parts: [Part] = []

        /// A message of plain text.
        public init(_ text: String) {
            append(text)
        }

        /// A message of plain text, written as a string literal without interpolations.
        public init(stringLiteral text: String) {
            self.init(text)
        }

        /// A message written as a string literal with interpolations; each `\(hint: …)` stays a hint.
        public init(stringInterpolation: StringInterpolation) {
            self = stringInterpolation.message
        }

        /// The hints, in order.
        public var hints: [Hint] {
            parts.compactMap { if case .hint(let hint) = $0 { hint } else { nil } }
        }

        /// The message in the library's words.
        public var description: String { worded { $0.description } }

        /// The message with each hint worded by `word`.
        public func worded(hints word: (Hint) -> String) -> String {
            parts.map { part in
                switch part {
                case .text(let text): text
                case .hint(let hint): word(hint)
                }
            }.joined()
        }

        /// The same message with `text` added at the end.
        public static func + (message: Message, text: String) -> Message {
            var result = message
            result.append(text)
            return result
        }

        fileprivate mutating func append(_ text: String) {
            guard !text.isEmpty else { return }
            if case .text(let last)? = parts.last {
                parts[parts.count - 1] = .text(last + text)
            } else {
                parts.append(.text(text))
            }
        }

        fileprivate mutating func append(_ hint: Hint) {
            parts.append(.hint(hint))
        }

        /// Builds a ``Message`` from a string literal with interpolations.
        public struct StringInterpolation: StringInterpolationProtocol {
            fileprivate var message = Message()

            private init() {}

            /// Starts an empty message; the sizes are only an estimate, and go unused.
            public init(literalCapacity: Int, interpolationCount: Int) {}

            /// The literal text between interpolations, added as words every front end says alike.
            public mutating func appendLiteral(_ literal: String) {
                message.append(literal)
            }

            /// A value as text, as a plain string interpolation writes it.
            public mutating func appendInterpolation<Value>(_ value: Value) {
                message.append(String(describing: value))
            }

            /// A hint, worded by the front end.
            public mutating func appendInterpolation(hint: Hint) {
                message.append(hint)
            }

            /// Another message, its hints kept.
            public mutating func appendInterpolation(_ other: Message) {
                for part in other.parts {
                    switch part {
                    case .text(let text): message.append(text)
                    case .hint(let hint): message.append(hint)
                    }
                }
            }
        }

        private init() {}
    }
}

extension String {
    /// The text with every control character (U+0000–U+001F, U+007F–U+009F) written as
    /// `\u{…}`, so that no input can break a one-line message or a terminal.
    package var controlCharactersEscaped: String {
        var result = ""
        for scalar in unicodeScalars {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                result += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

extension String {
    /// Text a peer sent (a server, a provider, the Secret Service) as it may appear in a message:
    /// without control characters, line and paragraph separators (U+2028, U+2029) and format
    /// characters (the direction marks, overrides and isolates, zero-width spaces and joiners,
    /// the byte-order mark, soft hyphens), so that it cannot forge lines, hide text or make the
    /// rest of the line read otherwise; with `limit`, at most that many characters and then
    /// `…`, so that it cannot flood a terminal.
    func peerText(limit: Int? = nil) -> String {
        let clean = String(String.UnicodeScalarView(unicodeScalars.filter { scalar in
            !isControl(scalar) && scalar != "\u{2028}" && scalar != "\u{2029}" && scalar.properties.generalCategory != .format
        }))
        guard let limit, clean.count > limit else { return clean }
        return String(clean.prefix(limit)) + "…"
    }
}
