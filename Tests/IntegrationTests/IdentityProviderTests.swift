// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TestSupport
import Testing

/// The OpenID Connect provider the sign-in tests run against (Support/IdentityProvider.swift)
/// starts, publishes what a client discovers, and plays the person in both flows.
@Suite("The test identity provider")
struct IdentityProviderTests {
    @Test("discovery names the issuer and the endpoints the wrapper knows, and is counted")
    func discovery() async throws {
        let provider = try await IdentityProvider()
        let (status, document) = try await IdentityProvider.json(provider.discoveryURL)
        #expect(status == 200)
        #expect(document["issuer"] as? String == provider.issuer)
        #expect(document["authorization_endpoint"] as? String == provider.authorizationEndpoint)
        #expect(document["token_endpoint"] as? String == provider.tokenEndpoint)
        #expect(document["userinfo_endpoint"] as? String == provider.userinfoEndpoint)
        #expect(document["jwks_uri"] as? String == provider.jwksURI)
        #expect(document["authorization_response_iss_parameter_supported"] as? Bool == true)
        #expect(document["code_challenge_methods_supported"] as? [String] == ["S256"])
        #expect(document["device_authorization_endpoint"] == nil)
        #expect(document["revocation_endpoint"] == nil)
        #expect(try await provider.count("discovery") == 1)
    }

    @Test("with completeDiscovery and without the iss parameter, discovery says so")
    func completeDiscovery() async throws {
        let provider = try await IdentityProvider(issParameter: false, completeDiscovery: true)
        let (_, document) = try await IdentityProvider.json(provider.discoveryURL)
        #expect(document["device_authorization_endpoint"] as? String == provider.deviceAuthorizationEndpoint)
        #expect(document["revocation_endpoint"] as? String == provider.revocationEndpoint)
        #expect(document["authorization_response_iss_parameter_supported"] == nil)
    }

    @Test("the device stand-in approves a user code, and the poll then answers tokens")
    func deviceFlow() async throws {
        let provider = try await IdentityProvider()
        let (_, device) = try await IdentityProvider.json(provider.deviceAuthorizationEndpoint,
                                                          form: ["client_id": IdentityProvider.deviceClientID, "scope": "openid profile email"])
        let verificationURI = try #require(device["verification_uri"] as? String)
        #expect(verificationURI == provider.verificationPage)
        let poll = ["grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": device["device_code"] as? String ?? "",
                    "client_id": IdentityProvider.deviceClientID]
        #expect(try await IdentityProvider.json(provider.tokenEndpoint, form: poll).body["error"] as? String == "authorization_pending")
        let (decided, outcome) = try await provider.approveDevice(verificationURI: verificationURI, userCode: device["user_code"] as? String)
        #expect(decided, "\(outcome)")
        let (status, tokens) = try await IdentityProvider.json(provider.tokenEndpoint, form: poll)
        #expect(status == 200)
        #expect(tokens["access_token"] is String)
        #expect(try await provider.count("device_poll") == 2)
    }

    @Test("the browser stand-in, started as authctl starts BROWSER, signs in and comes back with a code that the token endpoint takes (and a parameter added on the way)")
    func browserFlow() async throws {
        let provider = try await IdentityProvider()
        // A fixed PKCE pair: the challenge is the S256 of the verifier.
        let verifier = "a-fixed-verifier-for-the-test-only-0123456789-abcdefghijklmnop"
        let challenge = "bxAc2uAzq3mSR-gtNAiOyrdDaWDhz1Js2fOEqgdW260"
        // Nobody listens on the discard port: the callback URL the stand-in reaches is what counts here.
        let redirectURI = "http://127.0.0.1:9/callback"
        var authorization = try #require(URLComponents(string: provider.authorizationEndpoint))
        authorization.queryItems = [
            URLQueryItem(name: "response_type", value: "code"), URLQueryItem(name: "client_id", value: IdentityProvider.browserClientID),
            URLQueryItem(name: "redirect_uri", value: redirectURI), URLQueryItem(name: "scope", value: "openid profile email"),
            URLQueryItem(name: "state", value: "the-state"), URLQueryItem(name: "nonce", value: "the-nonce"),
            URLQueryItem(name: "code_challenge", value: challenge), URLQueryItem(name: "code_challenge_method", value: "S256"),
        ]
        let result = FileManager.default.temporaryDirectory.appendingPathComponent("browser-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: result) }
        let browser = try await Spawned(
            IdentityProvider.browserStandIn, [try #require(authorization.url?.absoluteString)], input: nil,
            environment: ProcessInfo.processInfo.environment.merging(
                try IdentityProvider.browserEnvironment(result: result, person: IdentityProvider.grace, callbackChanges: ["extra": "a+b"])) { $1 },
            leadsProcessGroup: true)
        #expect(await eventually(within: .seconds(30)) { IdentityProvider.standInOutcome(at: result) != nil }, "\(browser.stderr)")
        let outcome = try #require(IdentityProvider.standInOutcome(at: result))
        let callback = try #require(URLComponents(string: outcome["callbackURL"] as? String ?? ""), "\(outcome)")
        let query = Dictionary((callback.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { $1 }
        #expect(query["state"] == "the-state")
        #expect(query["iss"] == provider.issuer)
        #expect(query["extra"] == "a+b")
        let (status, tokens) = try await IdentityProvider.json(provider.tokenEndpoint, form: [
            "grant_type": "authorization_code", "code": query["code"] ?? "", "redirect_uri": redirectURI,
            "client_id": IdentityProvider.browserClientID, "code_verifier": verifier,
        ])
        #expect(status == 200)
        #expect(tokens["id_token"] is String)
        let (_, claims) = try await IdentityProvider.json(provider.userinfoEndpoint, bearer: tokens["access_token"] as? String)
        #expect(claims["email"] as? String == IdentityProvider.grace.email)
    }
}
