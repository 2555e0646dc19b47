/* GPTQ and AWQ checkpoints in a Hugging Face directory (config.json's
 * quantization_config). Each quantized Linear is stored as packed integer
 * codes, zero points and f16 scales; its weight is
 *     W[o][i] = scales[g][o] * (q[i][o] - z[g][o]),   g = the group of input i.
 * The packings, as AutoGPTQ / GPTQModel and AutoAWQ write them (and
 * scripts/gen_gptq_awq_models.py, the test data's writer, restates):
 *   - GPTQ: qweight int32 [in / p, out], p = 32 / bits codes per word packed
 *     along the input: code (i, o) is bits (i % p) * bits.. of qweight[i / p][o].
 *     qzeros int32 [groups, out / p], packed the same way along the output.
 *     scales f16 [groups, out]. g_idx int32 [in]: the group of each input
 *     (i / group_size, or with act-order (desc_act) a permutation of that).
 *     checkpoint_format "gptq" (v1, the default) stores z - 1, so the zero
 *     point is the stored value + 1 (a stored 15 is 16, as every v1 loader
 *     reads it); "gptq_v2" stores z.
 *   - AWQ (version "gemm"): qweight int32 [in, out / 8] packed along the
 *     output, the 8 nibbles of a word holding outputs 8c + [0, 2, 4, 6, 1, 3,
 *     5, 7]; qzeros int32 [groups, out / 8] the same; scales f16
 *     [groups, out]; group = i / group_size; zero point as stored.
 *
 * Every weight is exactly scale * (an integer of at most 9 bits), so it is
 * repacked at load, once, into the GGUF block type of the same values:
 *   - zero points all at the midpoint (symmetric: 8 of 4 bits, 128 of 8
 *     bits): Q4_0 / Q8_0, d = the scale, codes q (Q4_0 computes d * (q - 8))
 *     and q - 128;
 *   - 4 bits with other zero points: q - z lies in [-16, 15], so Q5_0
 *     (d * (c - 16)) holds it exactly with c = q - z + 16;
 *   - anything else (8-bit asymmetric, act-order whose groups are not
 *     contiguous, groups not a multiple of the 32-element block): f32.
 * An act-order linear (g_idx a permutation of the groups) also loads, for
 * a model that asks (candle_weights_load_linear), with its inputs sorted by
 * group: each group then fills whole blocks, which take the block type of
 * its values, and the model gathers its activations into that order.
 * Every value then dequantizes to the same f32 as the formula above (an f16
 * scale times an integer below 2^9 needs at most 20 significant bits), and
 * the integer kernels of those types run the products.
 * A model asks for 4-bit linears in a smaller form
 * (candle_weights_load_linear_split): where every 128 inputs in a row lie in
 * one group (groups of 128 or a multiple, per channel, or act-order groups
 * sorted), Candle's q4_z128 blocks hold the codes with the group's scale
 * and zero point as stored (4.25 bits per weight, exact); otherwise an
 * asymmetric linear is Q4_0 of the codes, s * (q - 8), plus f32 s * (8 - z)
 * per group and output, which the model multiplies by the sums of its
 * activations' groups (4.5 + 32 / group bits per weight instead of Q5_0's
 * 5.5, and Q4_0's kernels). Only such a caller gets those forms; every other
 * reader (candle_weights_load_tensor, so `candle quantize`) gets the whole
 * linear as Q4_0 / Q5_0. Stacked experts stay Q5_0: the moe_ffn op takes
 * plain weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant-impl.h"
#include "weights-impl.h"

typedef enum { HFQ_GPTQ = 1, HFQ_AWQ } hfq_method;

struct hf_quant {
    hfq_method method;
    int bits;       /* 4 or 8 */
    int64_t group;  /* inputs per group; -1: one group (per channel) */
    bool desc_act;  /* GPTQ act-order: g_idx may permute the groups */
    bool zero_plus_one; /* GPTQ v1: the stored zero point is z - 1 */
};


