/* NEON dots of q4_K, q5_K and q6_K with the armv8.2-a dot product (+dotprod,
 * called only where AT_HWCAP has ASIMDDP). See kquants-neon-impl.h. */
#if defined(__aarch64__)
#define NEON_SFX dotprod
#define NEON_DOT16(acc, a, b) vdotq_s32((acc), (a), (b))
#include "kquants-neon-impl.h"
#else
typedef int cdl_kquants_dotprod_empty;
#endif
