// SPDX-License-Identifier: Apache-2.0
import Dispatch
import FuzzChecks
import Testing

/// Every committed fuzz input, the seed corpora and each input that once broke a check
/// (Tests/Fuzz), through the very check the fuzzer runs, without the fuzzer: a parser that
/// regresses fails here, in every `make test`.
@Suite("Fuzz inputs replayed")
struct FuzzReplayTests {
    @Test("each committed input of the fuzz target keeps its properties", arguments: FuzzTarget.all.map(\.name))
    func replay(_ name: String) async throws {
        let target = try #require(FuzzTarget.named(name))
        let inputs = target.committedInputs
        #expect(!inputs.isEmpty, "Tests/Fuzz/Corpus/\(name) has no seeds")
        // The network checks wait for the library's async calls by blocking their thread, which
        // must not be one of the concurrency pool's: they run on a thread of Dispatch's.
        let failures = await withCheckedContinuation { (continuation: CheckedContinuation<[String], Never>) in
            DispatchQueue.global().async {
                var failures: [String] = []
                for input in inputs {
                    do { try target.check(input.bytes) } catch { failures.append("\(input.path): \(error)") }
                }
                continuation.resume(returning: failures)
            }
        }
        for failure in failures { Issue.record("\(failure)") }
    }
}
