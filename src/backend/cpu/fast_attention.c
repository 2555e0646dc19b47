/* Flash attention on the CPU for f32/f16/bf16 q/k/v (the node of
 * candle_attention), blocked.
 *
 * A task takes a block of query rows: up to ATTN_BQ positions of one batch
 * entry, for the query heads that share one kv head (grouped-query heads
 * read kv head h / (Hq / Hkv)), so each key/value tile is read and packed
 * once for all of them (at most ATTN_MAX_ROWS rows: a large group is cut
 * into head chunks, and its blocks hold fewer positions). The rows are
 * ordered position-major (the heads of one position next to each other).
 * It walks the keys in tiles of ATTN_BK, packing each key tile transposed
 * once; then each group of ATTN_MR rows takes the tile from start to end
 * while its q, score and output rows stay in L1: the [MR, tile] scores from
 * a register-blocked product with the key tile (q pre-scaled), masks, the
 * online softmax (each row's running maximum and sum; when the maximum
 * grows the old sum and output are rescaled), and the output update with
 * the value tile, the rescale folded into it. Scores are in log2 units (q
 * and mask scaled by log2(e)), so the softmax takes 2^x, cheaper than exp.
 * Causal rows stop at their absolute position Skv - Sq + i: tiles past a
 * block's last row are never visited (the materialised product computes
 * them all), a row group stops at its last row's position, and only the
 * groups that straddle the diagonal are masked element-wise. Threads claim
 * the blocks one at a time, the costliest (the last positions under a
 * causal mask) first; a short prefill is cut into smaller blocks so every
 * thread gets some, and a step of few positions (decoding, verifying drafted
 * tokens) takes its scores from the key rows and splits its keys into
 * chunks whose softmax states a second phase merges (split_keys). Memory
 * is O(rows * (D + Dv) + tile * (D + Dv)) per thread (and a chunk state of
 * a few rows per ATTN_CHUNK keys of such a step), whatever the sequence
 * length; no [Sq, Skv] score matrix exists.
 * A row that sees no key outputs zeros, as the reference does. f16/bf16
 * inputs are converted a block or tile at a time into f32 scratch; keys
 * and values of a block type (a quantized KV cache: q8_0, q4_0) a tile of
 * rows at a time, by the type's own row conversion. With bf16 products
 * allowed (CDL_ATTN_BF16: models with bf16 weights) and the cpu_simd
 * table's bf16 dot products, packed blocks of f32 q/k/v take the products
 * on bf16 operands instead (bf16_products): q rows, key and value tiles
 * and each group's probabilities are rounded to bf16 and packed as the
 * packed GEMM's bf16 panels, and both products run on its micro-kernel,
 * twice the FMA rate; the softmax stays f32. The
 * tile primitives come from attention_scalar.c, x86/attention_avx2.c,
 * x86/attention_avx512.c or arm/attention_neon.c, chosen with the primitive
 * table (cpu_attn_ops_get; the isa setting: scalar or avx2 caps the choice). */
#include <math.h>
#include <string.h>

#include "attention-impl.h"
#include "fast-impl.h"

#define ATTN_BK 256       /* keys per tile */
#define ATTN_BQ 128       /* query positions per block, at most */
#define ATTN_MAX_ROWS 512 /* positions x heads of one task, at most */
/* Blocks of at most this many rows (decoding: the heads of one kv head)
 * take their scores from the key rows: a transposed copy would cost as much
 * as the products it feeds. */
#define ATTN_ROWS_DIRECT 4
/* Row steps (the verification of drafted tokens) of up to ATTN_DIRECT_POS
 * positions whose kv heads serve at most ATTN_DIRECT_HEADS query heads take
 * the direct scores too, though the packed ones are faster for them: each
 * row's scores, key chunks and merge then depend on its own position
 * alone, never on the step's row count, so every row gets the bits of the
 * one-token step at its position (greedy speculative decoding with up to 16
 * drafted tokens is exact). */
#define ATTN_DIRECT_HEADS 4
#define ATTN_DIRECT_POS 17
/* The chunk states of a multi-position direct step, at most: past this
 * (very long contexts) the step takes the packed scores instead. */
#define ATTN_DIRECT_PARTIAL_MAX ((size_t)64 << 20)
/* Scores are kept in log2 units (q and the mask scaled by log2(e)), so the
 * softmax takes 2^x, cheaper than exp. */
#define ATTN_LOG2E 1.44269504088896341f

static bool is_float(candle_dtype t) {
    return t == CANDLE_DTYPE_F32 || t == CANDLE_DTYPE_F16 || t == CANDLE_DTYPE_BF16;
}

