import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The OpenID Connect provider the sign-in tests run against (Support/IdentityProvider.swift)
/// starts, publishes what a client discovers, and plays the person in both flows.
@Suite("The test identity provider")
struct IdentityProviderTests {
    private func json(_ url: String, form: [String: String]? = nil) async throws -> (status: Int, body: [String: Any]) {
        var request = URLRequest(url: URL(string: url)!)
        if let form {
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            var components = URLComponents()
            components.queryItems = form.map { URLQueryItem(name: $0.key, value: $0.value) }
            request.httpBody = Data((components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B").utf8)
        }
        let (data, answer) = try await URLSession.shared.data(for: request)
        return ((answer as? HTTPURLResponse)?.statusCode ?? 0, try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:])
    }

    @Test("discovery names the issuer and the endpoints the wrapper knows, and is counted")
    func discovery() async throws {
        let provider = try await IdentityProvider()
        let (status, document) = try await json(provider.discoveryURL)
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
        let (_, document) = try await json(provider.discoveryURL)
        #expect(document["device_authorization_endpoint"] as? String == provider.deviceAuthorizationEndpoint)
        #expect(document["revocation_endpoint"] as? String == provider.revocationEndpoint)
        #expect(document["authorization_response_iss_parameter_supported"] == nil)
    }

    @Test("the device stand-in approves a user code, and the poll then answers tokens")
    func deviceFlow() async throws {
        let provider = try await IdentityProvider()
        let (_, device) = try await json(provider.deviceAuthorizationEndpoint,
                                         form: ["client_id": IdentityProvider.deviceClientID, "scope": "openid profile email"])
        let verificationURI = try #require(device["verification_uri"] as? String)
        #expect(verificationURI == provider.verificationPage)
        let poll = ["grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": device["device_code"] as? String ?? "",
                    "client_id": IdentityProvider.deviceClientID]
        #expect(try await json(provider.tokenEndpoint, form: poll).body["error"] as? String == "authorization_pending")
        let (decided, outcome) = try await provider.approveDevice(verificationURI: verificationURI, userCode: device["user_code"] as? String)
        #expect(decided, "\(outcome)")
        let (status, tokens) = try await json(provider.tokenEndpoint, form: poll)
        #expect(status == 200)
        #expect(tokens["access_token"] is String)
        #expect(try await provider.count("device_poll") == 2)
    }
}