enum { QW, QZ, SC, GI };
static const char *const suffix[4] = {".qweight", ".qzeros", ".scales", ".g_idx"};
static const int8_t awq_nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7}; /* output 8c + j is nibble awq_nibble[j] */

/* ---- quantization_config ---- */

static candle_status bad(const char *field, const char *fmt, const char *what) {
    return cdl_set_error(NULL, CANDLE_ERR_UNSUPPORTED, "config.json: quantization_config.%s %s", field,
                         what ? what : fmt);
}

/* A string field compared case-insensitively against the accepted values;
 * absent: def. */
static candle_status str_field(const json_value *q, const char *field, const char *const *ok, int n_ok,
                               const char *def, int *which) {
    const json_value *v = json_get(q, field);
    const char *s = def;
    size_t len = def ? strlen(def) : 0;
    if (v && v->type != JSON_NULL && !json_as_str(v, &s, &len))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "config.json: quantization_config.%s is %s, want a string",
                             field, json_type_name(v->type));
    for (int i = 0; s && i < n_ok; i++)
        if (strlen(ok[i]) == len && !strncasecmp(s, ok[i], len)) return *which = i, CANDLE_OK;
    char msg[160], list[96] = "";
    for (int i = 0; i < n_ok; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", ok[i]);
    snprintf(msg, sizeof msg, "'%.*s' is not supported (supported: %s)", (int)(len > 48 ? 48 : len),
             s ? s : "", list);
    return bad(field, NULL, msg);
}

static candle_status int_field(const json_value *q, const char *field, int64_t def, int64_t *out) {
    const json_value *v = json_get(q, field);
    *out = def;
    if (!v || v->type == JSON_NULL) return CANDLE_OK;
    if (!json_as_i64(v, out))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "config.json: quantization_config.%s is %s, want an integer",
                             field, json_type_name(v->type));
    return CANDLE_OK;
}

static candle_status bool_field(const json_value *q, const char *field, bool def, bool *out) {
    const json_value *v = json_get(q, field);
    *out = def;
    if (!v || v->type == JSON_NULL) return CANDLE_OK;
    if (!json_as_bool(v, out))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "config.json: quantization_config.%s is %s, want a boolean",
                             field, json_type_name(v->type));
    return CANDLE_OK;
}

candle_status hf_quant_config(candle_weights *w, const json_value *cfg) {
    const json_value *q = json_get(cfg, "quantization_config");
    if (!q || q->type == JSON_NULL) return CANDLE_OK;
    if (q->type != JSON_OBJECT)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "config.json: quantization_config is %s, want an object",
                             json_type_name(q->type));
    static const char *const methods[] = {"gptq", "awq"};
    int m = 0;
    candle_status s = str_field(q, "quant_method", methods, 2, NULL, &m);
    if (s) return s;
    struct hf_quant hq = {.method = m ? HFQ_AWQ : HFQ_GPTQ};
    int64_t bits, group;
    char msg[128];
    if ((s = int_field(q, "bits", -1, &bits))) return s;
    if (bits == -1 && (s = int_field(q, "w_bit", -1, &bits))) return s; /* AutoAWQ's own name */
    if (bits != 4 && (bits != 8 || hq.method == HFQ_AWQ)) {
        snprintf(msg, sizeof msg, "%lld is not supported (%s)", (long long)bits,
                 hq.method == HFQ_AWQ ? "AWQ: 4" : "GPTQ: 4 or 8");
        return bad("bits", NULL, msg);
    }
    hq.bits = (int)bits;
    if ((s = int_field(q, "group_size", -2, &group))) return s;
    if (group == -2 && (s = int_field(q, "q_group_size", 128, &group))) return s;
    if (group != -1 && (group < 1 || group > (1 << 24))) {
        snprintf(msg, sizeof msg, "%lld is not supported (a positive size, or -1 for per-channel)",
                 (long long)group);
        return bad("group_size", NULL, msg);
    }
    hq.group = group;
    if (hq.method == HFQ_GPTQ) {
        static const char *const formats[] = {"gptq", "gptq_v2"};
        int f = 0;
        if ((s = str_field(q, "checkpoint_format", formats, 2, "gptq", &f))) return s;
        hq.zero_plus_one = f == 0;
        if ((s = bool_field(q, "desc_act", false, &hq.desc_act))) return s;
        /* sym only says how the zero points were chosen; they are read as stored */
        bool sym;
        if ((s = bool_field(q, "sym", true, &sym))) return s;
    } else {
        static const char *const versions[] = {"gemm"};
        int v = 0;
        if ((s = str_field(q, "version", versions, 1, "gemm", &v))) return s;
        bool zp;
        if ((s = bool_field(q, "zero_point", true, &zp))) return s;
        if (!zp) return bad("zero_point", NULL, "false is not supported (AWQ GEMM checkpoints have zero points)");
    }
    if (!(w->quant = malloc(sizeof *w->quant)))
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: quantization_config");
    *w->quant = hq;
    return CANDLE_OK;
}

