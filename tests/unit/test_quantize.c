/* candle_quantize_file: a synthetic two-layer llama-like f32 file quantized
 * to every file type (mixture and --pure), reopened and checked tensor by
 * tensor (dtype chosen, dequantized values against the originals, copies
 * bit-exact), metadata copied and general.file_type set; the mixture rules
 * on a 32-layer model through the internal rule function; f16/bf16 inputs;
 * requantizing refused or allowed; the input never overwritten (same path,
 * hard link, symlink); failed or cancelled writes leave
 * no file; unknown type names; threads give byte-identical output. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/quantize-impl.h"
#include "test.h"

/* Rows are as long as in a model with dim = n_ff = 256 (a multiple of every
 * block size), but each matrix has only a few of them, so that ~50 runs take
 * a few seconds under AddressSanitizer. */
#define DIM 256
#define FF 256
#define ROWS 32   /* of q, o, gate, up, down */
#define KV_ROWS 16 /* of k, v */
#define VOCAB 32
#define N_LAYER 2

typedef struct syn_tensor {
    char name[64];
    int rank;
    int64_t shape[2];
    float *data;
    int64_t n;
} syn_tensor;

static syn_tensor syn[64];
static int n_syn;
static char dir[256];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* roughly normal: sum of uniforms */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        s += (float)((rng >> 40) & 0xffffff) / 16777216.0f - 0.5f;
    }
    return s;
}

static void add_syn(const char *name, int rank, int64_t d0, int64_t d1) {
    syn_tensor *t = &syn[n_syn++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rank = rank;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->n = rank == 1 ? d0 : d0 * d1;
    t->data = malloc((size_t)t->n * sizeof(float));
    for (int64_t i = 0; i < t->n; i++) t->data[i] = rank == 1 ? 1.0f + 0.1f * frand() : frand();
}

static void make_model(void) {
    add_syn("token_embd.weight", 2, VOCAB, DIM);
    add_syn("output_norm.weight", 1, DIM, 0);
    add_syn("output.weight", 2, VOCAB, DIM);
    for (int l = 0; l < N_LAYER; l++) {
        char n[64];
#define L(suffix, rank, a, b) (snprintf(n, sizeof n, "blk.%d." suffix, l), add_syn(n, rank, a, b))
        L("attn_norm.weight", 1, DIM, 0);
        L("attn_q.weight", 2, ROWS, DIM);
        L("attn_q.bias", 1, DIM, 0);
        L("attn_k.weight", 2, KV_ROWS, DIM);
        L("attn_v.weight", 2, KV_ROWS, DIM);
        L("attn_output.weight", 2, ROWS, DIM);
        L("ffn_norm.weight", 1, DIM, 0);
        L("ffn_gate.weight", 2, ROWS, DIM);
        L("ffn_up.weight", 2, ROWS, DIM);
        L("ffn_down.weight", 2, ROWS, FF);
#undef L
    }
}

static const char *path_in(const char *name, char *buf) {
    snprintf(buf, 512, "%s/%s", dir, name);
    return buf;
}

static bool exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

/* Whether a writer's temporary (".NAME.XXXXXX", core/file_out.c) is left in
 * the test directory. */
static bool temps_left(void) {
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) found = true;
    if (d) closedir(d);
    return found;
}

/* The synthetic model stored as dtype (f32, f16 or bf16 weights; 1-D f32). */
static candle_status write_model(const char *path, candle_dtype dt) {
    candle_gguf_writer *w = NULL;
    candle_status s = candle_gguf_writer_init(&w);
    static const char *const toks[3] = {"<unk>", "<s>", "hello"};
    if (!s) s = candle_gguf_writer_set_str(w, "general.architecture", "llama");
    if (!s) s = candle_gguf_writer_set_str(w, "general.name", "synthetic");
    if (!s) s = candle_gguf_writer_set_u32(w, "llama.block_count", N_LAYER);
    if (!s) s = candle_gguf_writer_set_u32(w, "llama.embedding_length", DIM);
    if (!s) s = candle_gguf_writer_set_u32(w, "llama.attention.head_count", 8);
    if (!s) s = candle_gguf_writer_set_u32(w, "llama.attention.head_count_kv", 2);
    if (!s) s = candle_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f);
    if (!s) s = candle_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", CANDLE_GGUF_STRING, toks, 3);
    void *bufs[64] = {0};
    for (int i = 0; i < n_syn && !s; i++) {
        syn_tensor *t = &syn[i];
        candle_dtype tdt = t->rank == 1 ? CANDLE_DTYPE_F32 : dt;
        const void *data = t->data;
        if (tdt != CANDLE_DTYPE_F32) {
            bufs[i] = malloc(candle_dtype_row_size(tdt, t->n));
            candle_dtype_info(tdt)->from_f32(t->data, bufs[i], t->n);
            data = bufs[i];
        }
        s = candle_gguf_writer_add_tensor(w, t->name, tdt, t->rank, t->shape, data);
    }
    if (!s) s = candle_gguf_writer_write(w, path);
    candle_gguf_writer_free(w);
    for (int i = 0; i < n_syn; i++) free(bufs[i]);
    return s;
}

/* ---- expected dtypes of the two-layer model (n_gqa 4) per file type ---- */

