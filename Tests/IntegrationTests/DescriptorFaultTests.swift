// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

/// Out of file descriptors, `authctl` says so and exits 69, whoever ran short (GLib, libdispatch,
/// the bus connection): never a signal (GLib's SIGTRAP, libdispatch's SIGILL).
@Suite("Fault: few file descriptors")
struct DescriptorFaultTests {
    static let statuses: Set<Int32> = [0, 1, 69, 74, 75]

    @Test("status and watch under `ulimit -n N` end with an exit status, never a signal", arguments: [4, 5, 6, 8, 10, 12, 14, 16, 20, 34, 40, 64])
    func fewDescriptors(_ limit: Int) async throws {
        let scenario = try await Scenario()
        for command in [#""$AUTHCTL" status"#, #""$AUTHCTL" watch --timeout 1"#] {
            let run = try await scenario.shell("ulimit -n \(limit) && exec \(command)")
            #expect(Self.statuses.contains(run.status), "ulimit -n \(limit); \(command): \(run)")
            if run.status == 69 {
                #expect(run.stderr.hasPrefix("authctl: "), "\(run)")
                #expect(run.stderr.filter { $0 == "\n" }.count == 1, "one line: \(run)")
            }
        }
    }

    @Test("a soft limit too low for a command is raised up to the hard limit: the command runs")
    func softLimitRaised() async throws {
        let scenario = try await Scenario()
        let run = try await scenario.shell(#"ulimit -S -n 8 && exec "$AUTHCTL" status"#)
        #expect(run.status == 1, "\(run)")
    }
}
