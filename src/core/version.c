/* Version queries and candle_free (api.h, version.h). CANDLE_VERSION_STRING
 * and the parts come from CMake's project(VERSION), so the library reports
 * what it was built as even if a program's headers are older. */
#include <stdlib.h>

#include "core-impl.h"

#ifndef CANDLE_VERSION_STRING
#error "CANDLE_VERSION_STRING is set by CMakeLists.txt from project(VERSION)"
#endif

const char *candle_version(void) { return CANDLE_VERSION_STRING; }

int candle_version_number(void) {
    return CANDLE_VERSION_MAJOR_BUILT * 10000 + CANDLE_VERSION_MINOR_BUILT * 100 +
           CANDLE_VERSION_PATCH_BUILT;
}

/* The library allocates with malloc, so free is its match; the point of the
 * wrapper is that the caller's free may not be this malloc's. */
void candle_free(void *p) { free(p); }
