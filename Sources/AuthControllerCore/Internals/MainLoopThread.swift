// SPDX-License-Identifier: Apache-2.0
internal import CGLib
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A GLib main context iterated on a thread of its own: D-Bus signals, and `serve`'s objects,
/// are dispatched there.
/// Everything attached to its context runs on that thread.
final class MainLoopThread: @unchecked Sendable {
    // Sendable: `context` never changes and a GLib main context is thread-safe
    // (`g_main_context_wakeup` may be called from any thread); `stopping` is atomic and
    // `thread` is guarded by `threadLock`.
    let context: OpaquePointer
    private let stopping = Atomic<Bool>(false)
    private let threadLock = Mutex<pthread_t?>(nil)

    init() {
        context = g_main_context_new()
    }

    /// Runs `body` with the loop's context as the thread-default one, so that what it sets
    /// up (signal subscriptions) is dispatched on the loop's thread.
    func withContext<T, Failure: Error>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        g_main_context_push_thread_default(context)
        defer { g_main_context_pop_thread_default(context) }
        return try body()
    }

    /// Starts iterating the context on a new thread until ``stop()``. Not `g_main_loop_run`:
    /// a `g_main_loop_quit` that comes before the thread reaches `g_main_loop_run` is lost, and
    /// the loop would then run for ever. The flag is checked before every iteration instead.
    /// The corresponding C function is `g_main_context_iteration`.
    func start() {
        let unmanaged = Unmanaged.passRetained(self)
        var handle = pthread_t()
        pthread_create(&handle, nil, { argument in
            let this = Unmanaged<MainLoopThread>.fromOpaque(argument!).takeRetainedValue()
            g_main_context_push_thread_default(this.context)
            while !this.stopping.load(ordering: .acquiring) { g_main_context_iteration(this.context, 1) }
            g_main_context_pop_thread_default(this.context)
            return nil
        }, unmanaged.toOpaque())
        threadLock.withLock { $0 = handle }
    }

    /// Runs `body` on the loop's thread: at once when called there, else as soon as the loop
    /// gets to it. The corresponding C function is `g_main_context_invoke_full`.
    func perform(_ body: @escaping @Sendable () -> Void) {
        final class Work: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        g_main_context_invoke_full(context, G_PRIORITY_DEFAULT,
                                   { userData in Unmanaged<Work>.fromOpaque(userData!).takeUnretainedValue().body(); return 0 },
                                   Unmanaged.passRetained(Work(body)).toOpaque(),
                                   { userData in if let userData { Unmanaged<Work>.fromOpaque(userData).release() } })
    }

    /// Runs `body` on the loop's thread and returns its result. Only while the loop runs: after
    /// ``stop()`` nobody would run `body`, and the caller would wait for ever.
    func performAndWait<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        precondition(!stopping.load(ordering: .acquiring), "performAndWait after the loop stopped")
        return await withCheckedContinuation { continuation in
            perform { continuation.resume(returning: body()) }
        }
    }

    /// Stops the loop and waits for its thread. The corresponding C function is `g_main_context_wakeup`.
    func stop() {
        stopping.store(true, ordering: .releasing)
        g_main_context_wakeup(context)
        // Stopping from the loop's own thread (a handler that ends the listener) must not join itself.
        guard let thread = threadLock.withLock({ (thread: inout pthread_t?) -> pthread_t? in defer { thread = nil }; return thread }),
              pthread_equal(thread, pthread_self()) == 0 else { return }
        pthread_join(thread, nil)
    }

    deinit {
        g_main_context_unref(context)
    }
}
