// SPDX-License-Identifier: Apache-2.0
// SwiftPM builds a C target only from a source file; the declaration in the header is all there is.
#include "fuzzer_driver.h"
