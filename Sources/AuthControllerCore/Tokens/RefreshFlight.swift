// SPDX-License-Identifier: Apache-2.0
/// The refresh in flight in this process, so that concurrent tasks share one (the refresh lock
/// file does the same across processes).
actor RefreshFlight {
    private var running: Task<Result<AuthController.AccessToken, AuthError>, Never>?

    func run(_ refresh: @escaping @Sendable () async throws(AuthError) -> AuthController.AccessToken) async throws(AuthError) -> AuthController.AccessToken {
        if let running { return try await running.value.get() }
        let task = Task { () async -> Result<AuthController.AccessToken, AuthError> in
            do throws(AuthError) { return .success(try await refresh()) } catch { return .failure(error) }
        }
        running = task
        defer { running = nil }
        return try await task.value.get()
    }
}
