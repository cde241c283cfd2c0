// SPDX-License-Identifier: BSD-3-Clause
/* A C program using the installed C API: opens a domain on tcp and names its provider. */
#include <stdio.h>
#include <string.h>

#include <remora/remora.h>

int main(void) {
    const struct remora_domain_config cfg = {.size = sizeof cfg, .provider = "tcp"};
    struct remora_provider_caps caps = {.size = sizeof caps};
    remora_domain* dom = NULL;
    if (remora_domain_open(&cfg, &dom) != 0 || remora_domain_caps(dom, &caps) != 0) {
        fprintf(stderr, "consumer: %s\n", remora_last_error_message());
        return 1;
    }
    remora_domain_delete(dom);
    return strcmp(caps.provider, "tcp") == 0 ? 0 : 1;
}