/* ---- the packed tensors ---- */

static int part_kind(const char *src, size_t *prefix_len) {
    size_t n = strlen(src);
    for (int k = 0; k < 4; k++) {
        size_t sl = strlen(suffix[k]);
        if (n > sl && !strcmp(src + n - sl, suffix[k])) return *prefix_len = n - sl, k;
    }
    return -1;
}

bool hf_quant_part(const candle_weights *w, const char *src, bool *is_weight, char *buf, size_t n) {
    size_t pl;
    int k = w->quant ? part_kind(src, &pl) : -1;
    if (k < 0) return false;
    *is_weight = k == QW;
    snprintf(buf, n, "%.*s.weight", (int)pl, src);
    return true;
}

static const void *data_of(const candle_safetensors *st, const candle_safetensors_tensor_info *t) {
    return (const char *)candle_safetensors_storage(st)->data + t->offset;
}

static uint32_t word_at(const void *p, int64_t i) {
    uint32_t v;
    memcpy(&v, (const char *)p + 4 * i, 4);
    return v;
}

/* Zero point of group g, output o. */
static int zero_at(const struct hf_quant *hq, const weights_qlinear *q, const void *qz, int64_t g, int64_t o) {
    int pf = 32 / hq->bits, mask = (1 << hq->bits) - 1;
    int64_t cols = q->out / pf;
    uint32_t word = word_at(qz, g * cols + o / pf);
    int shift = hq->method == HFQ_AWQ ? 4 * awq_nibble[o % 8] : hq->bits * (int)(o % pf);
    return (int)((word >> shift) & (uint32_t)mask) + (hq->zero_plus_one ? 1 : 0);
}

/* Code of input i, output o. */
static int code_at(const struct hf_quant *hq, const weights_qlinear *q, const void *qw, int64_t i, int64_t o) {
    int pf = 32 / hq->bits, mask = (1 << hq->bits) - 1;
    if (hq->method == HFQ_AWQ) return (int)((word_at(qw, i * (q->out / 8) + o / 8) >> (4 * awq_nibble[o % 8])) & 15u);
    return (int)((word_at(qw, (i / pf) * q->out + o) >> (hq->bits * (int)(i % pf))) & (uint32_t)mask);
}

static int64_t group_of(const struct hf_quant *hq, const weights_qlinear *q, int64_t i) {
    if (q->t[GI]) return (int32_t)word_at(data_of(q->st[GI], q->t[GI]), i);
    return hq->group < 0 ? 0 : i / hq->group;
}

static bool shape_is(const candle_safetensors_tensor_info *t, candle_dtype dt, int64_t r, int64_t c) {
    return t->dtype == dt && t->rank == 2 && t->shape[0] == r && t->shape[1] == c;
}

