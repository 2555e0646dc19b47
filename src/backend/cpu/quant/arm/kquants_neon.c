/* NEON dots of q4_K, q5_K and q6_K on plain armv8-a. See kquants-neon-impl.h. */
#if defined(__aarch64__)
#define NEON_SFX neon
#define NEON_DOT16(acc, a, b) \
    vpadalq_s16(vpadalq_s16((acc), vmull_s8(vget_low_s8(a), vget_low_s8(b))), vmull_high_s8((a), (b)))
#include "kquants-neon-impl.h"
#else
typedef int cdl_kquants_neon_empty; /* ISO C: no empty translation unit */
#endif