enum { E_EMBD, E_OUT, E_Q, E_K, E_V0, E_V1, E_O, E_GATE, E_UP, E_DOWN0, E_DOWN1, E_N };

#define F32 CANDLE_DTYPE_F32
#define F16 CANDLE_DTYPE_F16
#define BF16 CANDLE_DTYPE_BF16
#define Q40 CANDLE_DTYPE_Q4_0
#define Q41 CANDLE_DTYPE_Q4_1
#define Q50 CANDLE_DTYPE_Q5_0
#define Q51 CANDLE_DTYPE_Q5_1
#define Q80 CANDLE_DTYPE_Q8_0
#define Q2K CANDLE_DTYPE_Q2_K
#define Q3K CANDLE_DTYPE_Q3_K
#define Q4K CANDLE_DTYPE_Q4_K
#define Q5K CANDLE_DTYPE_Q5_K
#define Q6K CANDLE_DTYPE_Q6_K
#define NL CANDLE_DTYPE_IQ4_NL
#define XS CANDLE_DTYPE_IQ4_XS

typedef struct mix_case {
    const char *name;
    candle_ftype ft;
    candle_dtype want[E_N]; /* embd out q k v0 v1 o gate up down0 down1 */
} mix_case;

/* more_bits(0, 2) is false and more_bits(1, 2) true, so the _M mixes lift
 * layer 1 only; n_gqa = 4 lifts attn_v in Q2_K and IQ4_*. */
static const mix_case mixes[] = {
    {"F32", CANDLE_FTYPE_ALL_F32, {F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32}},
    {"F16", CANDLE_FTYPE_MOSTLY_F16, {F16, F16, F16, F16, F16, F16, F16, F16, F16, F16, F16}},
    {"BF16", CANDLE_FTYPE_MOSTLY_BF16, {BF16, BF16, BF16, BF16, BF16, BF16, BF16, BF16, BF16, BF16, BF16}},
    {"Q4_0", CANDLE_FTYPE_MOSTLY_Q4_0, {Q40, Q6K, Q40, Q40, Q40, Q40, Q40, Q40, Q40, Q40, Q40}},
    {"Q4_1", CANDLE_FTYPE_MOSTLY_Q4_1, {Q41, Q6K, Q41, Q41, Q41, Q41, Q41, Q41, Q41, Q41, Q41}},
    {"Q5_0", CANDLE_FTYPE_MOSTLY_Q5_0, {Q50, Q6K, Q50, Q50, Q50, Q50, Q50, Q50, Q50, Q50, Q50}},
    {"Q5_1", CANDLE_FTYPE_MOSTLY_Q5_1, {Q51, Q6K, Q51, Q51, Q51, Q51, Q51, Q51, Q51, Q51, Q51}},
    {"Q8_0", CANDLE_FTYPE_MOSTLY_Q8_0, {Q80, Q80, Q80, Q80, Q80, Q80, Q80, Q80, Q80, Q80, Q80}},
    {"Q2_K", CANDLE_FTYPE_MOSTLY_Q2_K, {Q2K, Q6K, Q2K, Q2K, Q4K, Q4K, Q3K, Q2K, Q2K, Q3K, Q3K}},
    {"Q3_K_S", CANDLE_FTYPE_MOSTLY_Q3_K_S, {Q3K, Q6K, Q3K, Q3K, Q3K, Q3K, Q3K, Q3K, Q3K, Q3K, Q3K}},
    {"Q3_K_M", CANDLE_FTYPE_MOSTLY_Q3_K_M, {Q3K, Q6K, Q3K, Q3K, Q5K, Q5K, Q4K, Q3K, Q3K, Q4K, Q4K}},
    {"Q3_K_L", CANDLE_FTYPE_MOSTLY_Q3_K_L, {Q3K, Q6K, Q3K, Q3K, Q5K, Q5K, Q5K, Q3K, Q3K, Q5K, Q5K}},
    {"Q4_K_S", CANDLE_FTYPE_MOSTLY_Q4_K_S, {Q4K, Q6K, Q4K, Q4K, Q5K, Q5K, Q4K, Q4K, Q4K, Q4K, Q4K}},
    {"Q4_K_M", CANDLE_FTYPE_MOSTLY_Q4_K_M, {Q4K, Q6K, Q4K, Q4K, Q4K, Q6K, Q4K, Q4K, Q4K, Q4K, Q6K}},
    {"Q5_K_S", CANDLE_FTYPE_MOSTLY_Q5_K_S, {Q5K, Q6K, Q5K, Q5K, Q5K, Q5K, Q5K, Q5K, Q5K, Q5K, Q5K}},
    {"Q5_K_M", CANDLE_FTYPE_MOSTLY_Q5_K_M, {Q5K, Q6K, Q5K, Q5K, Q5K, Q6K, Q5K, Q5K, Q5K, Q5K, Q6K}},
    {"Q6_K", CANDLE_FTYPE_MOSTLY_Q6_K, {Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K, Q6K}},
    {"IQ4_NL", CANDLE_FTYPE_MOSTLY_IQ4_NL, {NL, Q6K, NL, NL, Q5K, Q5K, NL, NL, NL, NL, NL}},
    {"IQ4_XS", CANDLE_FTYPE_MOSTLY_IQ4_XS, {XS, Q6K, XS, XS, Q5K, Q5K, XS, XS, XS, XS, XS}},
};