static candle_status shape_err(const candle_weights *w, const candle_safetensors_tensor_info *t, const char *want) {
    char got[96] = "";
    for (int d = 0; d < t->rank; d++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: tensor '%s' is %s [%s], want %s", w->path, t->name,
                         t->st_dtype, got, want);
}

/* The block type holding a linear's values exactly, its inputs' groups
 * aside (see the file's comment). */
static candle_dtype block_dtype(const struct hf_quant *hq, const weights_qlinear *q) {
    const void *qz = data_of(q->st[QZ], q->t[QZ]);
    int mid = 1 << (hq->bits - 1);
    bool sym = true;
    for (int64_t k = 0; sym && k < q->n_groups; k++)
        for (int64_t o = 0; sym && o < q->out; o++) sym = zero_at(hq, q, qz, k, o) == mid;
    if (hq->bits == 4) return sym ? CANDLE_DTYPE_Q4_0 : CANDLE_DTYPE_Q5_0;
    return sym ? CANDLE_DTYPE_Q8_0 : CANDLE_DTYPE_F32;
}

/* The load dtype of a checked linear. */
static candle_dtype pick_dtype(const struct hf_quant *hq, const weights_qlinear *q) {
    int64_t g = hq->group < 0 ? q->in : hq->group;
    if (!q->contiguous || q->in % 32 || g % 32) return CANDLE_DTYPE_F32;
    return block_dtype(hq, q);
}

/* perm[j] = the input in place j once the inputs are sorted by group
 * (stable); counts[g] = inputs in group g. */
static void sort_by_group(const struct hf_quant *hq, const weights_qlinear *q, int64_t *counts, int32_t *perm) {
    memset(counts, 0, (size_t)q->n_groups * sizeof *counts);
    for (int64_t i = 0; i < q->in; i++) counts[group_of(hq, q, i)]++;
    if (!perm) return;
    int64_t at = 0;
    for (int64_t g = 0; g < q->n_groups; g++) {
        int64_t n = counts[g];
        counts[g] = at; /* the group's first place, while placing */
        at += n;
    }
    for (int64_t i = 0; i < q->in; i++) perm[counts[group_of(hq, q, i)]++] = (int32_t)i;
}

/* An act-order linear's type once its inputs are sorted by group: a block
 * type where every group fills whole 32-input blocks. */
static candle_dtype pick_sorted_dtype(const struct hf_quant *hq, const weights_qlinear *q) {
    if (q->contiguous || q->in % 32) return CANDLE_DTYPE_F32;
    int64_t *counts = malloc((size_t)q->n_groups * sizeof *counts);
    bool whole = counts != NULL;
    if (counts) sort_by_group(hq, q, counts, NULL);
    for (int64_t g = 0; whole && g < q->n_groups; g++) whole = counts[g] % 32 == 0;
    free(counts);
    return whole ? block_dtype(hq, q) : CANDLE_DTYPE_F32;
}