static bool rows_ok(const candle_tensor *t) {
    size_t esz = t ? cpu_dtype(t->dtype)->type_size : 0;
    return t && is_float(t->dtype) && t->rank == 4 && (t->stride[3] == (int64_t)esz || t->shape[3] == 1);
}

/* Keys or values of a block type: rows of whole contiguous blocks. */
static bool block_rows_ok(const candle_tensor *t) {
    const candle_dtype_traits *tr = cpu_dtype(t->dtype);
    return tr->is_quantized && tr->to_f32 && t->rank == 4 && t->shape[3] % tr->block_size == 0 &&
           t->stride[3] == (int64_t)tr->type_size;
}

static bool match_attn(const candle_tensor *dst) {
    if (dst->op != CANDLE_OP_ATTENTION || !is_float(dst->dtype) || !candle_tensor_is_contiguous(dst))
        return false;
    const candle_tensor *mask = dst->n_src > 3 ? dst->src[3] : NULL;
    const candle_tensor *k = dst->src[1], *v = dst->src[2];
    return rows_ok(dst->src[0]) && ((rows_ok(k) && rows_ok(v)) || (block_rows_ok(k) && block_rows_ok(v))) &&
           (!mask || (is_float(mask->dtype) && mask->rank == 4));
}

const cpu_attn_ops *cpu_attn_ops_get(void) {
#if defined(__x86_64__)
    /* every table but the scalar one runs on AVX2 + FMA + F16C hardware;
     * the "avx512" one only where AVX-512 F/BW/VL are (cpu_dispatch.c) */
    const cpu_simd *simd = cpu_simd_get();
    if (simd == &cpu_simd_scalar) return &cpu_attn_scalar;
    return simd->name && !strcmp(simd->name, "avx512") ? &cpu_attn_avx512 : &cpu_attn_avx2;
#elif defined(__aarch64__)
    const cpu_simd *simd = cpu_simd_get();
    return simd->name && !strcmp(simd->name, "neon") ? &cpu_attn_neon : &cpu_attn_scalar;
#else
    return &cpu_attn_scalar;
#endif
}

/* How the rows are cut into tasks. */
typedef struct attn_geom {
    int64_t B, Hq, Hkv, Sq, Skv, D, Dv, G;
    int64_t gc, n_gc;   /* heads per task, head chunks per kv head */
    int64_t bq, n_blk;  /* positions per task, blocks */
    int64_t n_units;    /* B * Hkv * n_gc * n_blk */
    int64_t dvp;        /* Dv rounded up to ATTN_NR: output row stride in scratch */
    int64_t ck, n_split; /* keys per chunk, chunks (1: no key split) */
    bool causal, direct;
    bool blocks;        /* k and v of a block type: tiles converted into kr / vt ... */
    bool block_direct;  /* ... unless decoding reads them as they are (q8_0_rows) */
    bool bf16;          /* products on bf16 operands (bf16_products) */
} attn_geom;

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* The products of packed blocks on bf16 operands: asked for by the node
 * (iparams[2]), f32 keys and values whose rows are whole floats apart, and
 * the table's bf16 GEMM panels (not where bf16 exactness is asked for). The
 * row groups are the GEMM's A panels. */
_Static_assert(ATTN_MR == CPU_GEMM_MR && ATTN_NR == CPU_GEMM_NR, "attention row groups are GEMM panels");

static bool bf16_products(const candle_tensor *dst, const attn_geom *g) {
    const candle_tensor *k = dst->src[1], *v = dst->src[2];
    const cpu_simd *simd = cpu_simd_get();
    return dst->iparams[2] && !g->direct && k->dtype == CANDLE_DTYPE_F32 && v->dtype == CANDLE_DTYPE_F32 &&
           k->stride[2] % 4 == 0 && v->stride[2] % 4 == 0 && simd->gemm_bf16_ukr2 && simd->pack_a6_bf16 &&
           simd->pack_at16_bf16 && simd->pack_b16_f32_bf16;
}

/* Blocks of fewer positions when the largest ones leave threads idle
 * (a short prefill of few kv heads is one or two blocks): enough for
 * ATTN_UNITS_PER_THREAD units a thread, while a block keeps at least
 * ATTN_MIN_BLOCK_ROWS rows, so packing its key tiles stays small beside
 * the products. */
#define ATTN_UNITS_PER_THREAD 4
#define ATTN_MIN_BLOCK_ROWS (2 * ATTN_MR)

