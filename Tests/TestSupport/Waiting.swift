// SPDX-License-Identifier: Apache-2.0
import AuthController

/// Checks `condition` every `interval` until it holds or `limit` has passed, and returns whether
/// it held. The wait suspends (it never blocks a thread of the cooperative pool), and the
/// condition is checked once more at the deadline, so one that became true just in time counts.
/// A cancelled task stops waiting at once.
public func eventually(within limit: Duration, pollingEvery interval: Duration = .milliseconds(20),
                       _ condition: () async throws -> Bool) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: limit)
    while clock.now < deadline, !Task.isCancelled {
        if try await condition() { return true }
        try? await Task.sleep(for: min(interval, deadline - clock.now))
    }
    return try await condition()
}
