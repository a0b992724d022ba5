// SPDX-License-Identifier: Apache-2.0
public import AuthControllerCore
import Synchronization

/// Keeps every broadcast in memory, for tests; can be told to fail.
public final class RecordingBroadcaster: EventBroadcaster {
    private let state = Mutex<(events: [LoginEvent], failure: AuthError?)>(([], nil))

    /// A broadcaster with nothing recorded yet.
    public init() {}

    /// Everything broadcast so far, in order.
    public var events: [LoginEvent] { state.withLock { $0.events } }

    /// Makes every later broadcast throw `failure` (or succeed again with `nil`).
    public func failBroadcasts(with failure: AuthError?) { state.withLock { $0.failure = failure } }

    /// Appends `events` to ``events``, or throws what ``failBroadcasts(with:)`` set, recording nothing.
    public func broadcast(_ events: [LoginEvent]) throws(AuthError) {
        try state.withLock { (state) throws(AuthError) in
            if let failure = state.failure { throw failure }
            state.events += events
        }
    }
}
