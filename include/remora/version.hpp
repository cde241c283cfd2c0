// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora/version.hpp — the library's version from C++: remora::version() is the library a
/// program runs with, REMORA_VERSION_STRING (remora/version.h) the headers it was compiled
/// against.
#pragma once

#include <remora/version.h>

namespace remora {

/// The running library's version, "MAJOR.MINOR.PATCH" (a static string). Equal to
/// REMORA_VERSION_STRING when the program runs with the library it was compiled against.
const char* version() noexcept;

}  // namespace remora
