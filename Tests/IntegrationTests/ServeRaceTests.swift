// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `authctl serve` (`authctl.serve(1)`) under load and races: many services, changes in quick
/// succession, and the settings folder appearing after it started.
@Suite("serve under load and races")
struct ServeRaceTests {
    /// The CPU time a process has used so far, in seconds (`utime` + `stime` of /proc/PID/stat).
    func cpuSeconds(_ pid: pid_t) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command name, which is in parentheses and may hold spaces.
        let fields = stat[stat.range(of: ")", options: .backwards)!.upperBound...].split(separator: " ")
        return (Double(fields[11])! + Double(fields[12])!) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// serve's CPU seconds per change with 601 services. Parsing the file once per service took
    /// 0.4 s on an idle machine and over a second on a loaded one; one parse takes 0.06 s idle, and
    /// 0.155–0.167 s was measured with the machine's other core busy: on this virtual machine a
    /// busy neighbour slows each instruction, and CPU time grows with it.
    static let cpuPerChangeBound = 0.25

    @Test("a settings file with 600 services: a change reaches its object within 200 ms and costs serve little CPU, not a re-read of every service")
    func manyServices() async throws {
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox, service: "many.services")
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        // 600 more groups, as many services bound to a server would leave, written directly.
        var groups = ""
        for index in 0..<600 { groups += "\n[bound-\(index)]\nserver=https://tokens.example/oauth/token\nprotocol=oauth2\nsequence=3\n" }
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: scenario.settingsFile))
        try file.seekToEnd()
        try file.write(contentsOf: Data(groups.utf8))
        try file.close()
        let (serve, _) = try await scenario.startServe()
        let monitor = try await BusMonitor(scenario, rules: serveRules)
        let objects = try await scenario.call("GetManagedObjects", interface: "org.freedesktop.DBus.ObjectManager")
        #expect(objects.stdout.components(separatedBy: "'io.github.authctl.Session1'").count - 1 == 601, "\(objects.stdout.prefix(300))")

        // Rounds of four events; a round with a late event, or one that cost serve more CPU than
        // the bound, is repeated (a loaded machine can keep a process off the CPU, and slows the
        // CPU it gets), up to three: one must be on time throughout, and one within the bound.
        var rounds: [[Double]] = []
        var cpuPerChange: [Double] = []
        for round in 0..<3 {
            let before = try cpuSeconds(serve.pid)
            try await scenario.authctl("sign-out").expect(0)
            try await scenario.authctl("sign-in", "bob", "--password-stdin", stdin: "pw").expect(0)
            try await scenario.authctl("sign-out").expect(0)
            try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
            let last = UInt64(1 + 4 * (round + 1))
            let shown = await monitor.wait { BusMonitor.propertiesChanged(scenario.service)($0) && $0.uint64("Sequence") == last }
            #expect(shown.count == 1, "\(monitor.messages.suffix(4))")
            // The re-reads that follow the last change (its file and keyring notifications):
            // over once serve's CPU time has stood still for two samples, 250 ms apart.
            var samples: [Double] = []
            _ = try await eventually(within: .seconds(10), pollingEvery: .milliseconds(250)) {
                samples.append(try cpuSeconds(serve.pid))
                return samples.count >= 3 && samples.suffix(3).allSatisfy { $0 == samples.last }
            }
            cpuPerChange.append((try cpuSeconds(serve.pid) - before) / 4)
            let messages = monitor.messages
            let signals = messages.filter { BusMonitor.loginStatusChanged(scenario.service)($0) && ($0.uint64("sequence") ?? 0) > last - 4 }
            #expect(signals.count == 4, "\(signals)")
            var delays: [Double] = []
            for signal in signals {
                let sequence = try #require(signal.uint64("sequence"))
                let change = messages.first { BusMonitor.propertiesChanged(scenario.service)($0) && $0.time >= signal.time
                    && ($0.uint64("Sequence") ?? 0) >= sequence }
                delays.append(try #require(change, "no PropertiesChanged for event \(sequence)").time - signal.time)
            }
            rounds.append(delays)
            if rounds.contains(where: { $0.allSatisfy { $0 < 0.2 } }) && cpuPerChange.min()! < Self.cpuPerChangeBound { break }
        }
        print("serve with 601 services: PropertiesChanged after LoginStatusChanged, ms, per round:",
              rounds.map { $0.map { Int($0 * 1000) } }, "CPU ms per change:", cpuPerChange.map { Int($0 * 1000) })
        #expect(rounds.contains { $0.allSatisfy { $0 < 0.2 } }, "\(rounds)")
        #expect(cpuPerChange.min()! < Self.cpuPerChangeBound, "\(cpuPerChange)")
        serve.signal(SIGTERM)
        #expect(await serve.wait(timeout: 10).status == 0)
    }
}

extension ServeRaceTests {
    @Test("the settings folder missing when serve starts, then made by `server set` (which sends no event): the object appears within a second, each time")
    func settingsFolderAppears() async throws {
        let sandbox = try await OwnSandbox.start()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox, service: "late.folder")
        // $XDG_CONFIG_HOME exists, as on a desktop; its authctl folder does not.
        try FileManager.default.createDirectory(atPath: scenario.configHome, withIntermediateDirectories: true)
        let (serve, _) = try await scenario.startServe()
        let monitor = try await BusMonitor(scenario, rules: serveRules)
        let path = LoginService.objectPath(of: scenario.serviceName)
        var delays: [Double] = []
        // GLib polls for a missing folder every 4 s: three rounds on time are not luck.
        for round in 1...3 {
            try await scenario.authctl("server", "set", "https://tokens.example/oauth/token").expect(0)
            // From the moment the file was written, not the command's start (a process start on a loaded machine).
            let written = try #require(try FileManager.default.attributesOfItem(atPath: scenario.settingsFile)[.modificationDate] as? Date)
            let added = await monitor.wait(for: round) { $0.member == "InterfacesAdded" && $0.body.contains(path) }
            try #require(added.count == round, "no InterfacesAdded for \(path): \(serve.stderr)")
            delays.append(added[round - 1].time - written.timeIntervalSince1970)
            // The folder removed: the object goes (the file's watch), and the next round starts afresh.
            try FileManager.default.removeItem(atPath: scenario.settingsDirectory)
            let removed = await monitor.wait(for: round) { $0.member == "InterfacesRemoved" && $0.body.contains(path) }
            try #require(removed.count == round, "no InterfacesRemoved for \(path)")
        }
        print("serve: object of a new settings folder after", delays.map { Int($0 * 1000) }, "ms")
        #expect(delays.allSatisfy { $0 < 1 }, "\(delays)")
        serve.signal(SIGTERM)
        #expect(await serve.wait(timeout: 10).status == 0)
    }
}
