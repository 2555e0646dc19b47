/* NEON dots of q4_0, q4_1, q8_0 with the armv8.2-a dot product (SDOT,
 * compiled with +dotprod, called only where AT_HWCAP has ASIMDDP). See
 * legacy-neon-impl.h. */
#if defined(__aarch64__)
#define NEON_SFX dotprod
#define NEON_DOT16(acc, a, b) vdotq_s32((acc), (a), (b))
#include "legacy-neon-impl.h"
#else
typedef int cdl_legacy_dotprod_empty;
#endif
