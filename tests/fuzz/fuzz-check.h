/* The fuzz targets' property check: a failed property names itself and
 * traps, which libFuzzer records as a crash with the input. */
#ifndef CANDLE_FUZZ_CHECK_H
#define CANDLE_FUZZ_CHECK_H

#include <stdio.h>

#define check(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                           \
        }                                                                               \
    } while (0)

#endif
