// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
internal import Glibc
#endif
import SystemPackage

/// What this process was started with: its environment, its user's passwd entry, and the way
/// out. The library's behaviour never reads these; the command line does, through here. It is
/// plumbing of this package (`package`): the executable and the sandbox see it, an app does not.
package enum ProcessEnvironment {
    /// Opens `/dev/null` on standard input, output and error where they are closed. Otherwise
    /// the first descriptor the process opens (GLib's wakeup eventfd, say) would become "standard
    /// input", and a password would be read from it, or output written into it.
    /// The corresponding C functions are `fcntl` and `open`.
    /// Returns whether standard output was closed (what is printed then goes nowhere, which
    /// the caller reports).
    @discardableResult
    package static func reopenClosedStandardDescriptors() -> (standardOutputWasClosed: Bool, Void) {
        var outputClosed = false
        func isClosed(_ descriptor: Int32) -> Bool {
            do {
                try Posix.check { fcntl(descriptor, F_GETFD) }
                return false
            } catch {
                return error == .badFileDescriptor
            }
        }
        for descriptor in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where isClosed(descriptor) {
            if descriptor == STDOUT_FILENO { outputClosed = true }
            // open() returns the lowest free descriptor: this one.
            _ = open("/dev/null", descriptor == STDIN_FILENO ? O_RDONLY : O_WRONLY)
        }
        return (outputClosed, ())
    }

    /// The absolute path of the running program (`/proc/self/exe`); `nil` when it cannot be read.
    /// The corresponding C function is `readlink`.
    package static var executablePath: String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The value of an environment variable; `nil` when it is unset or empty.
    /// The corresponding C function is `getenv`.
    package static func value(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }

    /// The value of an environment variable as it is set, empty included; `nil` when unset.
    /// The corresponding C function is `getenv`.
    package static func valueEvenIfEmpty(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Every environment variable (`NAME=value` entries without `=` are skipped; the first of a
    /// repeated name wins, as `getenv` finds it). The corresponding C variable is `environ`.
    package static var all: [String: String] {
        var variables: [String: String] = [:]
        let first: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ
        guard var entry = first else { return variables }
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "="), variables[String(text[..<equals])] == nil {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return variables
    }

    /// The effective user's entry in the passwd database.
    package struct PasswdEntry: Sendable, Equatable {
        /// The login name.
        package var name: String
        /// The first comma-separated field of GECOS (the real name), `nil` when empty.
        package var realName: String?
        /// The home directory.
        package var homeDirectory: String
    }

    /// The effective user's passwd entry, or `nil` when there is none.
    /// The corresponding C functions are `geteuid` and `getpwuid`.
    /// `HOME`, else the passwd entry's home folder, else `/`.
    package static var homeDirectory: String {
        value("HOME") ?? currentUser?.homeDirectory ?? "/"
    }

    package static var currentUser: PasswdEntry? {
        guard let entry = getpwuid(geteuid()) else { return nil }
        let gecos = entry.pointee.pw_gecos.map { String(cString: $0) } ?? ""
        let realName = gecos.split(separator: ",", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        return PasswdEntry(name: entry.pointee.pw_name.map { String(cString: $0) } ?? "",
                           realName: realName.isEmpty ? nil : realName,
                           homeDirectory: entry.pointee.pw_dir.map { String(cString: $0) } ?? "/")
    }

    /// How many more file descriptors the process can open, counted up to `limit`: as many as
    /// open before one fails (`EMFILE`), each closed again at once. Standard input must be open
    /// (see ``reopenClosedStandardDescriptors()``). The corresponding C functions are `fcntl`
    /// (`F_DUPFD_CLOEXEC`) and `close`.
    package static func freeDescriptors(upTo limit: Int) -> Int {
        var opened: [Int32] = []
        opened.reserveCapacity(limit)
        defer { for descriptor in opened { _ = close(descriptor) } }
        while opened.count < limit {
            let descriptor = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)
            guard descriptor >= 0 else { break }
            opened.append(descriptor)
        }
        return opened.count
    }

    /// Raises the soft limit on open file descriptors by `count`, at most to the hard limit;
    /// returns whether it rose. Children inherit the new limit.
    /// The corresponding C functions are `getrlimit` and `setrlimit` (`RLIMIT_NOFILE`).
    @discardableResult
    package static func raiseDescriptorLimit(by count: Int) -> Bool {
        var limits = rlimit()
        guard getrlimit(descriptorResource, &limits) == 0 else { return false }
        let raised = min(limits.rlim_max, limits.rlim_cur + rlim_t(count))
        guard raised > limits.rlim_cur else { return false }
        limits.rlim_cur = raised
        return setrlimit(descriptorResource, &limits) == 0
    }

    /// `RLIMIT_NOFILE` as the `rlimit` calls take it: glibc declares the resources as a C
    /// enumeration, which Swift imports as a type of its own.
    private static let descriptorResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

    /// Ends the process with `status`, running `atexit` handlers.
    /// The corresponding C function is `exit`.
    package static func exit(_ status: Int32) -> Never {
        Glibc.exit(status)
    }
}
