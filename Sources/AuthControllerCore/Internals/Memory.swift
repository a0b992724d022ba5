/// Memory that held a secret.
public enum Memory {
    /// Overwrites the bytes with zeros in a way the compiler may not drop, e.g. a buffer that
    /// held a password. The corresponding C function is `explicit_bzero`.
    public static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        Posix.wipe(buffer)
    }
}
