// SPDX-License-Identifier: Apache-2.0
package import FoundationEssentials

/// What a kubectl exec credential plugin answers (`client.authentication.k8s.io`'s
/// `ExecCredential`): the token kubectl sends to the API server as a Bearer token, and when it
/// expires. kubectl runs the plugin again once that time has passed, or when the server answers
/// 401.
///
/// ``AuthController/execCredential(_:presenting:)`` makes one from the signed-in session.
package struct ExecCredential: Equatable, Sendable, Encodable {
    /// The versions of the exec credential API that kubectl speaks.
    package enum APIVersion: String, Sendable, CaseIterable {
        /// Spoken by every kubectl since 1.11 (Debian 12's 1.20 among them).
        case v1beta1 = "client.authentication.k8s.io/v1beta1"
        /// Since kubectl 1.22.
        case v1 = "client.authentication.k8s.io/v1"
    }

    /// The version kubectl asked for, which the answer must carry.
    package var apiVersion: APIVersion
    /// The token, as the `Authorization: Bearer` of every request.
    package var token: String
    /// When the token expires by the local clock, as kubectl compares it; `nil` when unknown.
    package var expiresAt: Date?
    /// Notes for the person, not part of the answer: e.g. the server could not be reached, so a
    /// still-valid token is handed out unrefreshed.
    package var warnings: [AuthError.Message]

    /// An answer in `apiVersion` with `token`, which expires at `expiresAt`.
    package init(apiVersion: APIVersion, token: String, expiresAt: Date?, warnings: [AuthError.Message] = []) {
        self.apiVersion = apiVersion
        self.token = token
        self.expiresAt = expiresAt
        self.warnings = warnings
    }

    /// The version kubectl asks for in the environment variable `KUBERNETES_EXEC_INFO` (an
    /// `ExecCredential` whose `apiVersion` names it), given as `execInfo`. Without the variable
    /// (`nil` or empty: a kubectl that sets none, or the plugin run by hand), ``APIVersion/v1beta1``,
    /// which every kubectl reads. Anything else is ``AuthError/invalidInput(_:)-enum.case``: an
    /// answer in a version kubectl did not ask for would fail there with a less clear message.
    package static func apiVersion(requestedIn execInfo: String?) throws(AuthError) -> APIVersion {
        guard let execInfo, !execInfo.isEmpty else { return .v1beta1 }
        struct Request: Decodable { var apiVersion: String }
        // kubectl's own is a few hundred bytes (the cluster's CA included, when it is asked for).
        guard execInfo.utf8.count <= 1024 * 1024,
              let request = try? JSONDecoder().decode(Request.self, from: Data(execInfo.utf8)) else {
            throw .invalidInput("KUBERNETES_EXEC_INFO is not an ExecCredential with an apiVersion: it is not what kubectl sets")
        }
        guard let version = APIVersion(rawValue: request.apiVersion) else {
            let versions = APIVersion.allCases.map(\.rawValue).joined(separator: " and ")
            // Echoed only when it is plain text: nothing in it can reorder or hide the line.
            let printable = request.apiVersion.utf8.count <= 200 && request.apiVersion.utf8.allSatisfy { (0x20...0x7E).contains($0) }
            throw .invalidInput("KUBERNETES_EXEC_INFO asks for \(printable ? "apiVersion '\(request.apiVersion)'" : "another apiVersion"); only \(versions) are spoken")
        }
        return version
    }

    private enum CodingKeys: String, CodingKey { case apiVersion, kind, status }
    private enum StatusKeys: String, CodingKey { case token, expirationTimestamp }

    /// `{"apiVersion":…,"kind":"ExecCredential","status":{"token":…,"expirationTimestamp":…}}`:
    /// the expiry in RFC 3339 UTC whole seconds, left out when unknown.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(apiVersion.rawValue, forKey: .apiVersion)
        try container.encode("ExecCredential", forKey: .kind)
        var status = container.nestedContainer(keyedBy: StatusKeys.self, forKey: .status)
        try status.encode(token, forKey: .token)
        if let expiresAt { try status.encode(Timestamp.rfc3339(expiresAt), forKey: .expirationTimestamp) }
    }
}

