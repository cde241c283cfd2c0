// SPDX-License-Identifier: BSD-3-Clause
// tests/fuzz/fuzz_check.hpp — a contract check for the libFuzzer targets: a failed check prints
// what broke and aborts, which libFuzzer reports as a crash (and saves the input).
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            std::fprintf(stderr, "%s:%d: contract broken: %s\n", __FILE__, __LINE__, #cond); \
            std::abort();                                                                    \
        }                                                                                    \
    } while (0)
