// SPDX-License-Identifier: BSD-3-Clause
// remora_version(): the C API's door to remora::version().
#include <remora/remora.h>
#include <remora/version.hpp>

extern "C" const char* remora_version(void) {
    return remora::version();
}