static void split_positions(attn_geom *g, int n_threads) {
    int64_t per_blk = g->B * g->Hkv * g->n_gc, want = (int64_t)ATTN_UNITS_PER_THREAD * n_threads;
    if (n_threads <= 1 || per_blk * g->n_blk >= want) return;
    int64_t n_blk = (want + per_blk - 1) / per_blk, bq = (g->Sq + n_blk - 1) / n_blk;
    int64_t min_bq = (ATTN_MIN_BLOCK_ROWS + g->gc - 1) / g->gc;
    if (bq < min_bq) bq = min_bq;
    if (bq >= g->bq) return;
    g->bq = bq;
    g->n_blk = (g->Sq + bq - 1) / bq;
}

/* Direct steps split their keys into chunks of ATTN_CHUNK keys, at fixed
 * offsets (a row's chunks depend on its position only), that threads take
 * apart; a second phase merges the chunks' softmax states. The chunks never
 * depend on the thread count either: one thread computes the same partial
 * states and the same merge, the same bits. */
#define ATTN_CHUNK 128

static void split_keys(attn_geom *g) {
    g->n_split = 1;
    g->ck = g->Skv;
    if (!g->direct || g->Skv <= ATTN_CHUNK) return;
    g->ck = ATTN_CHUNK;
    g->n_split = (g->Skv + g->ck - 1) / g->ck;
}

/* A key chunk's softmax state, in shared scratch after the threads'
 * parts: output rows [rows, dvp] (not yet divided by the sum), running
 * max [rows] and sum [rows]. */
static size_t partial_floats(const attn_geom *g) {
    int64_t rows = g->gc * g->bq;
    return (size_t)round_up(rows * (g->dvp + 2), 16);
}

/* All the chunk states of a split step (before split_positions, which
 * only cuts the same rows into more blocks). */
static size_t partial_bytes(const attn_geom *g) {
    if (g->n_split <= 1) return 0;
    return (size_t)(g->B * g->Hkv * g->n_gc * g->n_blk * g->n_split) * partial_floats(g) * sizeof(float);
}

static void attn_geom_of(const candle_tensor *dst, int n_threads, attn_geom *g) {
    const candle_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
    *g = (attn_geom){.B = q->shape[0], .Hq = q->shape[1], .Hkv = k->shape[1], .Sq = q->shape[2],
                     .Skv = k->shape[2], .D = q->shape[3], .Dv = v->shape[3], .causal = dst->iparams[0] != 0};
    bool row_steps = dst->iparams[1] != 0;
    g->G = g->Hq / g->Hkv;
    g->blocks = cpu_dtype(k->dtype)->is_quantized;
    g->gc = g->G < ATTN_MAX_ROWS ? g->G : ATTN_MAX_ROWS;
    g->n_gc = (g->G + g->gc - 1) / g->gc;
    int64_t bq = ATTN_MAX_ROWS / g->gc;
    g->bq = bq < ATTN_BQ ? bq : ATTN_BQ;
    if (g->bq > g->Sq) g->bq = g->Sq > 0 ? g->Sq : 1;
    g->n_blk = (g->Sq + g->bq - 1) / g->bq;
    g->dvp = round_up(g->Dv, ATTN_NR);
    /* set before split_positions, so the thread count changes no bit */
    g->direct = g->gc * g->bq <= ATTN_ROWS_DIRECT ||
                (row_steps && g->gc <= ATTN_DIRECT_HEADS && g->Sq <= ATTN_DIRECT_POS);
    split_keys(g);
    if (g->Sq > 1 && partial_bytes(g) > ATTN_DIRECT_PARTIAL_MAX) {
        g->direct = false;
        split_keys(g);
    }
    g->block_direct = g->blocks && g->direct && attn_reads_rows(cpu_attn_ops_get(), k->dtype);
    g->bf16 = bf16_products(dst, g);
    split_positions(g, n_threads);
    g->n_units = g->B * g->Hkv * g->n_gc * g->n_blk;
}

/* Per-thread scratch, in floats, each part a multiple of 16 (64 bytes):
 * q rows [rows, D], output rows [rows, dvp], running max and sum [rows],
 * one row group's scores [MR, BK] and corrections [MR], transposed key tile
 * [BK, D] and a value tile [BK, Dv] (converted when v is not plain f32);
 * keys of a block type also take a tile of rows [BK, D], converted. bf16
 * products: kt holds the key tile's B panels ([BK / NR][D / 2][NR] pairs,
 * panels D * NR words apart), vt the value tile's ([dvp / NR][BK / 2][NR],
 * panels nk * NR words apart), qp the q rows' A panels (a group's panel
 * [D / 2][MR] pairs, D * MR words apart), pp one group's probabilities as
 * an A panel [BK / 2][MR], tmp the key packing's scratch. */
