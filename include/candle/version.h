/* Library version. The macros are the headers a program was compiled
 * against; candle_version() is the library it runs with (they differ when
 * a newer libcandle.so of the same SOVERSION is installed). CMake checks
 * that the macros match project(VERSION). */
#ifndef CANDLE_VERSION_H
#define CANDLE_VERSION_H

#include "api.h"

#define CANDLE_VERSION_MAJOR 0
#define CANDLE_VERSION_MINOR 1
#define CANDLE_VERSION_PATCH 0
#define CANDLE_VERSION "0.1.0"
/* major * 10000 + minor * 100 + patch, for #if comparisons. */
#define CANDLE_VERSION_NUMBER \
    (CANDLE_VERSION_MAJOR * 10000 + CANDLE_VERSION_MINOR * 100 + CANDLE_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* "0.1.0": the version the library was built as. */
CANDLE_API const char *candle_version(void);
/* The same as a number (CANDLE_VERSION_NUMBER's encoding). */
CANDLE_API int candle_version_number(void);

#ifdef __cplusplus
}
#endif
#endif