static const mix_case *find_mix(candle_ftype ft) {
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
        if (mixes[i].ft == ft) return &mixes[i];
    return NULL;
}

static int role_of(const char *name) {
    if (!strcmp(name, "token_embd.weight")) return E_EMBD;
    if (!strcmp(name, "output.weight")) return E_OUT;
    int l = name[4] - '0';
    if (strstr(name, "attn_q.weight")) return E_Q;
    if (strstr(name, "attn_k.weight")) return E_K;
    if (strstr(name, "attn_v.weight")) return l ? E_V1 : E_V0;
    if (strstr(name, "attn_output.weight")) return E_O;
    if (strstr(name, "ffn_gate.weight")) return E_GATE;
    if (strstr(name, "ffn_up.weight")) return E_UP;
    if (strstr(name, "ffn_down.weight")) return l ? E_DOWN1 : E_DOWN0;
    return -1; /* 1-D: stays f32 */
}

/* NMSE bound of a round trip through dtype, for roughly normal data (a few
 * times what the formats give; a wrong layout gives ~1 or more). */
static double nmse_bound(candle_dtype t) {
    switch (t) {
    case CANDLE_DTYPE_F32: return 0;
    case CANDLE_DTYPE_F16: return 2e-7;
    case CANDLE_DTYPE_BF16: return 1e-5;
    case CANDLE_DTYPE_Q8_0: return 1e-4;
    case CANDLE_DTYPE_Q6_K: return 6e-4;
    case CANDLE_DTYPE_Q5_0: case CANDLE_DTYPE_Q5_1: case CANDLE_DTYPE_Q5_K: return 4e-3;
    case CANDLE_DTYPE_Q4_0: case CANDLE_DTYPE_Q4_1: case CANDLE_DTYPE_Q4_K:
    case CANDLE_DTYPE_IQ4_NL: case CANDLE_DTYPE_IQ4_XS: return 1.5e-2;
    case CANDLE_DTYPE_Q3_K: return 6e-2;
    case CANDLE_DTYPE_Q2_K: return 2e-1;
    default: return 0;
    }
}

static const syn_tensor *find_syn(const char *name) {
    for (int i = 0; i < n_syn; i++)
        if (!strcmp(syn[i].name, name)) return &syn[i];
    return NULL;
}

/* The values of tensor t of an open file, as f32. */
static float *read_f32(const candle_gguf *g, const candle_gguf_tensor_info *t, int64_t n) {
    const uint8_t *p = (const uint8_t *)candle_gguf_storage(g)->data + t->offset;
    float *out = malloc((size_t)n * sizeof *out);
    int64_t ne0 = t->shape[t->rank - 1];
    size_t row = candle_dtype_row_size(t->dtype, ne0);
    for (int64_t r = 0; r < n / ne0; r++)
        candle_dtype_info(t->dtype)->to_f32(p + (size_t)r * row, out + r * ne0, ne0);
    return out;
}

static double nmse_vs(const float *got, const float *want, int64_t n) {
    double *ref = malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++) ref[i] = want[i];
    double e = test_nmse(got, ref, n);
    free(ref);
    return e;
}

/* Reopen out and check each tensor's dtype (want: per role; base_in is the
 * input's weight dtype, whose rounding the values carry), values, metadata. */
static void check_output(const char *out, const mix_case *mc, bool pure, candle_dtype base_in) {
    candle_gguf *g = NULL;
    candle_status s = candle_gguf_open(&g, out, NULL);
    CHECK_MSG(s == CANDLE_OK, "%s: %s", mc->name, candle_last_errmsg());
    if (s) return;
    CHECK(candle_gguf_n_tensors(g) == n_syn);
    uint32_t ft = 999, qv = 0, nl = 0;
    CHECK(candle_gguf_get_u32(g, "general.file_type", &ft) && ft == (uint32_t)mc->ft);
    CHECK(candle_gguf_get_u32(g, "llama.block_count", &nl) && nl == N_LAYER);
    const char *str;
    size_t len;
    CHECK(candle_gguf_get_str(g, "general.name", &str, &len) && len == 9 && !memcmp(str, "synthetic", 9));
    CHECK(candle_gguf_arr_str(g, "tokenizer.ggml.tokens", 2, &str, &len) && len == 5);
    float fb = 0;
    CHECK(candle_gguf_get_f32(g, "llama.rope.freq_base", &fb) && fb == 10000.0f);
    for (int64_t i = 0; i < candle_gguf_n_tensors(g); i++) {
        const candle_gguf_tensor_info *t = candle_gguf_tensor(g, i);
        const syn_tensor *src = find_syn(t->name);
        CHECK_MSG(src != NULL, "%s: unexpected tensor %s", mc->name, t->name);
        if (!src) continue;
        int role = role_of(t->name);
        candle_dtype want = role < 0 ? F32 : pure ? candle_ftype_dtype(mc->ft) : mc->want[role];
        CHECK_MSG(t->dtype == want, "%s%s: %s is %s, want %s", mc->name, pure ? " pure" : "",
                  t->name, candle_dtype_name(t->dtype), candle_dtype_name(want));
        CHECK(t->rank == src->rank && t->shape[0] == src->shape[0]);
        float *got = read_f32(g, t, src->n);
        double e = nmse_vs(got, src->data, src->n);
        double bound = nmse_bound(t->dtype) + (role < 0 ? 0 : nmse_bound(base_in));
        if (getenv("QT_NMSE")) /* to see the margins */
            fprintf(stderr, "nmse %-6s %.3g\n", candle_dtype_name(t->dtype), e);
        CHECK_MSG(e <= bound, "%s: %s (%s) nmse %.3g > %.3g", mc->name, t->name,
                  candle_dtype_name(t->dtype), e, bound);
        if (role < 0) CHECK(!memcmp(got, src->data, (size_t)src->n * sizeof(float)));
        free(got);
    }
    CHECK(candle_gguf_get_u32(g, "general.quantization_version", &qv) && qv == 2);
    candle_gguf_close(g);
}