typedef struct attn_scratch {
    float *q, *o, *m, *l, *s, *corr, *kt, *vt, *kr, *qp, *pp, *tmp;
} attn_scratch;

static size_t scratch_floats(const attn_geom *g, attn_scratch *sc) {
    int64_t rows = g->gc * g->bq, b16 = g->bf16;
    int64_t sizes[12] = {round_up(rows * g->D, 16),       round_up(rows * g->dvp, 16), round_up(rows, 16),
                         round_up(rows, 16),              round_up(ATTN_MR * ATTN_BK, 16), 16,
                         round_up(ATTN_BK * g->D, 16),    round_up(ATTN_BK * (b16 ? g->dvp : g->Dv), 16),
                         g->blocks ? round_up(ATTN_BK * g->D, 16) : 0,
                         b16 * round_up(round_up(rows, ATTN_MR) * g->D, 16), b16 * ATTN_MR * ATTN_BK,
                         b16 * 4096 /* pack_at16_bf16's tmp */};
    float **parts[12] = {&sc->q, &sc->o, &sc->m, &sc->l, &sc->s, &sc->corr, &sc->kt, &sc->vt, &sc->kr,
                         &sc->qp, &sc->pp, &sc->tmp};
    float *base = sc->q;
    size_t off = 0;
    for (int i = 0; i < 12; i++) {
        if (base) *parts[i] = base + off;
        off += (size_t)sizes[i];
    }
    return off;
}

static size_t attn_thread_bytes(const attn_geom *g) {
    attn_scratch none = {0};
    return scratch_floats(g, &none) * sizeof(float);
}


static float *partial_at(const cpu_task *t, const attn_geom *g, int64_t u, int64_t s) {
    uintptr_t base = ((uintptr_t)t->wdata + 63) & ~(uintptr_t)63;
    float *first = (float *)(base + (size_t)t->n_threads * attn_thread_bytes(g));
    return first + (size_t)(u * g->n_split + s) * partial_floats(g);
}

/* Work below which waking a thread costs more than it saves: attention
 * of a decoding step with ~50 keys (SmolLM2), products of its rows. */
#define ATTN_PAR_MIN_WORK 3e4

static void plan_attn(const candle_tensor *dst, int n_threads, cpu_plan *p) {
    attn_geom g;
    attn_geom_of(dst, n_threads, &g);
    double work = (double)candle_tensor_numel(dst) * (double)g.Skv;
    /* one task per unit (with split keys, per unit and chunk): threads claim
     * them as they finish, which evens out the causal blocks' unequal
     * costs (the heaviest are numbered first) */
    bool par = cpu_tasks_for(work, ATTN_PAR_MIN_WORK, n_threads, 1) > 1;
    int64_t n0 = g.n_units * g.n_split;
    p->nth = par ? (int)(n0 < (1 << 20) ? n0 : (1 << 20)) : 1;
    p->wsize = 64 + (size_t)n_threads * attn_thread_bytes(&g);
    if (g.n_split > 1) {
        /* the merge is a few rows per unit: the calling thread alone */
        p->n_phases = 2;
        p->nth0 = p->nth;
        p->nth = 1;
        p->wsize += (size_t)n0 * partial_floats(&g) * sizeof(float);
    }
}

/* One task's rows and the inputs they read. */
typedef struct attn_block {
    const attn_geom *g;
    const cpu_attn_ops *ops;
    const cpu_simd *simd;
    const candle_tensor *mask;
    const char *k, *v;        /* rows of kv head hk in batch b */
    int64_t sk, sv;           /* byte strides between keys */
    int64_t b, h0, nh, i0, r; /* query heads [h0, h0 + nh), positions [i0, i0 + r) */
    int64_t n_keys;           /* keys any row of the block sees */
    candle_dtype kv_dtype;
    attn_scratch sc;
} attn_block;

/* Rows are position-major: row ri of the block is position i0 + ri / nh of
 * head h0 + ri % nh, so a row group spans few positions and the causal
 * limit of its last row bounds the keys the whole group needs. */
static int64_t row_pos(const attn_block *a, int64_t ri) { return a->i0 + ri / a->nh; }
static int64_t row_head(const attn_block *a, int64_t ri) { return a->h0 + ri % a->nh; }

/* Adds the mask to the scores of rows [g0, g0 + mr) (row g0 + i is row i
 * of the score tile), keys [j0, j0 + nk). */
