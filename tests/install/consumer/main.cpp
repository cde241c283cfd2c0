// SPDX-License-Identifier: BSD-3-Clause
#include <remora/remora.hpp>
int main() {
    auto d = remora::domain::open({.provider = "tcp"});
    return d ? 0 : 1;
}