static void test_every_type(const char *in) {
    char out[512];
    path_in("out.gguf", out);
    bool pure_done[CANDLE_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        for (int pure = 0; pure < 2; pure++) {
            const mix_case *mc = &mixes[i];
            /* pure runs of the mixes of one base are the same: once is enough */
            if (pure && pure_done[candle_ftype_dtype(mc->ft)]) continue;
            if (pure) pure_done[candle_ftype_dtype(mc->ft)] = true;
            candle_quantize_stats st;
            candle_quantize_params p = candle_quantize_default_params();
            p.n_threads = 2;
            p.pure = pure;
            p.stats = &st;
            candle_status s = candle_quantize_file(in, out, mc->ft, &p);
            CHECK_MSG(s == CANDLE_OK, "%s: %s", mc->name, candle_last_errmsg());
            if (s) continue;
            CHECK(st.n_tensors == n_syn && st.n_fallback == 0 && st.n_requantized == 0);
            CHECK(st.bytes_out > 0 && st.file_out > st.bytes_out && st.file_in > st.bytes_in);
            check_output(out, mc, pure, F32);
            char tmp[600];
            snprintf(tmp, sizeof tmp, "%s.tmp", out);
            CHECK(!temps_left());
        }
    }
    remove(out);
}

/* ---- rules on a 32-layer model, through the internal rule function ---- */

static candle_dtype rule(quant_model *m, candle_ftype ft, const char *name, int64_t ne0) {
    candle_weights_tensor_info t = {.name = name, .dtype = CANDLE_DTYPE_F32, .rank = 2,
                                 .shape = {64, ne0}};
    char note[256];
    bool fb;
    candle_quantize_params p = candle_quantize_default_params();
    return quant_tensor_type(m, ft, &p, &t, note, sizeof note, &fb);
}

static bool more_bits_ref(int i, int n) { /* llama.cpp's use_more_bits, spelled out for n = 32 */
    (void)n;
    return i < 4 || i >= 28 || (i >= 4 && (i - 4) % 3 == 2);
}

static void test_rules_32_layers(void) {
    char name[64];
    for (int f = 0; f < 6; f++) {
        static const candle_ftype fts[6] = {CANDLE_FTYPE_MOSTLY_Q4_K_M, CANDLE_FTYPE_MOSTLY_Q5_K_M,
                                            CANDLE_FTYPE_MOSTLY_Q4_K_S, CANDLE_FTYPE_MOSTLY_Q3_K_M,
                                            CANDLE_FTYPE_MOSTLY_IQ4_XS, CANDLE_FTYPE_MOSTLY_Q2_K};
        candle_ftype ft = fts[f];
        candle_dtype base = candle_ftype_dtype(ft);
        quant_model m = {.has_output = true, .n_gqa = 1, .n_layer = 32, .n_attn_v = 32};
        int lifted_v = 0, lifted_down = 0;
        for (int l = 0; l < 32; l++) {
            bool more = more_bits_ref(l, 32);
            snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
            candle_dtype v = rule(&m, ft, name, 4096);
            snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
            candle_dtype d = rule(&m, ft, name, 11008 / 256 * 256);
            candle_dtype wv = base, wd = base;
            switch (ft) {
            case CANDLE_FTYPE_MOSTLY_Q4_K_M:
            case CANDLE_FTYPE_MOSTLY_Q5_K_M:
                wv = wd = more ? Q6K : base;
                break;
            case CANDLE_FTYPE_MOSTLY_Q4_K_S:
                wv = l < 4 ? Q5K : base;
                wd = l < 4 ? Q5K : base;
                break;
            case CANDLE_FTYPE_MOSTLY_Q3_K_M:
                wv = l < 2 ? Q5K : Q4K;
                wd = l < 2 ? Q5K : Q4K;
                break;
            case CANDLE_FTYPE_MOSTLY_IQ4_XS: wd = l < 4 ? Q5K : base; break; /* n_gqa 1: v stays */
            default: /* Q2_K, n_gqa 1 */
                wv = Q3K;
                wd = Q3K;
                break;
            }
            CHECK_MSG(v == wv, "%s layer %d attn_v %s want %s", candle_ftype_name(ft), l,
                      candle_dtype_name(v), candle_dtype_name(wv));
            CHECK_MSG(d == wd, "%s layer %d ffn_down %s want %s", candle_ftype_name(ft), l,
                      candle_dtype_name(d), candle_dtype_name(wd));
            lifted_v += v != base;
            lifted_down += d != base;
        }
        if (ft == CANDLE_FTYPE_MOSTLY_Q4_K_M) CHECK(lifted_v == 16 && lifted_down == 16);
    }
    /* tied embeddings: token_embd takes the output's q6_k */
    quant_model tied = {.has_output = false, .n_gqa = 1, .n_layer = 2, .n_attn_v = 2};
    CHECK(rule(&tied, CANDLE_FTYPE_MOSTLY_Q4_K_M, "token_embd.weight", 512) == Q6K);
    quant_model untied = tied;
    untied.has_output = true;
    CHECK(rule(&untied, CANDLE_FTYPE_MOSTLY_Q4_K_M, "token_embd.weight", 512) == Q4K);
    CHECK(rule(&untied, CANDLE_FTYPE_MOSTLY_Q8_0, "output.weight", 512) == Q80);
    /* falcon's output is q8_0; eight experts put attn_v in q8_0 */
    quant_model falcon = untied;
    falcon.falcon = true;
    CHECK(rule(&falcon, CANDLE_FTYPE_MOSTLY_Q4_K_M, "output.weight", 512) == Q80);
    quant_model moe = untied;
    moe.n_expert = 8;
    CHECK(rule(&moe, CANDLE_FTYPE_MOSTLY_Q4_K_M, "blk.0.attn_v.weight", 512) == Q80);
    CHECK(rule(&moe, CANDLE_FTYPE_MOSTLY_Q4_K_M, "blk.0.attn_output.weight", 512) == Q5K);
    /* fused qkv gets more bits in the _M mixes */
    CHECK(rule(&untied, CANDLE_FTYPE_MOSTLY_Q4_K_M, "blk.0.attn_qkv.weight", 512) == Q5K);
    CHECK(rule(&untied, CANDLE_FTYPE_MOSTLY_Q5_K_M, "blk.0.attn_qkv.weight", 512) == Q6K);
}