static void add_mask(const attn_block *a, int64_t g0, int64_t mr, int64_t j0, int64_t nk) {
    const candle_tensor *mk = a->mask;
    int64_t sm = mk->stride[3];
    for (int64_t i = 0; i < mr; i++) {
        const char *row = tensor_ptr(mk) + a->b * mk->stride[0] + row_head(a, g0 + i) * mk->stride[1] +
                          row_pos(a, g0 + i) * mk->stride[2] + j0 * sm;
        float *s = a->sc.s + i * ATTN_BK;
        if (mk->dtype == CANDLE_DTYPE_F32 && sm == 4) {
            const float *mrow = (const float *)row;
            for (int64_t j = 0; j < nk; j++) s[j] += mrow[j] * ATTN_LOG2E;
        } else {
            for (int64_t j = 0; j < nk; j++) s[j] += (float)(cdl_load_f64(mk->dtype, row + j * sm) * ATTN_LOG2E);
        }
    }
}

/* Keys past a row's absolute position are -inf (diagonal tiles only). */
static void mask_causal(const attn_block *a, int64_t g0, int64_t mr, int64_t j0, int64_t nk) {
    int64_t off = a->g->Skv - a->g->Sq;
    for (int64_t i = 0; i < mr; i++) {
        int64_t first = off + row_pos(a, g0 + i) + 1 - j0; /* first hidden column */
        float *s = a->sc.s + i * ATTN_BK;
        for (int64_t j = first < 0 ? 0 : first; j < nk; j++) s[j] = -INFINITY;
    }
}

/* f32 value rows for the tile: in place when v is f32 with whole-float
 * strides; NULL for a direct block of one row group when the table reads
 * the stored rows itself (accum_rows, the same bits without the copy);
 * else converted into the scratch tile, once for all the row groups. */
static const float *value_rows(const attn_block *a, int64_t j0, int64_t nk, int64_t *ldv) {
    const char *v = a->v + j0 * a->sv;
    if (a->kv_dtype == CANDLE_DTYPE_F32 && a->sv % (int64_t)sizeof(float) == 0) {
        *ldv = a->sv / (int64_t)sizeof(float);
        return (const float *)v;
    }
    if (a->g->direct && a->nh * a->r <= ATTN_MR && a->ops->accum_rows && (!a->g->blocks || a->g->block_direct))
        return NULL;
    attn_rows_f32(a->simd, a->kv_dtype, v, a->sv, nk, a->g->Dv, a->sc.vt);
    *ldv = a->g->Dv;
    return a->sc.vt;
}

/* The bf16 products of one row group (bf16_products): scores from the
 * group's q panel against the key panels, and after the softmax the output
 * rows rescaled and accumulated from the group's probabilities (rounded to
 * bf16 into an A panel, zero past the keys the group sees, nk_seen) against
 * the value panels of the whole tile (nk keys). */
static void bf16_scores(const attn_block *a, int64_t g0, int64_t mr, int64_t nk_seen) {
    const attn_geom *g = a->g;
    const float *qp = a->sc.qp + g0 * g->D;
    for (int64_t j = 0; j < nk_seen; j += 2 * ATTN_NR)
        a->simd->gemm_bf16_ukr2(g->D, qp, a->sc.kt + j * g->D, a->sc.s + j, ATTN_BK, (int)mr,
                                nk_seen - j < 2 * ATTN_NR ? (int)(nk_seen - j) : 2 * ATTN_NR, false);
}

static void bf16_accum(const attn_block *a, int64_t g0, int64_t mr, int64_t nk_seen, int64_t nk) {
    const attn_geom *g = a->g;
    float *o = a->sc.o + g0 * g->dvp;
    for (int64_t i = 0; i < mr; i++) {
        float *si = a->sc.s + i * ATTN_BK, c = a->sc.corr[i];
        for (int64_t j = nk_seen; j < nk; j++) si[j] = 0.0f;
        if (c != 1.0f)
            for (int64_t e = 0; e < g->Dv; e++) o[i * g->dvp + e] *= c;
    }
    a->simd->pack_a6_bf16(CANDLE_DTYPE_F32, (const char *)a->sc.s, ATTN_BK * (int64_t)sizeof(float), sizeof(float),
                          (int)mr, nk, a->sc.pp);
    for (int64_t e = 0; e < g->Dv; e += 2 * ATTN_NR)
        a->simd->gemm_bf16_ukr2(nk, a->sc.pp, a->sc.vt + e * nk, o + e, g->dvp, (int)mr,
                                g->Dv - e < 2 * ATTN_NR ? (int)(g->Dv - e) : 2 * ATTN_NR, true);
}

