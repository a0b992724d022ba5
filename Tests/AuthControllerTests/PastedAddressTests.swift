// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Synchronization
import Testing

/// The address a person pastes where their browser cannot reach the listener: taken exactly as
/// the listener takes a callback, or refused with the reason, the wait going on.
@Suite("Pasted addresses")
struct PastedAddressTests {
    @Test("taken only with this sign-in's state, once, and a code or an error; anything else refused with why")
    func offer() async throws {
        let listener = try LoopbackListener(port: nil, expectedState: "state-1")
        defer { listener.close() }
        let here = "http://127.0.0.1:\(listener.boundPort)/callback"
        let refusals: [(String, String)] = [
            ("https://evil.example/else?code=c&state=state-1", "is not this sign-in's"),
            ("http://127.0.0.1:1/callback?code=c&state=state-1", "is not this sign-in's"),
            (here + "?code=&state=state-1", "carries no single code"),
            (here + "?code=a&code=b&state=state-1", "carries no single code"),
            (here + "?code=c&state=state-2", "belongs to another sign-in"),
            (here + "?code=c&state=state-1&state=state-1", "more than one state"),
            (here + "?code=c", "carries no state"),
            ("c0de", "is not an address with a query"),
            (here + "?state=state-1", "carries no code"),
            (here + "?code=c&state=state-1\u{1b}[2J", "control character"),
            (here + "?code=c&state=state-1\u{85}", "control character"),
            (here + "?code=%zz&state=state-1", "broken %-encoding"),
            (here + "?state=state-1&code=" + String(repeating: "c", count: 9000), "longer than 8192 bytes"),
            ("   \r\n", "nothing was pasted"),
        ]
        for (line, reason) in refusals {
            let refusal = listener.offer(pastedAddress: line)
            #expect(refusal?.contains(reason) == true, "\(line.prefix(80)): \(refusal ?? "taken")")
        }
        #expect(listener.offer(pastedAddress: "  127.0.0.1:\(listener.boundPort)/callback?code=the+code&state=state-1&iss=x#top \r\n") == nil)
        let parameters = await listener.callback(timeout: .seconds(5))
        #expect(parameters?.first { $0.name == "code" }?.value == "the code")
        #expect(listener.offer(pastedAddress: here + "?code=c&state=state-1")?.contains("already") == true)
    }

    @Test("a wait for the callback cancelled before it began ends at once, with nothing (it used to wait for ever)")
    func cancelledBeforeItBegan() async throws {
        let listener = try LoopbackListener(port: nil, expectedState: "state-1")
        defer { listener.close() }
        let outcome = Mutex<String?>(nil)
        let waiting = Task {
            let parameters = await listener.callback(timeout: .seconds(600))
            outcome.withLock { $0 = parameters == nil ? "nothing" : "a callback" }
        }
        waiting.cancel()
        // Polled, not awaited: a wait that never ends must fail this test, not hang the suite.
        for _ in 0..<600 where outcome.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(100)) }
        #expect(outcome.withLock { $0 } == "nothing")
    }
}