/* Rows that do not fit the block: the fallback chain, with a note. */
static void test_fallbacks(void) {
    static const struct { candle_dtype from; int64_t ne0; candle_dtype want; } cases[] = {
        {Q2K, 96, Q40}, {Q3K, 96, Q40}, {XS, 96, NL}, {Q3K, 100, F16}, {Q4K, 96, Q50}, {Q5K, 96, Q51},
        {Q6K, 96, Q80}, {Q4K, 100, F16}, {Q6K, 172, F16}, {Q40, 100, F16}, {Q80, 48, F16},
        {NL, 96, NL},
    };
    static const candle_ftype pure_of[] = {
        [CANDLE_DTYPE_Q2_K] = CANDLE_FTYPE_MOSTLY_Q2_K, [CANDLE_DTYPE_Q3_K] = CANDLE_FTYPE_MOSTLY_Q3_K_S,
        [CANDLE_DTYPE_IQ4_XS] = CANDLE_FTYPE_MOSTLY_IQ4_XS, [CANDLE_DTYPE_Q4_K] = CANDLE_FTYPE_MOSTLY_Q4_K_S,
        [CANDLE_DTYPE_Q5_K] = CANDLE_FTYPE_MOSTLY_Q5_K_S, [CANDLE_DTYPE_Q6_K] = CANDLE_FTYPE_MOSTLY_Q6_K,
        [CANDLE_DTYPE_Q4_0] = CANDLE_FTYPE_MOSTLY_Q4_0, [CANDLE_DTYPE_Q8_0] = CANDLE_FTYPE_MOSTLY_Q8_0,
        [CANDLE_DTYPE_IQ4_NL] = CANDLE_FTYPE_MOSTLY_IQ4_NL,
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        quant_model m = {.has_output = true, .n_gqa = 1, .n_layer = 1, .n_attn_v = 1};
        candle_weights_tensor_info t = {.name = "blk.0.attn_q.weight", .dtype = F32, .rank = 2,
                                     .shape = {8, cases[i].ne0}};
        char note[256];
        bool fb;
        candle_quantize_params p = candle_quantize_default_params();
        p.pure = true;
        candle_dtype got = quant_tensor_type(&m, pure_of[cases[i].from], &p, &t, note, sizeof note, &fb);
        CHECK_MSG(got == cases[i].want, "%s rows %" PRId64 ": %s want %s",
                  candle_dtype_name(cases[i].from), cases[i].ne0, candle_dtype_name(got),
                  candle_dtype_name(cases[i].want));
        bool expect_fb = cases[i].want != cases[i].from;
        CHECK(fb == expect_fb);
        if (expect_fb) {
            CHECK_CONTAINS(note, "blk.0.attn_q.weight: rows of");
            CHECK_CONTAINS(note, candle_dtype_name(cases[i].want));
        } else {
            CHECK(note[0] == 0);
        }
    }
    /* 1-D, integer and norm-like tensors are not weights */
    candle_weights_tensor_info t1 = {.name = "blk.0.attn_norm.weight", .dtype = F32, .rank = 2,
                                  .shape = {256, 256}};
    CHECK(!quant_is_weight(&t1));
    candle_weights_tensor_info t2 = {.name = "x.weight", .dtype = F32, .rank = 2, .shape = {1, 256}};
    CHECK(!quant_is_weight(&t2));
    candle_weights_tensor_info t3 = {.name = "x.weight", .dtype = CANDLE_DTYPE_I32, .rank = 2,
                                  .shape = {4, 256}};
    CHECK(!quant_is_weight(&t3));
    candle_weights_tensor_info t4 = {.name = "blk.0.ffn_down_exps.weight", .dtype = F16, .rank = 3,
                                  .shape = {8, 256, 256}};
    CHECK(quant_is_weight(&t4));
}