static candle_status check_linear(candle_weights *w, weights_entry *e) {
    const struct hf_quant *hq = w->quant;
    weights_qlinear *q = e->q;
    char want[96];
    const candle_safetensors_tensor_info *qw = q->t[QW];
    int pf = 32 / hq->bits;
    if (qw->dtype != CANDLE_DTYPE_I32 || qw->rank != 2 || qw->shape[0] <= 0 || qw->shape[1] <= 0)
        return shape_err(w, qw, "I32 of rank 2");
    if (hq->method == HFQ_AWQ) {
        q->in = qw->shape[0];
        q->out = qw->shape[1] * 8;
    } else {
        q->in = qw->shape[0] * pf;
        q->out = qw->shape[1];
    }
    if (q->in > ((int64_t)1 << 24) || q->out > ((int64_t)1 << 24) || q->out % pf)
        return shape_err(w, qw, "at most 2^24 inputs and outputs, outputs a multiple of the packing");
    int64_t g = hq->group < 0 ? q->in : hq->group;
    q->n_groups = (q->in + g - 1) / g;
    for (int k = QZ; k <= SC; k++)
        if (!q->t[k])
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: tensor '%.*s%s' is missing (beside '%s')", w->path,
                                 (int)(strlen(qw->name) - strlen(suffix[QW])), qw->name, suffix[k], qw->name);
    snprintf(want, sizeof want, "I32 [%lld, %lld]", (long long)q->n_groups, (long long)(q->out / pf));
    if (!shape_is(q->t[QZ], CANDLE_DTYPE_I32, q->n_groups, q->out / pf)) return shape_err(w, q->t[QZ], want);
    snprintf(want, sizeof want, "F16 [%lld, %lld]", (long long)q->n_groups, (long long)q->out);
    if (!shape_is(q->t[SC], CANDLE_DTYPE_F16, q->n_groups, q->out)) return shape_err(w, q->t[SC], want);
    q->contiguous = true;
    if (q->t[GI]) {
        const candle_safetensors_tensor_info *gi = q->t[GI];
        snprintf(want, sizeof want, "I32 [%lld]", (long long)q->in);
        if (gi->dtype != CANDLE_DTYPE_I32 || gi->rank != 1 || gi->shape[0] != q->in) return shape_err(w, gi, want);
        for (int64_t i = 0; i < q->in; i++) {
            int64_t gr = group_of(hq, q, i);
            if (gr < 0 || gr >= q->n_groups)
                return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: tensor '%s'[%lld] is %lld, outside the %lld groups",
                                     w->path, gi->name, (long long)i, (long long)gr, (long long)q->n_groups);
            if (gr != i / g) q->contiguous = false;
        }
        if (!q->contiguous && !hq->desc_act)
            return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                 "%s: tensor '%s' permutes the groups (act-order) but quantization_config.desc_act "
                                 "is false", w->path, gi->name);
    }
    e->info.dtype = pick_dtype(hq, q);
    q->sorted_dtype = pick_sorted_dtype(hq, q);
    e->info.rank = 2;
    e->info.shape[0] = q->out;
    e->info.shape[1] = q->in;
    e->info.offset = qw->offset;
    const candle_dtype_traits *tr = candle_dtype_info(e->info.dtype);
    e->info.size = (size_t)(q->out * q->in / tr->block_size) * tr->type_size;
    return CANDLE_OK;
}

/* The tensor prefix + sfx in any shard. */
static bool find_part(const candle_weights *w, const char *prefix, size_t pl, const char *sfx,
                      const candle_safetensors **st, const candle_safetensors_tensor_info **t) {
    char name[512];
    if (pl + strlen(sfx) >= sizeof name) return false;
    snprintf(name, sizeof name, "%.*s%s", (int)pl, prefix, sfx);
    for (int k = 0; k < w->n_shards; k++) {
        int64_t i = candle_safetensors_find_tensor(w->shards[k], name);
        if (i >= 0) {
            *st = w->shards[k];
            *t = candle_safetensors_tensor(w->shards[k], i);
            return true;
        }
    }
    return false;
}

candle_status hf_quant_entries(candle_weights *w) {
    if (!w->quant) return CANDLE_OK;
    int64_t n_linear = 0;
    for (int64_t i = 0; i < w->n_entries; i++) {
        weights_entry *e = &w->entries[i];
        if (!e->q) continue;
        n_linear++;
        size_t pl = 0;
        part_kind(e->info.src_name, &pl);
        for (int k = QW; k <= GI; k++) find_part(w, e->info.src_name, pl, suffix[k], &e->q->st[k], &e->q->t[k]);
        candle_status s = check_linear(w, e);
        if (s) return s;
    }
    /* every qzeros / scales / g_idx belongs to a qweight */
    for (int k = 0; k < w->n_shards; k++)
        for (int64_t i = 0; i < candle_safetensors_n_tensors(w->shards[k]); i++) {
            const char *name = candle_safetensors_tensor(w->shards[k], i)->name;
            size_t pl = 0;
            const candle_safetensors *st;
            const candle_safetensors_tensor_info *t;
            if (part_kind(name, &pl) > QW && !find_part(w, name, pl, suffix[QW], &st, &t))
                return cdl_set_error(NULL, CANDLE_ERR_FORMAT, "%s: tensor '%s' has no '%.*s%s' beside it", w->path,
                                     name, (int)pl, name, suffix[QW]);
        }
    if (!n_linear)
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                             "%s: config.json has a quantization_config but no tensor is a packed '.qweight'", w->path);
    return CANDLE_OK;
}

