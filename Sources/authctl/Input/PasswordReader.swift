// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
import SystemPackage

/// Reads passwords: from the terminal with echo off, or from standard input to end of file.
/// Never from an argument.
enum PasswordReader {
    /// Fails with exit 64 unless a password source exists.
    static func requireSource(passwordStdin: Bool) throws(AuthError) {
        guard passwordStdin || Terminal.standardInput.isTerminal else {
            throw .usage("standard input is not a terminal; pipe the password in and pass --password-stdin")
        }
    }

    /// The password from the chosen source. At a terminal, `confirm` asks twice.
    static func read(passwordStdin: Bool, prompt: String, confirm: Bool) throws(AuthError) -> Password {
        if passwordStdin { return try readStandardInput() }
        let first = try readTerminal(prompt: prompt)
        guard confirm else { return first }
        let second = try readTerminal(prompt: "Repeat the password: ")
        guard first == second else { throw .invalidInput("the two passwords did not match; nothing was changed") }
        return first
    }

    /// Everything up to end of file, less one trailing `\n` or `\r\n`.
    static func readStandardInput() throws(AuthError) -> Password {
        // Room for the longest password, its line ending, and one byte to notice excess.
        let capacity = Password.maximumLength + 3
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer {
            Memory.wipe(buffer)
            buffer.deallocate()
        }
        var length = 0
        while length < capacity {
            let count: Int
            do {
                count = try FileDescriptor.standardInput.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[length...]))
            } catch {
                throw .invalidInput("cannot read the password from standard input: \(error)")
            }
            if count == 0 { break }
            length += count
        }
        if length >= 1 && buffer[length - 1] == UInt8(ascii: "\n") {
            length -= 1
            if length >= 1 && buffer[length - 1] == UInt8(ascii: "\r") { length -= 1 }
        }
        return try Password(bytes: UnsafeRawBufferPointer(rebasing: buffer[0..<length]))
    }

    /// One line from the terminal with echo off; the prompt goes to stderr. A signal during
    /// the prompt restores the echo before it ends the process (see `Terminal`).
    private static func readTerminal(prompt: String) throws(AuthError) -> Password {
        let line = Terminal.standardInput.withEchoDisabled { () -> [UInt8] in
            Output.prompt(prompt)
            defer { Output.endPrompt() }
            var line: [UInt8] = []
            line.reserveCapacity(Password.maximumLength + 2)
            var byte: UInt8 = 0
            while true {
                // End of file or an error ends the line as Enter does; the length rules judge it.
                let count = (try? withUnsafeMutableBytes(of: &byte) { try FileDescriptor.standardInput.read(into: $0) }) ?? 0
                if count <= 0 || byte == UInt8(ascii: "\n") { break }
                if line.count <= Password.maximumLength { line.append(byte) }
            }
            return line
        }
        guard var line else {
            throw .usage("cannot switch the terminal's echo off; pass --password-stdin and pipe the password in")
        }
        defer { line.withUnsafeMutableBytes { Memory.wipe($0) } }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        let result = line.withUnsafeBytes { bytes in Result { () throws(AuthError) in try Password(bytes: bytes) } }
        return try result.get()
    }
}