/* f16 and bf16 inputs; a file whose rows do not fit counts fallbacks. */
static void test_half_inputs(void) {
    char in[512], out[512];
    path_in("half.gguf", in);
    path_in("half_out.gguf", out);
    static const candle_dtype halves[2] = {F16, BF16};
    for (int h = 0; h < 2; h++) {
        CHECK_OK(NULL, write_model(in, halves[h]));
        for (int k = 0; k < 2; k++) {
            const mix_case *mc = find_mix(k ? CANDLE_FTYPE_MOSTLY_Q4_K_M : CANDLE_FTYPE_MOSTLY_Q8_0);
            candle_status s = candle_quantize_file(in, out, mc->ft, NULL);
            CHECK_MSG(s == CANDLE_OK, "%s", candle_last_errmsg());
            if (!s) check_output(out, mc, false, halves[h]);
        }
        /* to its own dtype: weights copied byte for byte */
        candle_quantize_stats st;
        candle_quantize_params p = candle_quantize_default_params();
        p.stats = &st;
        CHECK_OK(NULL, candle_quantize_file(
                           in, out, h ? CANDLE_FTYPE_MOSTLY_BF16 : CANDLE_FTYPE_MOSTLY_F16, &p));
        CHECK(st.n_converted == 0 && st.n_copied == n_syn && st.bytes_in == st.bytes_out);
    }
    remove(in);
    remove(out);
}

/* ---- llama-quantize's --output-tensor-type / --token-embedding-type ---- */

static candle_dtype type_in(const char *path, const char *name) {
    candle_gguf *g = NULL;
    if (candle_gguf_open(&g, path, NULL)) return CANDLE_DTYPE_COUNT;
    int64_t i = candle_gguf_find_tensor(g, name);
    candle_dtype dt = i >= 0 ? candle_gguf_tensor(g, i)->dtype : CANDLE_DTYPE_COUNT;
    candle_gguf_close(g);
    return dt;
}

static void test_type_overrides(const char *in) {
    char out[512];
    path_in("over.gguf", out);
    candle_quantize_params p = candle_quantize_default_params();
    CHECK(p.output_type == CANDLE_DTYPE_COUNT && p.token_embd_type == CANDLE_DTYPE_COUNT);
    /* the rules alone: Q4_K_M's output is q6_K, its token embedding q4_K */
    CHECK_OK(NULL, candle_quantize_file(in, out, CANDLE_FTYPE_MOSTLY_Q4_K_M, &p));
    CHECK(type_in(out, "output.weight") == Q6K && type_in(out, "token_embd.weight") == Q4K);
    p.output_type = CANDLE_DTYPE_F16;
    p.token_embd_type = CANDLE_DTYPE_Q8_0;
    CHECK_OK(NULL, candle_quantize_file(in, out, CANDLE_FTYPE_MOSTLY_Q4_K_M, &p));
    CHECK(type_in(out, "output.weight") == CANDLE_DTYPE_F16);
    CHECK(type_in(out, "token_embd.weight") == CANDLE_DTYPE_Q8_0);
    CHECK(type_in(out, "blk.0.attn_q.weight") == Q4K);
    /* over --pure as well */
    p.pure = true;
    p.token_embd_type = CANDLE_DTYPE_COUNT;
    CHECK_OK(NULL, candle_quantize_file(in, out, CANDLE_FTYPE_MOSTLY_Q4_0, &p));
    CHECK(type_in(out, "output.weight") == CANDLE_DTYPE_F16);
    CHECK(type_in(out, "token_embd.weight") == CANDLE_DTYPE_Q4_0);
    /* a type that is no weight type is refused, and nothing is written */
    remove(out);
    p.output_type = CANDLE_DTYPE_I32;
    CHECK(candle_quantize_file(in, out, CANDLE_FTYPE_MOSTLY_Q4_0, &p) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "output tensor type");
    CHECK(!exists(out));
    /* a tied model (no output.weight): the output type goes to token_embd */
    quant_model m = {.has_output = false, .n_gqa = 1, .n_layer = 1, .n_attn_v = 1};
    candle_weights_tensor_info t = {.name = "token_embd.weight", .dtype = F32, .rank = 2, .shape = {64, 256}};
    char note[256];
    bool fb;
    candle_quantize_params q = candle_quantize_default_params();
    q.output_type = CANDLE_DTYPE_Q8_0;
    CHECK(quant_tensor_type(&m, CANDLE_FTYPE_MOSTLY_Q4_0, &q, &t, note, sizeof note, &fb) == CANDLE_DTYPE_Q8_0);
    q.token_embd_type = CANDLE_DTYPE_F16; /* the embedding's own type wins */
    CHECK(quant_tensor_type(&m, CANDLE_FTYPE_MOSTLY_Q4_0, &q, &t, note, sizeof note, &fb) == CANDLE_DTYPE_F16);
    remove(out);
}