/* One key tile (keys [j0, j0 + nk), kt packed unless direct) through rows
 * [g0, g0 + mr): scores, masks, online softmax and the output update, while
 * the group's q, score and output rows stay in L1. Causal rows see keys up
 * to their position only: the group stops at its last row's. */
static void run_group(const attn_block *a, int64_t g0, int64_t mr, int64_t j0, int64_t nk, bool direct,
                      const float *vr, int64_t ldv) {
    const attn_geom *g = a->g;
    int64_t off = g->Skv - g->Sq, nk_tile = nk;
    if (g->causal) {
        int64_t seen = off + row_pos(a, g0 + mr - 1) + 1 - j0;
        if (seen <= 0) return; /* no key of the tile: nothing changes */
        nk = seen < nk ? seen : nk;
    }
    const float *q = a->sc.q + g0 * g->D;
    if (g->bf16)
        bf16_scores(a, g0, mr, nk);
    else if (direct && g->blocks && !g->block_direct) /* the tile's keys converted by run_tiles */
        a->ops->scores_rows(q, g->D, mr, g->D, CANDLE_DTYPE_F32, (const char *)a->sc.kr,
                            g->D * (int64_t)sizeof(float), nk, a->sc.s, ATTN_BK);
    else if (direct)
        a->ops->scores_rows(q, g->D, mr, g->D, a->kv_dtype, a->k + j0 * a->sk, a->sk, nk, a->sc.s, ATTN_BK);
    else a->ops->scores(q, g->D, mr, g->D, a->sc.kt, nk, a->sc.s, ATTN_BK);
    if (a->mask) add_mask(a, g0, mr, j0, nk);
    if (g->causal && j0 + nk - 1 > off + row_pos(a, g0)) mask_causal(a, g0, mr, j0, nk);
    a->ops->softmax(a->sc.s, ATTN_BK, mr, nk, a->sc.m + g0, a->sc.l + g0, a->sc.corr);
    float *o = a->sc.o + g0 * g->dvp;
    if (g->bf16) bf16_accum(a, g0, mr, nk, nk_tile);
    else if (vr) a->ops->accum(a->sc.s, ATTN_BK, mr, a->sc.corr, vr, ldv, nk, g->Dv, o, g->dvp);
    else a->ops->accum_rows(a->sc.s, ATTN_BK, mr, a->sc.corr, a->kv_dtype, a->v + j0 * a->sv, a->sv, nk, g->Dv, o, g->dvp);
}

/* A decoding step reads each key and value row once, long after the weight
 * streams of the other layers pushed them out of every cache, and the
 * direct products stall on each line in turn (a few misses in flight).
 * One load per line of the tile's keys and values first, none depending
 * on another, keeps the core's miss buffers full: SmolLM2-135M decoding
 * on Zen 5, the attention node 7.4-8.0 -> 6.1-6.3 us at 128 keys. Where
 * the table prefetches the rows ahead itself (prefetches_rows, on CPUs
 * that take T0 prefetches) that overlaps better. Reads only: the same
 * bits. */
static bool touches_kv(const attn_block *a) {
    return a->g->direct && (cpu_config_get()->stream_nta || !a->ops->prefetches_rows);
}

static void touch_kv(const attn_block *a, int64_t j0, int64_t nk) {
    const attn_geom *g = a->g;
    int64_t kb = (int64_t)candle_dtype_row_size(a->kv_dtype, g->D), vb = (int64_t)candle_dtype_row_size(a->kv_dtype, g->Dv);
    unsigned acc = 0;
    for (int64_t j = j0; j < j0 + nk; j++) {
        const char *kr = a->k + j * a->sk, *vr = a->v + j * a->sv;
        for (int64_t o = 0; o < kb; o += 64) acc += *(const volatile unsigned char *)(kr + o);
        for (int64_t o = 0; o < vb; o += 64) acc += *(const volatile unsigned char *)(vr + o);
    }
    __asm__ volatile("" ::"r"(acc));
}

/* The key tile's and the value tile's bf16 B panels (bf16_products): keys
 * [j0, j0 + nk) as columns, the value rows as k. */
