// SPDX-License-Identifier: Apache-2.0
#ifndef AUTHCTL_FUZZER_DRIVER_H
#define AUTHCTL_FUZZER_DRIVER_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's own main loop, for a program that has a `main` of its own (libFuzzer's
// FuzzerInterface.h; in libclang_rt.fuzzer_no_main). Only `make fuzz` links that archive: the
// harness calls this only when built with FUZZING.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*test_one_input)(const uint8_t *data, size_t size));

#endif
