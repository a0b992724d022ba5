// SPDX-License-Identifier: Apache-2.0
internal import CGLib

/// Programs started and left to run by themselves: the person's browser.
package enum DetachedProcess {
    /// Starts `arguments[0]` (looked up in `PATH` when it has no `/`) with the other arguments,
    /// standard input from and output to `/dev/null`, and returns without waiting: GLib starts it
    /// through an intermediate child that exits at once, so it is never this process's zombie
    /// and outlives it. A program that cannot be started is an error message; how a started one
    /// ends is never known. The corresponding C function is `g_spawn_async`.
    package static func start(_ arguments: [String]) -> String? {
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        let flags = GSpawnFlags(rawValue: G_SPAWN_SEARCH_PATH.rawValue | G_SPAWN_STDOUT_TO_DEV_NULL.rawValue | G_SPAWN_STDERR_TO_DEV_NULL.rawValue)
        do throws(GLibError) {
            _ = try withGError { error in
                pointers.withUnsafeMutableBufferPointer { g_spawn_async(nil, $0.baseAddress, nil, flags, nil, nil, nil, error) }
            }
            return nil
        } catch {
            return error.message
        }
    }
}
