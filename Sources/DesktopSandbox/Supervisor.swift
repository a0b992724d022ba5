// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
internal import Subprocess
import Synchronization
#if canImport(System)
internal import System
#else
internal import SystemPackage
#endif

/// The sandbox's undertaker: a `/bin/sh` process that holds the read end of a pipe whose
/// write end only the sandbox holds, and that cleans up when the pipe reaches its end — when
/// the sandbox closes it in ``finish()``, or when the sandbox dies, however it dies.
///
/// Why a separate process: a SIGKILLed process runs no code of its own, so the cleanup that
/// `authctl sandbox` promises even after a SIGKILL (README, "Headless") must run elsewhere. The
/// usual alternative, `PR_SET_PDEATHSIG` set in each child, needs code between `fork` and
/// `exec`, which swift-subprocess (1.0.2) has no hook for; it would also reach neither the
/// temporary directory nor a COMMAND that must get SIGTERM and nothing harsher. A shell script
/// needs no binary of ours, so the same supervisor serves `authctl sandbox` and a sandbox
/// inside any other process (the test suite's).
///
/// What it is told, one line each: `directory PATH`, `sockets PATH`, `keep`, `daemon PID`,
/// `command PID`.
/// It notes each process's start time when told of it, and signals a process later only if
/// that pid still has that start time and is not a zombie, so a reused pid is never hit.
/// At the end: SIGTERM to the command; SIGTERM to each daemon's process group, SIGKILL to
/// those still there after one second; then the directory is removed (unless `keep`), and the
/// socket directory (even with `keep`: the sockets' daemons are gone).
/// It ignores SIGINT, SIGHUP, SIGTERM and SIGQUIT and leads its own process group: the
/// Ctrl-C meant for the command must not take the cleanup down with it.
final class Supervisor: Sendable {
    private let process: Daemon
    private let channel: Mutex<FileDescriptor?>

    static let script = #"""
        trap '' INT HUP TERM QUIT
        started() {
            line=
            read -r line 2>/dev/null </proc/"$1"/stat || return 0
            line=${line##*) }
            set -- $line
            [ "$1" = Z ] || echo "${20}"
        }
        alive() { [ -n "$2" ] && [ "$(started "$1")" = "$2" ]; }
        directory= sockets= keep= command= daemons=
        while read -r kind value; do
            case $kind in
            directory) directory=$value ;;
            sockets) sockets=$value ;;
            keep) keep=1 ;;
            command) command="$value $(started "$value")" ;;
            daemon) daemons="$daemons $value:$(started "$value")" ;;
            esac
        done
        if [ -n "$command" ]; then
            set -- $command
            alive "$1" "${2-}" && kill -TERM "$1"
        fi
        for entry in $daemons; do
            alive "${entry%%:*}" "${entry#*:}" && kill -TERM "-${entry%%:*}"
        done
        tries=0
        while [ -n "$daemons" ] && [ $tries -lt 60 ]; do
            left=
            for entry in $daemons; do alive "${entry%%:*}" "${entry#*:}" && left=1; done
            [ -z "$left" ] && break
            sleep 0.01
            tries=$((tries + 1))
        done
        for entry in $daemons; do
            alive "${entry%%:*}" "${entry#*:}" && kill -KILL "-${entry%%:*}"
        done
        if [ -n "$directory" ] && [ -z "$keep" ]; then rm -rf -- "$directory"; fi
        if [ -n "$sockets" ]; then rm -rf -- "$sockets"; fi
        exit 0
        """#

    private init(process: Daemon, channel: FileDescriptor) {
        self.process = process
        self.channel = Mutex(channel)
    }

    /// Starts the supervisor with an empty list.
    static func start() async throws(AuthError) -> Supervisor {
        let ends: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
        do {
            // Close-on-exec, so that no other child of this process inherits the write end and
            // keeps the pipe open after this process is gone.
            ends = try FileDescriptor.pipe(options: .closeOnExec)
        } catch {
            throw .unavailable("cannot create the sandbox's supervisor pipe: \(error)")
        }
        let process: Daemon
        do {
            process = try await Daemon.start("the sandbox supervisor (/bin/sh)", path: "/bin/sh", arguments: ["-c", script],
                                             environment: .inherit,
                                             input: .fileDescriptor(ends.readEnd, closeAfterSpawningProcess: true))
        } catch {
            try? ends.writeEnd.close()
            throw error
        }
        return Supervisor(process: process, channel: ends.writeEnd)
    }

    /// Adds the directory to remove at the end.
    func remove(directory: String) { tell("directory \(directory)") }
    /// Adds the directory of the daemons' sockets, removed at the end even when the directory
    /// is kept.
    func remove(socketDirectory: String) { tell("sockets \(socketDirectory)") }
    /// Keeps the directory after all.
    func keepDirectory() { tell("keep") }
    /// Adds a daemon: its process group gets SIGTERM at the end, then SIGKILL.
    func stop(daemon processID: Int32) { tell("daemon \(processID)") }
    /// Adds the command: it gets SIGTERM at the end, if it still runs.
    func terminate(command processID: Int32) { tell("command \(processID)") }

    private func tell(_ line: String) {
        channel.withLock { channel in
            guard let channel else { return }
            _ = try? channel.writeAll(Array((line + "\n").utf8))
        }
    }

    /// Closes the pipe, so the supervisor cleans up now, and waits until it has.
    func finish() async {
        let channel = channel.withLock { channel -> FileDescriptor? in
            defer { channel = nil }
            return channel
        }
        try? channel?.close()
        await process.waitForExit()
    }
}
