// SPDX-License-Identifier: Apache-2.0
#pragma once
// Nothing to call: the target's one object sets the process up before its Swift code runs (see
// process_start.c). The header is here because a C target needs one.
