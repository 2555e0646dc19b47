/* Dtype traits table and the scalar f16/bf16 conversions: exhaustive over
 * all 65536 half values, and against a double-precision round-to-nearest-even
 * reference for random and boundary floats. */
#include <stdint.h>

#include "test.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_traits(void) {
    static const struct {
        candle_dtype t;
        const char *name;
        int64_t block;
        size_t size;
        int gguf;
    } want[] = {
        {CANDLE_DTYPE_F32, "f32", 1, 4, 0},        {CANDLE_DTYPE_F16, "f16", 1, 2, 1},
        {CANDLE_DTYPE_BF16, "bf16", 1, 2, 30},     {CANDLE_DTYPE_I8, "i8", 1, 1, 24},
        {CANDLE_DTYPE_I32, "i32", 1, 4, 26},       {CANDLE_DTYPE_I64, "i64", 1, 8, 27},
        {CANDLE_DTYPE_U8, "u8", 1, 1, -1},         {CANDLE_DTYPE_BOOL, "bool", 1, 1, -1},
        {CANDLE_DTYPE_Q4_0, "q4_0", 32, 18, 2},    {CANDLE_DTYPE_Q4_1, "q4_1", 32, 20, 3},
        {CANDLE_DTYPE_Q5_0, "q5_0", 32, 22, 6},    {CANDLE_DTYPE_Q5_1, "q5_1", 32, 24, 7},
        {CANDLE_DTYPE_Q8_0, "q8_0", 32, 34, 8},    {CANDLE_DTYPE_Q8_1, "q8_1", 32, 36, 9},
        {CANDLE_DTYPE_Q2_K, "q2_k", 256, 84, 10},  {CANDLE_DTYPE_Q3_K, "q3_k", 256, 110, 11},
        {CANDLE_DTYPE_Q4_K, "q4_k", 256, 144, 12}, {CANDLE_DTYPE_Q5_K, "q5_k", 256, 176, 13},
        {CANDLE_DTYPE_Q6_K, "q6_k", 256, 210, 14}, {CANDLE_DTYPE_Q8_K, "q8_k", 256, 292, 15},
        {CANDLE_DTYPE_IQ4_NL, "iq4_nl", 32, 18, 20}, {CANDLE_DTYPE_IQ4_XS, "iq4_xs", 256, 136, 23},
        {CANDLE_DTYPE_Q4_Z128, "q4_z128", 128, 68, -1},
    };
    CHECK(sizeof want / sizeof *want == CANDLE_DTYPE_COUNT);
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const candle_dtype_traits *tr = candle_dtype_info(want[i].t);
        CHECK(tr != NULL);
        if (!tr) continue;
        CHECK_MSG(strcmp(tr->name, want[i].name) == 0, "%s", tr->name);
        CHECK(strcmp(candle_dtype_name(want[i].t), want[i].name) == 0);
        CHECK_MSG(tr->block_size == want[i].block && tr->type_size == want[i].size, "%s", tr->name);
        CHECK_MSG(tr->gguf_id == want[i].gguf, "%s", tr->name);
        CHECK(tr->is_quantized == (want[i].block > 1));
        CHECK(tr->is_float == (want[i].t <= CANDLE_DTYPE_BF16));
        CHECK(tr->is_int == (want[i].t >= CANDLE_DTYPE_I8 && want[i].t <= CANDLE_DTYPE_BOOL));
        CHECK(candle_dtype_from_name(want[i].name) == want[i].t);
        if (want[i].gguf >= 0) CHECK(candle_dtype_from_gguf(want[i].gguf) == want[i].t);
        CHECK(candle_dtype_row_size(want[i].t, 4 * want[i].block) == 4 * want[i].size);
    }
    /* the float types convert rows */
    CHECK(candle_dtype_info(CANDLE_DTYPE_F16)->to_f32 && candle_dtype_info(CANDLE_DTYPE_BF16)->from_f32);
    CHECK(candle_dtype_from_name("BF16") == CANDLE_DTYPE_BF16);
    CHECK(candle_dtype_from_name("f8") == CANDLE_DTYPE_COUNT);
    CHECK(candle_dtype_from_name("") == CANDLE_DTYPE_COUNT);
    CHECK(candle_dtype_from_name(NULL) == CANDLE_DTYPE_COUNT);
    CHECK(candle_dtype_from_gguf(-1) == CANDLE_DTYPE_COUNT);
    CHECK(candle_dtype_from_gguf(4) == CANDLE_DTYPE_COUNT); /* removed Q4_2 */
    CHECK(candle_dtype_from_gguf(1000) == CANDLE_DTYPE_COUNT);
    CHECK(candle_dtype_info(CANDLE_DTYPE_COUNT) == NULL);
    CHECK(candle_dtype_info((candle_dtype)-1) == NULL);
    CHECK(strcmp(candle_dtype_name(CANDLE_DTYPE_COUNT), "invalid") == 0);
    CHECK(candle_dtype_row_size(CANDLE_DTYPE_COUNT, 4) == 0);
}

/* The value of a half in double, decoded from its fields. */
static double f16_value(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, -24);
    else v = ldexp(1024 + m, e - 25);
    return sign ? -v : v;
}

