import AuthController
#if canImport(Glibc)
import Glibc
#endif

/// Reads passwords: from the terminal with echo off, or from standard input to end of file.
/// Never from an argument.
enum PasswordReader {
    /// Whether standard input is a terminal.
    static var standardInputIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// Fails with exit 64 unless a password source exists.
    static func requireSource(passwordStdin: Bool) throws(AuthError) {
        guard passwordStdin || standardInputIsTerminal else {
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
            explicit_bzero(buffer.baseAddress!, capacity)
            buffer.deallocate()
        }
        var length = 0
        while length < capacity {
            let count = Glibc.read(STDIN_FILENO, buffer.baseAddress! + length, capacity - length)
            if count == -1 {
                if errno == EINTR { continue }
                throw .invalidInput("cannot read the password from standard input: \(String(cString: strerror(errno)))")
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

    /// One line from the terminal with echo off; the prompt goes to stderr.
    private static func readTerminal(prompt: String) throws(AuthError) -> Password {
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else {
            throw .usage("cannot switch the terminal's echo off; pass --password-stdin and pipe the password in")
        }
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        silent.c_lflag |= tcflag_t(ICANON)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            _ = Glibc.write(STDERR_FILENO, "\n", 1)
        }
        _ = prompt.withCString { Glibc.write(STDERR_FILENO, $0, strlen($0)) }
        var line: [UInt8] = []
        line.reserveCapacity(Password.maximumLength + 1)
        var byte: UInt8 = 0
        while true {
            let count = Glibc.read(STDIN_FILENO, &byte, 1)
            if count == -1 && errno == EINTR { continue }
            if count <= 0 || byte == UInt8(ascii: "\n") { break }
            if line.count <= Password.maximumLength { line.append(byte) }
        }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        defer { line.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
        let result = line.withUnsafeBytes { bytes in Result { () throws(AuthError) in try Password(bytes: bytes) } }
        return try result.get()
    }
}
