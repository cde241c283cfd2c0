// SPDX-License-Identifier: BSD-3-Clause
#include <remora/version.hpp>

namespace remora {

const char* version() noexcept {
    return REMORA_VERSION_STRING;
}

}  // namespace remora