static void test_half_exhaustive(void) {
    int bad_f16 = 0, bad_bf16 = 0, bad_val = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = candle_f16_to_f32(h);
        double ref = f16_value(h);
        if (isnan(ref)) {
            uint16_t back = candle_f32_to_f16(f);
            /* NaN stays NaN (quiet), sign kept */
            if (!isnan(f) || (back & 0x7c00) != 0x7c00 || !(back & 0x3ff) || (back ^ h) & 0x8000)
                bad_f16++;
        } else {
            if ((double)f != ref || (f32_bits(f) >> 31) != (i >> 15)) bad_val++;
            if (candle_f32_to_f16(f) != h) bad_f16++;
        }
        float g = candle_bf16_to_f32(h);
        if (f32_bits(g) != i << 16) bad_bf16++;
        uint16_t gb = candle_f32_to_bf16(g);
        if (isnan(g) ? !((gb & 0x7f80) == 0x7f80 && (gb & 0x7f) && !((gb ^ h) & 0x8000)) : gb != h)
            bad_bf16++;
    }
    CHECK_MSG(bad_val == 0, "%d f16 values decode wrongly", bad_val);
    CHECK_MSG(bad_f16 == 0, "%d f16 round trips fail", bad_f16);
    CHECK_MSG(bad_bf16 == 0, "%d bf16 round trips fail", bad_bf16);
}

/* Round x (a float, as double) to a binary format with `mant` fraction bits
 * and minimum normal exponent emin, max finite maxv: RNE in double. */
static double ref_round(double x, int mant, int emin, double maxv) {
    if (isnan(x) || isinf(x) || x == 0) return x;
    double a = fabs(x);
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
    e -= 1;
    if (e < emin) e = emin;
    double ulp = ldexp(1.0, e - mant);
    double r = nearbyint(a / ulp) * ulp; /* default rounding mode: ties to even */
    /* beyond max + half an ulp (ties go to the even inf) */
    double half = ldexp(1.0, (int)floor(log2(maxv)) - mant - 1);
    if (a >= maxv + half) r = INFINITY;
    return x < 0 ? -r : r;
}

static int check_one(float f) {
    int bad = 0;
    double r16 = ref_round(f, 10, -14, 65504.0);
    float h = candle_f16_to_f32(candle_f32_to_f16(f));
    if (isnan(f) ? !isnan(h) : ((double)h != r16 || signbit(h) != signbit(f))) {
        if (bad < 5) fprintf(stderr, "f16(%a) = %a, want %a\n", (double)f, (double)h, r16);
        bad++;
    }
    double rb = ref_round(f, 7, -126, 0x1.fep127);
    float b = candle_bf16_to_f32(candle_f32_to_bf16(f));
    if (isnan(f) ? !isnan(b) : ((double)b != rb || signbit(b) != signbit(f))) {
        if (bad < 5) fprintf(stderr, "bf16(%a) = %a, want %a\n", (double)f, (double)b, rb);
        bad++;
    }
    return bad;
}

static void test_rounding(void) {
    /* ties and boundaries, by hand */
    CHECK(candle_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);           /* tie -> even (down) */
    CHECK(candle_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);       /* tie -> even (up) */
    CHECK(candle_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01); /* above the tie */
    CHECK(candle_f32_to_f16(0x1p-25f) == 0x0000);                  /* subnormal tie -> 0 */
    CHECK(candle_f32_to_f16(3 * 0x1p-25f) == 0x0002);              /* subnormal tie -> even */
    CHECK(candle_f32_to_f16(0x1p-24f) == 0x0001);                  /* smallest subnormal */
    CHECK(candle_f32_to_f16(-0x1p-26f) == 0x8000);                 /* underflow keeps sign */
    CHECK(candle_f32_to_f16(0x1.ffcp-15f) == 0x0400);              /* rounds up to min normal */
    CHECK(candle_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(candle_f32_to_f16(65519.99f) == 0x7bff);
    CHECK(candle_f32_to_f16(65520.0f) == 0x7c00); /* tie with inf -> inf */
    CHECK(candle_f32_to_f16(-1e9f) == 0xfc00);
    CHECK(candle_f32_to_f16(INFINITY) == 0x7c00);
    CHECK((candle_f32_to_f16(NAN) & 0x7fff) > 0x7c00);
    CHECK((candle_f32_to_f16(bits_f32(0x7f800001u)) & 0x7fff) > 0x7c00); /* low payload NaN */
    CHECK(candle_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);
    CHECK(candle_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
    CHECK(candle_f32_to_bf16(bits_f32(0x7f7fffffu)) == 0x7f80); /* FLT_MAX -> inf */
    CHECK(candle_f32_to_bf16(bits_f32(0x00000001u)) == 0x0000); /* tiny subnormal */
    CHECK(candle_f32_to_bf16(bits_f32(0x00008000u)) == 0x0000); /* tie -> even */
    CHECK(candle_f32_to_bf16(bits_f32(0x00018000u)) == 0x0002);
    CHECK((candle_f32_to_bf16(bits_f32(0x7f800001u)) & 0x7fff) > 0x7f80); /* NaN not inf */
    CHECK((candle_f32_to_bf16(bits_f32(0xffc00000u))) == 0xffc0);

    /* random bit patterns (every exponent) and random values near the f16 range */
    uint64_t s = 0x243F6A8885A308D3ull;
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        bad += check_one(bits_f32((uint32_t)s));
        float f = ldexpf((float)((s >> 40) & 0xffffff) / 16777216.0f + 1.0f, (int)((s >> 32) % 50) - 30);
        bad += check_one((s & 1) ? -f : f);
    }
    /* every tie position of f16 within a few binades, both parities */
    for (int m = 0; m < 2048; m++) {
        bad += check_one(ldexpf(2049.0f + 2.0f * (float)m, -12)); /* ties in [0.5, 1) */
        bad += check_one(ldexpf(2.0f * (float)m + 1.0f, -25));   /* subnormal ties */
    }
    CHECK_MSG(bad == 0, "%d conversions differ from the RNE reference", bad);
}

int main(void) {
    test_traits();
    test_half_exhaustive();
    test_rounding();
    return test_done("test_dtype");
}