/* ---- requantizing ---- */

static void test_requantize(const char *in) {
    char q8[512], out[512];
    path_in("q8.gguf", q8);
    path_in("re.gguf", out);
    CHECK_OK(NULL, candle_quantize_file(in, q8, CANDLE_FTYPE_MOSTLY_Q8_0, NULL));
    candle_status s = candle_quantize_file(q8, out, CANDLE_FTYPE_MOSTLY_Q4_K_M, NULL);
    CHECK(s == CANDLE_ERR_UNSUPPORTED);
    CHECK_CONTAINS(candle_last_errmsg(), "is already q8_0");
    CHECK_CONTAINS(candle_last_errmsg(), "--allow-requantize");
    CHECK(!exists(out));
    /* same file type again: nothing to requantize, all copied */
    candle_quantize_stats st;
    candle_quantize_params p = candle_quantize_default_params();
    p.stats = &st;
    CHECK_OK(NULL, candle_quantize_file(q8, out, CANDLE_FTYPE_MOSTLY_Q8_0, &p));
    CHECK(st.n_converted == 0 && st.n_requantized == 0);
    p.allow_requantize = true;
    CHECK_OK(NULL, candle_quantize_file(q8, out, CANDLE_FTYPE_MOSTLY_Q4_K_M, &p));
    /* every weight matrix changes type (output.weight to q6_k too) */
    CHECK(st.n_requantized == N_LAYER * 7 + 2);
    candle_gguf *g = NULL;
    if (!candle_gguf_open(&g, out, NULL)) {
        int64_t i = candle_gguf_find_tensor(g, "blk.1.ffn_down.weight");
        CHECK(i >= 0 && candle_gguf_tensor(g, i)->dtype == Q6K);
        i = candle_gguf_find_tensor(g, "blk.0.attn_q.weight");
        CHECK(i >= 0 && candle_gguf_tensor(g, i)->dtype == Q4K);
        const candle_gguf_tensor_info *t = candle_gguf_tensor(g, i);
        float *got = read_f32(g, t, ROWS * DIM);
        CHECK(nmse_vs(got, find_syn(t->name)->data, ROWS * DIM) < nmse_bound(Q4K) + nmse_bound(Q80));
        free(got);
        candle_gguf_close(g);
    }
    remove(q8);
    remove(out);
}

/* ---- never overwrite the input; failures leave no file ---- */

static uint64_t file_sum(const char *p) {
    FILE *f = fopen(p, "rb");
    uint64_t h = 1469598103934665603ull;
    int c;
    if (!f) return 0;
    while ((c = fgetc(f)) != EOF) h = (h ^ (uint64_t)c) * 1099511628211ull;
    fclose(f);
    return h;
}

static void test_refuse_overwrite(const char *in) {
    uint64_t before = file_sum(in);
    char hl[512], sl[512];
    path_in("hardlink.gguf", hl);
    path_in("symlink.gguf", sl);
    CHECK(link(in, hl) == 0);
    CHECK(symlink(in, sl) == 0);
    const char *outs[3] = {in, hl, sl};
    for (int i = 0; i < 3; i++) {
        candle_status s = candle_quantize_file(in, outs[i], CANDLE_FTYPE_MOSTLY_Q4_0, NULL);
        CHECK(s == CANDLE_ERR_INVALID_ARG);
        CHECK_CONTAINS(candle_last_errmsg(), "refusing to overwrite the input");
    }
    CHECK(file_sum(in) == before);
    remove(hl);
    remove(sl);
}

typedef struct prog_log {
    int n_calls, n_notes, n_writing;
    uint64_t last, total;
    bool monotone;
    int cancel_at; /* cancel on this call (-1: never; -2: at the writing event) */
} prog_log;

static bool log_progress(const candle_quantize_progress *p, void *user) {
    prog_log *l = user;
    l->n_calls++;
    if (p->note) l->n_notes++;
    if (p->writing) l->n_writing++;
    if (p->bytes_done < l->last || p->bytes_done > p->bytes_total) l->monotone = false;
    l->last = p->bytes_done;
    l->total = p->bytes_total;
    if (l->cancel_at == -2 && p->writing) return false;
    return l->cancel_at < 0 || l->n_calls < l->cancel_at;
}

