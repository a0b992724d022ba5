// SPDX-License-Identifier: Apache-2.0
// What the authctl executable sets up before its Swift code runs.
//
// The Swift runtime's backtracer, when a crash happens with a terminal on standard input, prints
// the report and then offers to debug, waiting 30 s for a key (its default, `interactive=tty`): a
// command must never sit waiting for a person after a crash. Its settings come from
// SWIFT_BACKTRACE, read once as the runtime starts, before any code of the executable runs when the
// runtime is a shared library (debug builds), or in an initialiser of the executable when it is
// linked in (release builds). So at a terminal, unless the user set SWIFT_BACKTRACE, the process
// starts again at once, through /proc/self/exe, with `SWIFT_BACKTRACE=interactive=no` added to its
// environment. Away from a terminal the backtracer never waits, and nothing is done.
//
// Why not `setenv` in a constructor that runs first (`constructor(101)`)? It moves `environ` to a
// new array, and a runtime linked into the executable finds the program's arguments by walking back
// from the original one: the release build then traps before `main`. Nor `.preinit_array`: it runs
// before the C library has set `environ` up.
//
// This is a target of the command line alone: a program that links the library keeps its own
// settings. Commands started from here inherit the setting.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "process_start.h"

static const char backtraceSetting[] = "SWIFT_BACKTRACE=interactive=no";

// glibc passes the program's arguments and environment to initialisers as to `main`.
__attribute__((constructor))
static void authctl_disable_interactive_backtraces(int argc, char **argv, char **envp) {
    (void)argc;
    const char *settings = getenv("SWIFT_BACKTRACE");
    if (settings != NULL && settings[0] != '\0') return;
    if (!isatty(STDIN_FILENO) || argv == NULL || envp == NULL) return;
    size_t count = 0;
    while (envp[count] != NULL) count++;
    char **environment = calloc(count + 2, sizeof(char *));
    if (environment == NULL) return;
    size_t kept = 0;
    for (size_t index = 0; index < count; index++) {
        // An empty SWIFT_BACKTRACE, set but meaning nothing, is replaced.
        if (strncmp(envp[index], "SWIFT_BACKTRACE=", strlen("SWIFT_BACKTRACE=")) == 0) continue;
        environment[kept++] = envp[index];
    }
    environment[kept++] = (char *)backtraceSetting;
    environment[kept] = NULL;
    execve("/proc/self/exe", argv, environment);
    // Should exec fail (no /proc), the process goes on as it is.
    free(environment);
}

// The program's arguments, for Swift's `CommandLine`.
//
// On Linux the Swift runtime finds `argv` for `CommandLine.arguments` with a global initialiser
// of its own (`ArgvGrabber`, in the runtime's CommandLine.cpp) that, at every start, reads
// /proc/self/maps line by line with `sscanf` to find the stack, then walks back from `environ`:
// about 0.25 M instructions and a dozen system calls, and the kernel writes out a line for each
// of the ~115 mappings of a process with fifteen shared libraries. glibc hands the arguments to
// initialisers directly (as above), so they are kept here, and the runtime's function that
// `CommandLine` asks for them is this one: its object file is then never taken from the static
// runtime's archive, and its initialiser never runs. Should a runtime rename the function, the
// archive's version comes back and only the time is lost.
static char **startArguments;
static int startArgumentCount;

__attribute__((constructor))
static void authctl_keep_arguments(int argc, char **argv, char **envp) {
    (void)envp;
    startArgumentCount = argc;
    startArguments = argv;
}

// The runtime's `_swift_stdlib_getUnsafeArgvArgc` (Swift calling convention): the argument
// vector, with its length in `outArgLen`; it stays valid for the life of the process.
__attribute__((swiftcall))
char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
    static char *noArguments[] = { NULL };
    if (startArguments == NULL) {
        *outArgLen = 0;
        return noArguments;
    }
    *outArgLen = startArgumentCount;
    return startArguments;
}

// Its companion in the same object file, which lets a host override the arguments (the
// interpreter's immediate mode); kept so that nothing can pull the runtime's object back in.
__attribute__((swiftcall))
void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc) {
    startArguments = argv;
    startArgumentCount = argc;
}
