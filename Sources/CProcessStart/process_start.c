// What the authctl executable sets up before its Swift code runs.
//
// A constructor of priority 101 runs before every initialiser of this executable without a
// priority: in the release build, whose Swift runtime is linked into the executable
// (`--static-swift-stdlib`), before the runtime reads its settings. (An entry in `.preinit_array`
// would run earlier still, but before the C library has set `environ` up, so what it set would be
// lost.) A runtime in a shared library (a debug build) has read them before any code of the
// executable runs; there the process starts again with the setting, if it matters (see below).
// This is a target of the command line alone: a program that links the library keeps its own
// settings.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#include "process_start.h"

// The Swift runtime's backtracer, when a crash happens with a terminal on standard input, prints
// the report and then offers to debug, waiting 30 s for a key (its default, `interactive=tty`): a
// command must never sit waiting for a person after a crash. Its settings come from
// SWIFT_BACKTRACE; a user's own (non-empty) value is left as it is. Commands started from here
// inherit the setting.
//
// glibc passes the program's arguments to initialisers as to `main`.
__attribute__((constructor(101)))
static void authctl_disable_interactive_backtraces(int argc, char **argv, char **envp) {
    (void)argc;
    (void)envp;
    const char *settings = getenv("SWIFT_BACKTRACE");
    if (settings != NULL && settings[0] != '\0') return;
    if (setenv("SWIFT_BACKTRACE", "interactive=no", 1) != 0) return;
    // Away from a terminal the backtracer never waits, whatever it read; at one, a runtime that
    // read its settings already (in libswiftCore.so) reads them again only in a new process
    // image. Once: the next image finds the variable set. Should exec fail, the process goes on.
    if (!isatty(STDIN_FILENO)) return;
    void *sharedRuntime = dlopen("libswiftCore.so", RTLD_LAZY | RTLD_NOLOAD);
    if (sharedRuntime == NULL) return;
    dlclose(sharedRuntime);
    execv("/proc/self/exe", argv);
}
