// SPDX-License-Identifier: Apache-2.0
import CFuzzerDriver
import FuzzChecks
#if canImport(Glibc)
import Glibc
#endif

/// `authctl-fuzz TARGET [ARGUMENTS…]`, or a link named TARGET to it: runs the check of one
/// fuzz target. Built by `make fuzz` (with FUZZING, instrumented, linked with libFuzzer), the
/// arguments are libFuzzer's; otherwise they are files and folders of inputs to run the check on
/// once each, which is how a crash input is looked at without the fuzzer.
@main
enum FuzzHarness {
    /// The target libFuzzer's callback checks: set once, before the driver starts.
    nonisolated(unsafe) static var target: FuzzTarget?

    static func main() {
        var arguments = CommandLine.arguments
        let calledAs = String(arguments[0].split(separator: "/").last ?? "")
        if let named = FuzzTarget.named(calledAs) {
            target = named
        } else if arguments.count > 1, let named = FuzzTarget.named(arguments[1]) {
            target = named
            arguments.remove(at: 1)
        } else {
            let names = FuzzTarget.all.map(\.name).joined(separator: " ")
            complain("usage: authctl-fuzz TARGET [ARGUMENTS…], or a link named TARGET; the targets: \(names)")
            exit(2)
        }
        #if FUZZING
        // libFuzzer keeps the arguments for the processes it starts (-fork, -jobs): the target's
        // name stays out of them, so only a link named after the target can use those.
        var count = Int32(arguments.count)
        var vector: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = .allocate(capacity: arguments.count + 1)
        for (index, argument) in arguments.enumerated() { vector![index] = strdup(argument) }
        vector![arguments.count] = nil
        exit(LLVMFuzzerRunDriver(&count, &vector) { data, size in
            let input = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
            do {
                try FuzzHarness.target!.check(input)
            } catch {
                fatalError("\(FuzzHarness.target!.name): \(error)")
            }
            return 0
        })
        #else
        exit(replay(arguments.dropFirst()))
        #endif
    }

    /// Runs the check once on each file named, or in a folder named; 1 if any fails.
    private static func replay(_ paths: ArraySlice<String>) -> Int32 {
        var failed = false
        for path in paths {
            var files = [path]
            if let folder = opendir(path) {
                files = []
                while let entry = readdir(folder) {
                    let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                    if !name.hasPrefix(".") { files.append(path + "/" + name) }
                }
                closedir(folder)
            }
            for file in files.sorted() {
                guard let stream = fopen(file, "rb") else {
                    complain("\(file): cannot open")
                    failed = true
                    continue
                }
                var input: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 65536)
                while case let count = fread(&chunk, 1, chunk.count, stream), count > 0 { input += chunk[..<count] }
                fclose(stream)
                do {
                    try target!.check(input)
                    print("\(file): holds")
                } catch {
                    print("\(file): \(error)")
                    failed = true
                }
            }
        }
        return failed ? 1 : 0
    }

    private static func complain(_ line: String) {
        var text = line + "\n"
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}