/* ---- repacking ---- */

/* codes[o * in + i] = the code of (i, o), zeros[g * out + o], scales as stored. */
static bool unpack(const struct hf_quant *hq, const weights_qlinear *q, uint8_t *codes, int16_t *zeros) {
    const void *qw = data_of(q->st[QW], q->t[QW]), *qz = data_of(q->st[QZ], q->t[QZ]);
    for (int64_t i = 0; i < q->in; i++)
        for (int64_t o = 0; o < q->out; o++) codes[o * q->in + i] = (uint8_t)code_at(hq, q, qw, i, o);
    for (int64_t g = 0; g < q->n_groups; g++)
        for (int64_t o = 0; o < q->out; o++) zeros[g * q->out + o] = (int16_t)zero_at(hq, q, qz, g, o);
    return true;
}

static void pack_row(candle_dtype dt, const uint8_t *c, const int16_t *z, const uint16_t *d, void *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, c += 32) {
        if (dt == CANDLE_DTYPE_Q4_0) {
            block_q4_0 *x = (block_q4_0 *)dst + b;
            x->d = d[b];
            for (int j = 0; j < 16; j++) x->qs[j] = (uint8_t)(c[j] | c[j + 16] << 4);
        } else if (dt == CANDLE_DTYPE_Q5_0) {
            block_q5_0 *x = (block_q5_0 *)dst + b;
            uint32_t qh = 0;
            uint8_t v[32];
            for (int j = 0; j < 32; j++) {
                v[j] = (uint8_t)(c[j] - z[b] + 16); /* in [0, 31]: q in [0, 15], z in [0, 16] */
                qh |= (uint32_t)(v[j] >> 4) << j;
            }
            x->d = d[b];
            memcpy(x->qh, &qh, 4);
            for (int j = 0; j < 16; j++) x->qs[j] = (uint8_t)((v[j] & 15) | (v[j + 16] & 15) << 4);
        } else {
            block_q8_0 *x = (block_q8_0 *)dst + b;
            x->d = d[b];
            for (int j = 0; j < 32; j++) x->qs[j] = (int8_t)(c[j] - 128);
        }
    }
}

/* Row o's q4_z128 blocks: c the row's codes (in sorted order with perm). */
static void pack_z128(const struct hf_quant *hq, const weights_qlinear *q, const uint8_t *c, const int16_t *zeros,
                      const uint16_t *sc, const int32_t *perm, int64_t o, block_q4_z128 *dst) {
    int64_t gs = hq->group < 0 ? q->in : hq->group;
    for (int64_t b = 0; b < q->in / QK4_Z; b++, c += QK4_Z) {
        int64_t g = perm ? group_of(hq, q, perm[b * QK4_Z]) : b * QK4_Z / gs;
        memcpy(&dst[b].d, sc + g * q->out + o, 2);
        dst[b].z = (uint8_t)zeros[g * q->out + o];
        dst[b].pad = 0;
        for (int s = 0; s < 4; s++)
            for (int j = 0; j < 16; j++) dst[b].qs[16 * s + j] = (uint8_t)(c[32 * s + j] | c[32 * s + j + 16] << 4);
    }
}

/* Whether a 4-bit linear's 128-input blocks each lie in one group. ends:
 * the groups' ends in sorted order, or NULL in order. */