extension AuthController {
    /// Which of the session's tokens Kubernetes is given.
    package enum KubernetesToken: Sendable {
        /// The OpenID provider's ID token, which Kubernetes' OpenID Connect authenticator verifies.
        case idToken
        /// The access token, for API servers that take it (through a webhook authenticator).
        case accessToken
    }

    /// The signed-in session's token as a kubectl exec credential plugin answers it, refreshed
    /// when due exactly as ``accessToken(minValid:forceRefresh:checkingIDToken:)`` refreshes it
    /// (one refresh, however many kubectl processes ask at once). Never prompts and never opens
    /// a browser: kubectl may run with nobody at the screen.
    ///
    /// ``KubernetesToken/idToken`` needs a service bound to an OpenID provider
    /// (``AuthError/invalidInput(_:)-enum.case`` otherwise: only those tokens are verified ID
    /// tokens). Nobody signed in is ``AuthError/notSignedIn(_:)-enum.case``; other failures are
    /// those of ``accessToken(minValid:forceRefresh:checkingIDToken:)``.
    package func execCredential(_ apiVersion: ExecCredential.APIVersion, presenting kind: KubernetesToken) async throws(AuthError) -> ExecCredential {
        guard kind == .idToken else {
            let token = try await withSignInHint { () async throws(AuthError) in try await accessToken() }
            return ExecCredential(apiVersion: apiVersion, token: token.token, expiresAt: token.expiresAt, warnings: token.warnings)
        }
        let (token, idToken) = try await verifiedIDToken(for: "kubectl", offeringAccessToken: true)
        return ExecCredential(apiVersion: apiVersion, token: idToken, expiresAt: token.idTokenExpiresAt, warnings: token.warnings)
    }

    /// The signed-in session's verified ID token, for a tool that presents it (kubectl, STS,
    /// Google's token exchange, named `tool` in messages), with the tokens it came with: refreshed
    /// when the ID token is due, or when `forceRefresh`, exactly as
    /// ``accessToken(minValid:forceRefresh:checkingIDToken:)`` refreshes. Needs a service bound to
    /// an OpenID provider (``AuthError/invalidInput(_:)-enum.case`` otherwise: only those tokens
    /// are verified ID tokens). Nobody signed in is ``AuthError/notSignedIn(_:)-enum.case``, with
    /// the sign-in to run. With `offeringAccessToken`, a refusal names the tool's option to take
    /// the access token instead.
    package func verifiedIDToken(for tool: String, forceRefresh: Bool = false,
                                 offeringAccessToken: Bool = false) async throws(AuthError) -> (token: AccessToken, idToken: String) {
        let instead: AuthError.Message = offeringAccessToken ? "\(hint: .presentAccessToken)" : "bind an OpenID provider with `authctl server set URL --protocol oidc`"
        let binding = try await offload { () throws(AuthError) in try self.binding() }
        if let binding, binding.tokenProtocol != .oidc {
            throw .invalidInput("\(service) is bound to a token server that issues no verified ID token (protocol \(binding.tokenProtocol.rawValue)), and \(tool) takes only those; \(instead)")
        }
        let token = try await withSignInHint { () async throws(AuthError) in
            try await accessToken(forceRefresh: forceRefresh, checkingIDToken: true)
        }
        guard let idToken = token.idToken else {
            throw offeringAccessToken
                ? .invalidInput("\(token.account) holds no ID token at \(service): the provider issued none; \(hint: .presentAccessToken)")
                : .invalidInput("\(token.account) holds no ID token at \(service): the provider issued none, and \(tool) takes only an ID token")
        }
        return (token, idToken)
    }

    /// `body`, with the sign-in to run added to "nobody is signed in": a tool shows the error to
    /// someone who may not know which service it is.
    private func withSignInHint<T>(_ body: () async throws(AuthError) -> T) async throws(AuthError) -> T {
        do {
            return try await body()
        } catch {
            if case .notSignedIn(let message) = error { throw .notSignedIn("\(message); \(hint: .signIn(service))") }
            throw error
        }
    }
}
