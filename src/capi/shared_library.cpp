// SPDX-License-Identifier: BSD-3-Clause
// src/capi/shared_library.cpp — the shared library's own translation unit.
//
// libremora.so is the whole static library (linked with --whole-archive) behind the version
// script cmake/remora.map; CMake needs one source of the target's own, and this is it. Nothing
// is defined here, so nothing is compiled twice.