static bool fits_z128(const struct hf_quant *hq, const weights_qlinear *q, candle_dtype dt, const int64_t *ends) {
    int64_t g = hq->group < 0 ? q->in : hq->group;
    if (hq->bits != 4 || (dt != CANDLE_DTYPE_Q4_0 && dt != CANDLE_DTYPE_Q5_0) || q->in % QK4_Z) return false;
    if (!ends) return g % QK4_Z == 0;
    for (int64_t k = 0; k < q->n_groups; k++)
        if (ends[k] % QK4_Z) return false;
    return true;
}

/* The order tensor of perm [in] in ctx. */
static candle_tensor *order_tensor(candle_ctx *ctx, const int32_t *perm, int64_t in, const char *name) {
    candle_tensor *t = candle_tensor_new(ctx, CANDLE_DTYPE_I32, 1, &in);
    if (t && candle_tensor_set_bytes(t, 0, perm, (size_t)in * sizeof *perm)) t = NULL;
    if (t) snprintf(t->name, sizeof t->name, "%.*s.order", (int)(sizeof t->name - 7), name);
    return t;
}

/* The zero points' share of an asymmetric linear as f32 [out, n_groups]:
 * c = s * (8 - z), so that s * (q - 8) (Q4_0 of the codes) + c = s * (q - z).
 * Both terms are an f16 scale times an integer below 2^5, so each is exact in
 * f32 and so is their sum. */
static candle_tensor *corr_tensor(candle_ctx *ctx, const weights_qlinear *q, const int16_t *zeros, const uint16_t *sc,
                                  const char *name) {
    int64_t shape[2] = {q->out, q->n_groups};
    float *c = malloc((size_t)(q->out * q->n_groups) * sizeof *c);
    candle_tensor *t = c ? candle_tensor_new(ctx, CANDLE_DTYPE_F32, 2, shape) : NULL;
    for (int64_t o = 0; t && o < q->out; o++)
        for (int64_t g = 0; g < q->n_groups; g++) {
            uint16_t s16;
            memcpy(&s16, sc + g * q->out + o, 2);
            c[o * q->n_groups + g] = candle_f16_to_f32(s16) * (float)(8 - zeros[g * q->out + o]);
        }
    if (t && candle_tensor_set_bytes(t, 0, c, (size_t)(q->out * q->n_groups) * sizeof *c)) t = NULL;
    if (t) snprintf(t->name, sizeof t->name, "%.*s.zero_corr", (int)(sizeof t->name - 11), name);
    if (!c) cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: the zero points of '%s'", name);
    free(c);
    return t;
}

/* Whether an asymmetric 4-bit linear (the Q5_0 ones) splits into Q4_0 and a
 * correction per group: each group must be whole 32-blocks of the (sorted)
 * columns and all groups one size, so that the model sums an input's groups
 * with a reshape. ends: the groups' ends in sorted order, or NULL in order. */
static bool can_split(const struct hf_quant *hq, const weights_qlinear *q, candle_dtype dt, const int64_t *ends) {
    int64_t g = hq->group < 0 ? q->in : hq->group;
    if (hq->bits != 4 || dt != CANDLE_DTYPE_Q5_0 || g % 32 || q->in % g || q->n_groups != q->in / g) return false;
    for (int64_t k = 0; ends && k < q->n_groups; k++)
        if (ends[k] != (k + 1) * g) return false;
    return true;
}