static void test_failures_leave_nothing(const char *in) {
    char out[600], tmp[700], sub[512];
    /* a missing directory */
    path_in("no/such/dir/out.gguf", out);
    prog_log early = {.monotone = true, .cancel_at = -1};
    candle_quantize_params pe = candle_quantize_default_params();
    pe.progress = log_progress;
    pe.progress_user = &early;
    CHECK(candle_quantize_file(in, out, CANDLE_FTYPE_MOSTLY_Q8_0, &pe) == CANDLE_ERR_IO);
    CHECK_CONTAINS(candle_last_errmsg(), "cannot write");
    CHECK(early.n_calls == 0); /* refused before converting anything */
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    CHECK(!exists(out) && !temps_left());
    /* an existing directory as the output: refused before any work, as any
     * output that is not a regular file (the rename would replace it) */
    path_in("adir", out);
    CHECK(mkdir(out, 0755) == 0);
    CHECK(candle_quantize_file(in, out, CANDLE_FTYPE_MOSTLY_Q8_0, NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "not a regular file");
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    CHECK(!temps_left());
    rmdir(out);
    /* an unwritable directory (root writes anyway: only checked for others) */
    path_in("ro", sub);
    CHECK(mkdir(sub, 0555) == 0);
    snprintf(out, sizeof out, "%s/out.gguf", sub);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    if (geteuid() != 0) {
        CHECK(candle_quantize_file(in, out, CANDLE_FTYPE_MOSTLY_Q8_0, NULL) == CANDLE_ERR_IO);
        CHECK(!exists(out) && !temps_left());
    }
    rmdir(sub);
    /* cancelled by the progress callback, while converting and at writing */
    path_in("cancel.gguf", out);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    for (int c = 0; c < 2; c++) {
        prog_log l = {.monotone = true, .cancel_at = c ? -2 : 3};
        candle_quantize_params p = candle_quantize_default_params();
        p.progress = log_progress;
        p.progress_user = &l;
        CHECK(candle_quantize_file(in, out, CANDLE_FTYPE_MOSTLY_Q4_K_M, &p) == CANDLE_ERR_IO);
        CHECK_CONTAINS(candle_last_errmsg(), "cancelled");
        CHECK(!exists(out) && !temps_left());
    }
    /* a missing input */
    path_in("missing.gguf", tmp);
    CHECK(candle_quantize_file(tmp, out, CANDLE_FTYPE_MOSTLY_Q8_0, NULL) == CANDLE_ERR_IO);
    CHECK(!exists(out));
}

static void test_progress_and_threads(const char *in) {
    char o1[512], o3[512];
    path_in("t1.gguf", o1);
    path_in("t3.gguf", o3);
    prog_log l = {.monotone = true, .cancel_at = -1};
    candle_quantize_params p = candle_quantize_default_params();
    p.progress = log_progress;
    p.progress_user = &l;
    p.n_threads = 1;
    CHECK_OK(NULL, candle_quantize_file(in, o1, CANDLE_FTYPE_MOSTLY_Q4_K_M, &p));
    CHECK(l.monotone && l.last == l.total && l.total > 0 && l.n_writing == 1 && l.n_notes == 0);
    CHECK(l.n_calls > n_syn / 2);
    p.progress = NULL;
    p.n_threads = 3;
    CHECK_OK(NULL, candle_quantize_file(in, o3, CANDLE_FTYPE_MOSTLY_Q4_K_M, &p));
    CHECK(file_sum(o1) == file_sum(o3) && file_sum(o1) != 0);
    remove(o1);
    remove(o3);
}

static void test_names(void) {
    candle_ftype ft;
    CHECK_OK(NULL, candle_ftype_from_name("q4_k_m", &ft));
    CHECK(ft == CANDLE_FTYPE_MOSTLY_Q4_K_M && ft == 15);
    CHECK_OK(NULL, candle_ftype_from_name("Q4_K", &ft));
    CHECK(ft == CANDLE_FTYPE_MOSTLY_Q4_K_M);
    CHECK_OK(NULL, candle_ftype_from_name("iq4_xs", &ft));
    CHECK(ft == 30);
    CHECK_OK(NULL, candle_ftype_from_name("BF16", &ft));
    CHECK(ft == 32);
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        CHECK(candle_ftype_from_name(mixes[i].name, &ft) == CANDLE_OK && ft == mixes[i].ft);
        CHECK(!strcmp(candle_ftype_name(ft), mixes[i].name));
    }
    CHECK(candle_ftype_from_name("q9_9", &ft) == CANDLE_ERR_INVALID_ARG);
    const char *msg = candle_last_errmsg();
    CHECK_CONTAINS(msg, "unknown type 'q9_9'");
    CHECK_CONTAINS(msg, "Q4_K_M");
    CHECK_CONTAINS(msg, "IQ4_XS");
    CHECK_CONTAINS(msg, "Q8_0");
    CHECK(candle_ftype_from_name("q8_k", &ft) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_ftype_name((candle_ftype)4) == NULL);
    CHECK(candle_ftype_dtype((candle_ftype)4) == CANDLE_DTYPE_COUNT);
    CHECK(candle_quantize_file("a", "b", (candle_ftype)4, NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "not a file type");
    CHECK(candle_quantize_file(NULL, "b", CANDLE_FTYPE_MOSTLY_Q8_0, NULL) == CANDLE_ERR_INVALID_ARG);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/candle_quantize_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    make_model();
    char in[512];
    path_in("model.gguf", in);
    CHECK_OK(NULL, write_model(in, F32));
    test_names();
    test_rules_32_layers();
    test_fallbacks();
    test_every_type(in);
    test_half_inputs();
    test_type_overrides(in);
    test_requantize(in);
    test_progress_and_threads(in);
    test_failures_leave_nothing(in);
    test_refuse_overwrite(in);
    remove(in);
    rmdir(dir);
    for (int i = 0; i < n_syn; i++) free(syn[i].data);
    return test_done("test_quantize");
}