static void pack_bf16_tile(const attn_block *a, int64_t j0, int64_t nk) {
    const attn_geom *g = a->g;
    uint32_t *kt = (uint32_t *)a->sc.kt, *vt = (uint32_t *)a->sc.vt;
    for (int64_t j = 0; j < nk; j += ATTN_NR)
        a->simd->pack_at16_bf16((const float *)(a->k + (j0 + j) * a->sk), a->sk / (int64_t)sizeof(float),
                                nk - j < ATTN_NR ? (int)(nk - j) : ATTN_NR, g->D, kt + j * g->D, a->sc.tmp);
    const float *v = (const float *)(a->v + j0 * a->sv);
    for (int64_t e = 0; e < g->Dv; e += ATTN_NR)
        a->simd->pack_b16_f32_bf16(v + e, a->sv / (int64_t)sizeof(float), nk,
                                   g->Dv - e < ATTN_NR ? (int)(g->Dv - e) : ATTN_NR, vt + e * nk);
}

/* Keys [k0, k1) through the block. */
static void run_tiles(const attn_block *a, int64_t k0, int64_t k1) {
    const attn_geom *g = a->g;
    int64_t rows = a->nh * a->r;
    bool direct = g->direct;
    for (int64_t j0 = k0; j0 < k1; j0 += ATTN_BK) {
        int64_t nk = k1 - j0 < ATTN_BK ? k1 - j0 : ATTN_BK, ldv = 0;
        if (touches_kv(a)) touch_kv(a, j0, nk);
        if (g->blocks && !g->block_direct)
            attn_rows_f32(a->simd, a->kv_dtype, a->k + j0 * a->sk, a->sk, nk, g->D, a->sc.kr);
        if (g->bf16)
            pack_bf16_tile(a, j0, nk);
        else if (!direct && g->blocks)
            a->ops->pack_kt(CANDLE_DTYPE_F32, (const char *)a->sc.kr, g->D * (int64_t)sizeof(float), nk, g->D, a->sc.kt);
        else if (!direct)
            a->ops->pack_kt(a->kv_dtype, a->k + j0 * a->sk, a->sk, nk, g->D, a->sc.kt);
        const float *vr = g->bf16 ? NULL : value_rows(a, j0, nk, &ldv);
        for (int64_t g0 = 0; g0 < rows; g0 += ATTN_MR)
            run_group(a, g0, rows - g0 < ATTN_MR ? rows - g0 : ATTN_MR, j0, nk, direct, vr, ldv);
    }
}

/* q rows of the block, scaled, into scratch; output and running state reset. */
static void load_block(const attn_block *a, const candle_tensor *q, float scale) {
    const attn_geom *g = a->g;
    int64_t rows = a->nh * a->r;
    for (int64_t ri = 0; ri < rows; ri++) {
        const char *src = tensor_ptr(q) + a->b * q->stride[0] + row_head(a, ri) * q->stride[1] +
                          row_pos(a, ri) * q->stride[2];
        float *dq = a->sc.q + ri * g->D;
        a->simd->to_f32(q->dtype, src, dq, g->D);
        for (int64_t e = 0; e < g->D; e++) dq[e] *= scale;
    }
    for (int64_t g0 = 0; g->bf16 && g0 < rows; g0 += ATTN_MR)
        a->simd->pack_a6_bf16(CANDLE_DTYPE_F32, (const char *)(a->sc.q + g0 * g->D), g->D * (int64_t)sizeof(float),
                              sizeof(float), rows - g0 < ATTN_MR ? (int)(rows - g0) : ATTN_MR, g->D,
                              a->sc.qp + g0 * g->D);
    memset(a->sc.o, 0, sizeof(float) * (size_t)(rows * g->dvp));
    memset(a->sc.l, 0, sizeof(float) * (size_t)rows);
    for (int64_t i = 0; i < rows; i++) a->sc.m[i] = -INFINITY;
}

static void store_block(const attn_block *a, candle_tensor *dst) {
    const attn_geom *g = a->g;
    size_t esz = cpu_dtype(dst->dtype)->type_size;
    for (int64_t ri = 0; ri < a->nh * a->r; ri++) {
        float *o = a->sc.o + ri * g->dvp, l = a->sc.l[ri];
        float inv = l > 0 ? 1.0f / l : 0.0f;
        for (int64_t e = 0; e < g->Dv; e++) o[e] *= inv;
        int64_t row = (a->b * g->Hq + row_head(a, ri)) * g->Sq + row_pos(a, ri);
        char *out = tensor_ptr(dst) + (size_t)(row * g->Dv) * esz;
        if (dst->dtype == CANDLE_DTYPE_F32) memcpy(out, o, sizeof(float) * (size_t)g->Dv);
        else cpu_dtype(dst->dtype)->from_f32(o, out, g->Dv);
    }
}

/* Unit u's rows (numbered the costliest first: the last blocks under a
 * causal mask) and the key and value rows of their kv head. */
