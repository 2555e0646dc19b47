/* NEON dots of q4_0, q4_1, q8_0 on plain armv8-a (no dotprod): 8x8-bit
 * widening multiplies pairwise-added into int32 (no 16-bit overflow: one
 * product is at most 128 * 128). See legacy-neon-impl.h. */
#if defined(__aarch64__)
#define NEON_SFX neon
#define NEON_DOT16(acc, a, b) \
    vpadalq_s16(vpadalq_s16((acc), vmull_s8(vget_low_s8(a), vget_low_s8(b))), vmull_high_s8((a), (b)))
#include "legacy-neon-impl.h"
#else
typedef int cdl_legacy_neon_empty; /* ISO C: no empty translation unit */
#endif
