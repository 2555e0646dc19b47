/* Linked into every test: the environment's CPU switches become the
 * library's defaults before main (the library reads no environment). */
#include <stdio.h>
#include <stdlib.h>

#include "env_settings.h"

__attribute__((constructor)) static void apply_env(void) {
    char err[256];
    if (tool_apply_env_settings(err, sizeof err)) {
        fprintf(stderr, "test environment: %s\n", err);
        exit(1);
    }
}