candle_tensor *hf_quant_load(const candle_weights *w, const weights_entry *e, candle_ctx *ctx, const char *name,
                             candle_tensor **order, candle_tensor **corr, int64_t *group) {
    const struct hf_quant *hq = w->quant;
    const weights_qlinear *q = e->q;
    int64_t in = q->in, out = q->out, nb = in / 32;
    bool sorted = order && q->sorted_dtype != CANDLE_DTYPE_F32;
    candle_dtype dt = sorted ? q->sorted_dtype : e->info.dtype;
    if (order) *order = NULL;
    if (corr) *corr = NULL;
    uint8_t *codes = malloc((size_t)(in * out)), *row = malloc((size_t)in);
    int16_t *zeros = malloc((size_t)(q->n_groups * out) * sizeof *zeros);
    void *dst = NULL;
    uint16_t *d = malloc((size_t)(nb + 1) * sizeof *d);
    int16_t *z = malloc((size_t)(nb + 1) * sizeof *z);
    int32_t *perm = sorted ? malloc((size_t)in * sizeof *perm) : NULL;
    int64_t *counts = sorted ? malloc((size_t)q->n_groups * sizeof *counts) : NULL;
    candle_tensor *t = NULL;
    if (!codes || !row || !zeros || !d || !z || (sorted && (!perm || !counts))) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: repacking '%s'", e->info.src_name);
        goto done;
    }
    unpack(hq, q, codes, zeros);
    if (sorted) sort_by_group(hq, q, counts, perm); /* counts: each group's end */
    bool z128 = corr && fits_z128(hq, q, dt, sorted ? counts : NULL);
    bool split = corr && !z128 && can_split(hq, q, dt, sorted ? counts : NULL);
    if (split) dt = CANDLE_DTYPE_Q4_0;
    if (z128) dt = CANDLE_DTYPE_Q4_Z128;
    const candle_dtype_traits *tr = candle_dtype_info(dt);
    size_t size = sorted || split || z128 ? (size_t)(out * in / tr->block_size) * tr->type_size : e->info.size;
    if (!(dst = malloc(size ? size : 1))) {
        cdl_set_error(ctx, CANDLE_ERR_OOM, "out of memory: repacking '%s'", e->info.src_name);
        goto done;
    }
    const uint16_t *sc = data_of(q->st[SC], q->t[SC]);
    uint16_t s16;
    if (dt == CANDLE_DTYPE_F32) {
        float *f = dst;
        for (int64_t o = 0; o < out; o++)
            for (int64_t i = 0; i < in; i++) {
                int64_t g = group_of(hq, q, i);
                memcpy(&s16, sc + g * out + o, 2);
                f[o * in + i] = candle_f16_to_f32(s16) * (float)(codes[o * in + i] - zeros[g * out + o]);
            }
    } else {
        int64_t gs = hq->group < 0 ? in : hq->group;
        for (int64_t o = 0; o < out; o++) {
            const uint8_t *c = codes + o * in;
            for (int64_t j = 0; perm && j < in; j++) row[j] = c[perm[j]];
            if (z128) {
                pack_z128(hq, q, perm ? row : c, zeros, sc, perm, o, (block_q4_z128 *)dst + o * (in / QK4_Z));
                continue;
            }
            for (int64_t b = 0; b < nb; b++) {
                int64_t g = perm ? group_of(hq, q, perm[b * 32]) : b * 32 / gs;
                memcpy(&d[b], sc + g * out + o, 2);
                z[b] = zeros[g * out + o];
            }
            pack_row(dt, perm ? row : c, z, d, (char *)dst + (size_t)(o * nb) * tr->type_size, nb);
        }
    }
    t = candle_tensor_new(ctx, dt, 2, e->info.shape);
    if (t && candle_tensor_set_bytes(t, 0, dst, size)) t = NULL;
    if (t) candle_tensor_set_name(t, name);
    if (t && sorted && !(*order = order_tensor(ctx, perm, in, name))) t = NULL;
    if (t && split && !(*corr = corr_tensor(ctx, q, zeros, sc, name))) t = NULL;
    if (t && split) *group = in / q->n_groups;
done:
    free(codes);
    free(row);
    free(zeros);
    free(dst);
    free(d);
    free(z);
    free(perm);
    free(counts);
    return t;
}

void hf_quant_free(candle_weights *w) {
    if (w->format == CANDLE_WEIGHTS_HF_DIR)
        for (int64_t i = 0; i < w->n_entries; i++) {
            free(w->entries[i].q);
            for (int64_t k = 0; k < w->entries[i].n_parts; k++) free(w->entries[i].parts[k].q);
        }
    free(w->quant);
    w->quant = NULL;
}
