/* Reference kernels: arange, fill, rand.
 *
 * Random numbers are counter-based, so element i's value depends only on
 * (seed, i), not on the shape's split into threads or on earlier draws:
 *
 *   key     = mix(seed)
 *   word(k) = mix(key + k * 0x9E3779B97F4A7C15)      (splitmix64's k-th output)
 *   element i draws word(2i + 1) and word(2i + 2)
 *
 * where mix is the splitmix64 finaliser (Steele, Lea, Flood 2014). Uniform
 * values use the top 53 bits of word(2i + 1): u = w >> 11 / 2^53 in [0, 1),
 * x = lo + (hi - lo) u, moved one ulp of the output dtype back inside
 * [lo, hi) in the rare case rounding leaves it. Normal values use Box-Muller with
 * u1 = (word(2i + 1) >> 11 + 1) / 2^53 in (0, 1] and u2 from word(2i + 2):
 * z = sqrt(-2 ln u1) cos(2 pi u2); x = mean + std z. The integer part is
 * exact on every platform; normals also depend on the C library's log and
 * cos, which agree to the last double bit on common platforms, well inside
 * f32 rounding. */
#include <math.h>

#include "../cpu-impl.h"

#define GOLDEN UINT64_C(0x9E3779B97F4A7C15)

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double unit53(uint64_t w) { return (double)(w >> 11) * 0x1.0p-53; }

candle_status cpu_ref_arange(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    char *p = tensor_ptr(dst);
    for (int64_t i = 0; i < dst->shape[0]; i++)
        cdl_store_f64(dst->dtype, p + i * dst->stride[0], dst->fparams[0] + (double)i * dst->fparams[1]);
    return CANDLE_OK;
}

candle_status cpu_ref_fill(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    char *p = tensor_ptr(dst);
    int64_t idx[CANDLE_MAX_RANK] = {0};
    do cdl_store_f64(dst->dtype, p + nd_offset(dst->rank, idx, dst->stride), dst->fparams[0]);
    while (nd_next(dst->rank, dst->shape, idx));
    return CANDLE_OK;
}

/* Move the value stored at p (f32, f16 or bf16) one step up or down. */
static void step_ulp(candle_dtype t, void *p, bool up) {
    if (t == CANDLE_DTYPE_F32) {
        *(float *)p = nextafterf(*(float *)p, up ? INFINITY : -INFINITY);
        return;
    }
    uint16_t *h = p;
    bool neg = (*h & 0x8000) != 0;
    if ((*h & 0x7fff) == 0) *h = up ? 0x0001 : 0x8001; /* from +-0: smallest subnormal */
    else if (neg == up) *h = (uint16_t)(*h - 1);
    else *h = (uint16_t)(*h + 1);
}

static double draw(uint64_t key, int64_t i, int dist, double a, double b) {
    uint64_t w1 = mix64(key + (2 * (uint64_t)i + 1) * GOLDEN);
    if (dist == 0) return a + (b - a) * unit53(w1);
    uint64_t w2 = mix64(key + (2 * (uint64_t)i + 2) * GOLDEN);
    double u1 = ((double)(w1 >> 11) + 1.0) * 0x1.0p-53;
    return a + b * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * unit53(w2));
}

candle_status cpu_ref_rand(const cpu_task *task, candle_tensor *dst) {
    (void)task;
    if (candle_tensor_numel(dst) == 0) return CANDLE_OK;
    uint64_t key = mix64((uint64_t)dst->iparams[0]);
    int dist = (int)dst->iparams[1];
    double a = dst->fparams[0], b = dst->fparams[1];
    char *p = tensor_ptr(dst);
    int64_t idx[CANDLE_MAX_RANK] = {0}, i = 0;
    do {
        char *q = p + nd_offset(dst->rank, idx, dst->stride);
        cdl_store_f64(dst->dtype, q, draw(key, i++, dist, a, b));
        /* Rounding to the dtype may leave [a, b); bounds that are not
         * representable are rounded inwards. */
        if (dist == 0 && cdl_load_f64(dst->dtype, q) >= b) step_ulp(dst->dtype, q, false);
        if (dist == 0 && cdl_load_f64(dst->dtype, q) < a) step_ulp(dst->dtype, q, true);
    } while (nd_next(dst->rank, dst->shape, idx));
    return CANDLE_OK;
}
