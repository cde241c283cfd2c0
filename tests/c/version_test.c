// SPDX-License-Identifier: BSD-3-Clause
/* The version from C: remora/version.h's macros (through remora/remora.h) and remora_version()
 * agree. Exits 0 when they do. */
#include <remora/remora.h>

#include <stdio.h>
#include <string.h>

#if REMORA_VERSION != \
    REMORA_VERSION_OF(REMORA_VERSION_MAJOR, REMORA_VERSION_MINOR, REMORA_VERSION_PATCH)
#error "REMORA_VERSION does not match its parts"
#endif

int main(void) {
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", REMORA_VERSION_MAJOR, REMORA_VERSION_MINOR,
             REMORA_VERSION_PATCH);
    if (strcmp(want, REMORA_VERSION_STRING) != 0 || strcmp(want, remora_version()) != 0) {
        fprintf(stderr, "version: headers %s (%s), library %s\n", REMORA_VERSION_STRING, want,
                remora_version());
        return 1;
    }
    printf("version: %s\n", remora_version());
    return 0;
}