static void block_of(attn_block *a, const candle_tensor *k, const candle_tensor *v, int64_t u) {
    const attn_geom *g = a->g;
    int64_t per_blk = g->B * g->Hkv * g->n_gc;
    int64_t blk = g->n_blk - 1 - u / per_blk, rest = u % per_blk;
    int64_t gch = rest % g->n_gc, hk = (rest / g->n_gc) % g->Hkv;
    a->b = rest / (g->n_gc * g->Hkv);
    a->h0 = hk * g->G + gch * g->gc;
    a->nh = g->G - gch * g->gc < g->gc ? g->G - gch * g->gc : g->gc;
    a->i0 = blk * g->bq;
    a->r = g->Sq - a->i0 < g->bq ? g->Sq - a->i0 : g->bq;
    a->n_keys = g->causal ? g->Skv - g->Sq + a->i0 + a->r : g->Skv;
    a->k = tensor_ptr(k) + a->b * k->stride[0] + hk * k->stride[1];
    a->v = tensor_ptr(v) + a->b * v->stride[0] + hk * v->stride[1];
}

static void save_partial(const attn_block *a, float *part) {
    const attn_geom *g = a->g;
    int64_t rows = a->nh * a->r, cap = g->gc * g->bq;
    memcpy(part, a->sc.o, sizeof(float) * (size_t)(rows * g->dvp));
    memcpy(part + cap * g->dvp, a->sc.m, sizeof(float) * (size_t)rows);
    memcpy(part + cap * (g->dvp + 1), a->sc.l, sizeof(float) * (size_t)rows);
}

/* The chunks' states of unit u combined into the block's output rows and
 * sums (the running maxima in log2 units, as the tiles left them). */
static void merge_partials(const cpu_task *t, attn_block *a, int64_t u) {
    const attn_geom *g = a->g;
    int64_t rows = a->nh * a->r, cap = g->gc * g->bq;
    for (int64_t ri = 0; ri < rows; ri++) {
        float mx = -INFINITY, l = 0, *o = a->sc.o + ri * g->dvp;
        for (int64_t s = 0; s < g->n_split; s++) {
            float m = partial_at(t, g, u, s)[cap * g->dvp + ri];
            mx = m > mx ? m : mx;
        }
        memset(o, 0, sizeof(float) * (size_t)g->Dv);
        for (int64_t s = 0; s < g->n_split && mx != -INFINITY; s++) {
            const float *part = partial_at(t, g, u, s);
            float m = part[cap * g->dvp + ri];
            if (m == -INFINITY) continue; /* the chunk had no key for this row */
            float w = exp2f(m - mx);
            l += w * part[cap * (g->dvp + 1) + ri];
            a->simd->scale_axpy(o, 1.0f, w, part + ri * g->dvp, g->Dv);
        }
        a->sc.l[ri] = l;
    }
}

static candle_status run_attn(const cpu_task *t, candle_tensor *dst) {
    const candle_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2];
    attn_geom g;
    attn_geom_of(dst, t->n_threads, &g);
    attn_block a = {.g = &g, .ops = cpu_attn_ops_get(), .simd = cpu_simd_get(),
                    .mask = dst->n_src > 3 ? dst->src[3] : NULL,
                    .sk = k->stride[2], .sv = v->stride[2], .kv_dtype = k->dtype};
    a.sc.q = cpu_thread_scratch(t, attn_thread_bytes(&g));
    scratch_floats(&g, &a.sc);
    bool merge = g.n_split > 1 && t->phase == 1;
    int64_t u0, u1;
    cpu_split(merge ? g.n_units : g.n_units * g.n_split, 1, t->ith, t->nth, &u0, &u1);
    for (int64_t w = u0; w < u1; w++) {
        int64_t u = merge ? w : w / g.n_split, s = merge ? 0 : w % g.n_split;
        block_of(&a, k, v, u);
        if (merge) {
            merge_partials(t, &a, u);
            store_block(&a, dst);
            continue;
        }
        load_block(&a, q, (float)(dst->fparams[0] * ATTN_LOG2E));
        int64_t k0 = s * g.ck, k1 = k0 + g.ck < a.n_keys ? k0 + g.ck : a.n_keys;
        run_tiles(&a, k0, k1);
        if (g.n_split > 1) save_partial(&a, partial_at(t, &g, u, s));
        else store_block(&a, dst);
    }
    return CANDLE_OK;
}

const cpu_fast_kernel cpu_fast_attention = {
    "flash attention f32/f16/bf16 (blocked: query rows x key tiles, online softmax, O(N) memory)", match_attn,
    plan_attn, run_attn};
