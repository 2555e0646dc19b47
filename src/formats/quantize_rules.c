/* File types and the mixture rules that pick each tensor's dtype.
 *
 * The rules follow llama.cpp's llama_tensor_get_type for the file types made
 * here (read from its source, written anew): the output projection (or the
 * tied token embedding) gets q6_k; the V projection and FFN down projection,
 * the tensors most sensitive to quantization error, get more bits in the _M
 * mixes for the first and last eighth of the layers and every third layer in
 * between (more_bits); low-bit mixes lift attn_output too. llama.cpp's special
 * case for 70B models (detected by size class) is not reproduced. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core-impl.h"
#include "quantize-impl.h"

typedef struct ftype_row {
    const char *name;
    candle_ftype ftype;
    candle_dtype base;
} ftype_row;

static const ftype_row ftypes[] = {
    {"F32", CANDLE_FTYPE_ALL_F32, CANDLE_DTYPE_F32},
    {"F16", CANDLE_FTYPE_MOSTLY_F16, CANDLE_DTYPE_F16},
    {"BF16", CANDLE_FTYPE_MOSTLY_BF16, CANDLE_DTYPE_BF16},
    {"Q4_0", CANDLE_FTYPE_MOSTLY_Q4_0, CANDLE_DTYPE_Q4_0},
    {"Q4_1", CANDLE_FTYPE_MOSTLY_Q4_1, CANDLE_DTYPE_Q4_1},
    {"Q5_0", CANDLE_FTYPE_MOSTLY_Q5_0, CANDLE_DTYPE_Q5_0},
    {"Q5_1", CANDLE_FTYPE_MOSTLY_Q5_1, CANDLE_DTYPE_Q5_1},
    {"Q8_0", CANDLE_FTYPE_MOSTLY_Q8_0, CANDLE_DTYPE_Q8_0},
    {"Q2_K", CANDLE_FTYPE_MOSTLY_Q2_K, CANDLE_DTYPE_Q2_K},
    {"Q3_K_S", CANDLE_FTYPE_MOSTLY_Q3_K_S, CANDLE_DTYPE_Q3_K},
    {"Q3_K_M", CANDLE_FTYPE_MOSTLY_Q3_K_M, CANDLE_DTYPE_Q3_K},
    {"Q3_K_L", CANDLE_FTYPE_MOSTLY_Q3_K_L, CANDLE_DTYPE_Q3_K},
    {"Q4_K_S", CANDLE_FTYPE_MOSTLY_Q4_K_S, CANDLE_DTYPE_Q4_K},
    {"Q4_K_M", CANDLE_FTYPE_MOSTLY_Q4_K_M, CANDLE_DTYPE_Q4_K},
    {"Q5_K_S", CANDLE_FTYPE_MOSTLY_Q5_K_S, CANDLE_DTYPE_Q5_K},
    {"Q5_K_M", CANDLE_FTYPE_MOSTLY_Q5_K_M, CANDLE_DTYPE_Q5_K},
    {"Q6_K", CANDLE_FTYPE_MOSTLY_Q6_K, CANDLE_DTYPE_Q6_K},
    {"IQ4_NL", CANDLE_FTYPE_MOSTLY_IQ4_NL, CANDLE_DTYPE_IQ4_NL},
    {"IQ4_XS", CANDLE_FTYPE_MOSTLY_IQ4_XS, CANDLE_DTYPE_IQ4_XS},
};
#define N_FTYPES (sizeof ftypes / sizeof ftypes[0])

/* llama-quantize's aliases: a bare k-quant name means its _M mix. */
static const ftype_row aliases[] = {
    {"Q3_K", CANDLE_FTYPE_MOSTLY_Q3_K_M, CANDLE_DTYPE_Q3_K},
    {"Q4_K", CANDLE_FTYPE_MOSTLY_Q4_K_M, CANDLE_DTYPE_Q4_K},
    {"Q5_K", CANDLE_FTYPE_MOSTLY_Q5_K_M, CANDLE_DTYPE_Q5_K},
};

static const ftype_row *find_ftype(candle_ftype f) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == f) return &ftypes[i];
    return NULL;
}

const char *candle_ftype_name(candle_ftype f) {
    const ftype_row *r = find_ftype(f);
    return r ? r->name : NULL;
}

candle_dtype candle_ftype_dtype(candle_ftype f) {
    const ftype_row *r = find_ftype(f);
    return r ? r->base : CANDLE_DTYPE_COUNT;
}

const char *candle_ftype_names(void) {
    return "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M "
           "Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS (aliases: Q3_K = Q3_K_M, Q4_K = Q4_K_M, "
           "Q5_K = Q5_K_M)";
}

candle_status candle_ftype_from_name(const char *name, candle_ftype *out) {
    if (!name || !out)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "quantize: NULL type name");
    for (size_t i = 0; i < N_FTYPES + sizeof aliases / sizeof aliases[0]; i++) {
        const ftype_row *r = i < N_FTYPES ? &ftypes[i] : &aliases[i - N_FTYPES];
        if (!strcasecmp(name, r->name)) {
            *out = r->ftype;
            return CANDLE_OK;
        }
    }
    return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                            "quantize: unknown type '%.40s'; valid types: %s", name,
                            candle_ftype_names());
}

/* ---- what the rules know of the model ---- */

static int64_t meta_u32(const candle_weights *g, const char *arch, const char *suffix, int64_t dflt) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    return candle_weights_get_i64(g, key, &v) && v >= 0 && v <= UINT32_MAX ? v : dflt;
}

/* Layer index of a "blk.N." tensor, or -1. */
static int64_t layer_of(const char *name) {
    if (strncmp(name, "blk.", 4)) return -1;
    char *end;
    long v = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && v >= 0 ? (int64_t)v : -1;
}

void quant_model_init(quant_model *m, const candle_weights *g) {
    memset(m, 0, sizeof *m);
    const char *s;
    size_t len;
    char arch[64] = "";
    if (candle_weights_get_str(g, "general.architecture", &s, &len) && len < sizeof arch) {
        memcpy(arch, s, len);
        arch[len] = 0;
    }
    m->falcon = !strcmp(arch, "falcon");
    int64_t n_head = meta_u32(g, arch, "attention.head_count", 0);
    int64_t n_head_kv = meta_u32(g, arch, "attention.head_count_kv", n_head);
    m->n_gqa = n_head > 0 && n_head_kv > 0 ? n_head / n_head_kv : 1;
    m->n_expert = meta_u32(g, arch, "expert_count", 0);
    int64_t max_layer = -1;
    for (int64_t i = 0; i < candle_weights_n_tensors(g); i++) {
        const char *name = candle_weights_tensor(g, i)->name;
        if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") ||
            strstr(name, "attn_kv_b.weight"))
            m->n_attn_v++;
        if (!strcmp(name, "output.weight")) m->has_output = true;
        int64_t l = layer_of(name);
        if (l > max_layer) max_layer = l;
    }
    m->n_layer = meta_u32(g, arch, "block_count", max_layer + 1);
}

/* Tensors that stay as they are although they are matrices: small, or read
 * as lookup tables, where quantizing saves little and costs accuracy. */
static const char *const keep_exact[] = {
    "_norm.weight", "ffn_gate_inp.weight", "position_embd.weight", "token_types.weight",
    "ssm_conv1d.weight", "attn_rel_b.weight", "time_mix_first.weight",
};

bool quant_is_weight(const candle_weights_tensor_info *t) {
    const candle_dtype_traits *tr = candle_dtype_info(t->dtype);
    if (!tr || !(tr->is_float || tr->is_quantized)) return false;
    /* rank as ggml counts it: leading (outermost) 1s do not count */
    int r = t->rank, d = 0;
    while (d < t->rank - 1 && t->shape[d] == 1) {
        d++;
        r--;
    }
    if (r < 2) return false;
    for (size_t i = 0; i < sizeof keep_exact / sizeof keep_exact[0]; i++)
        if (strstr(t->name, keep_exact[i])) return false;
    return true;
}

/* ---- the mixture rules ---- */

static bool more_bits(int64_t i, int64_t n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool is_ft(candle_ftype f, candle_ftype a, candle_ftype b) { return f == a || f == b; }

static candle_dtype output_type(const quant_model *m, candle_dtype base, int64_t ne0) {
    if (m->falcon || ne0 % candle_dtype_info(base)->block_size) return CANDLE_DTYPE_Q8_0;
    return base == CANDLE_DTYPE_Q8_0 ? base : CANDLE_DTYPE_Q6_K;
}

static candle_dtype attn_v_type(quant_model *m, candle_ftype f, candle_dtype t) {
    int64_t i = m->i_attn_v++, n = m->n_attn_v;
    if (f == CANDLE_FTYPE_MOSTLY_Q2_K) t = m->n_gqa >= 4 ? CANDLE_DTYPE_Q4_K : CANDLE_DTYPE_Q3_K;
    else if (f == CANDLE_FTYPE_MOSTLY_Q3_K_M) t = i < 2 ? CANDLE_DTYPE_Q5_K : CANDLE_DTYPE_Q4_K;
    else if (f == CANDLE_FTYPE_MOSTLY_Q3_K_L) t = CANDLE_DTYPE_Q5_K;
    else if (is_ft(f, CANDLE_FTYPE_MOSTLY_IQ4_NL, CANDLE_FTYPE_MOSTLY_IQ4_XS) && m->n_gqa >= 4)
        t = CANDLE_DTYPE_Q5_K;
    else if (is_ft(f, CANDLE_FTYPE_MOSTLY_Q4_K_M, CANDLE_FTYPE_MOSTLY_Q5_K_M) && more_bits(i, n))
        t = CANDLE_DTYPE_Q6_K;
    else if (f == CANDLE_FTYPE_MOSTLY_Q4_K_S && i < 4) t = CANDLE_DTYPE_Q5_K;
    /* eight experts share one V: more bits there cost little */
    if (m->n_expert == 8) t = CANDLE_DTYPE_Q8_0;
    return t;
}

static candle_dtype ffn_down_type(quant_model *m, candle_ftype f, candle_dtype t, const char *name) {
    int64_t i = m->i_ffn_down++, n = m->n_layer;
    /* experts of one layer need not be adjacent in the file: use the name */
    if (m->n_expert > 1 && layer_of(name) >= 0) i = layer_of(name);
    bool more = more_bits(i, n);
    switch (f) {
    case CANDLE_FTYPE_MOSTLY_Q2_K: return CANDLE_DTYPE_Q3_K;
    case CANDLE_FTYPE_MOSTLY_Q3_K_M:
        return i < n / 16 ? CANDLE_DTYPE_Q5_K
               : !m->falcon || more ? CANDLE_DTYPE_Q4_K
                                    : CANDLE_DTYPE_Q3_K;
    case CANDLE_FTYPE_MOSTLY_Q3_K_L: return m->falcon ? CANDLE_DTYPE_Q4_K : CANDLE_DTYPE_Q5_K;
    case CANDLE_FTYPE_MOSTLY_Q4_K_M:
        if (m->falcon)
            return i < n / 16 ? CANDLE_DTYPE_Q6_K : more ? CANDLE_DTYPE_Q5_K : CANDLE_DTYPE_Q4_K;
        return more ? CANDLE_DTYPE_Q6_K : t;
    case CANDLE_FTYPE_MOSTLY_IQ4_NL:
    case CANDLE_FTYPE_MOSTLY_IQ4_XS: return i < n / 8 ? CANDLE_DTYPE_Q5_K : t;
    case CANDLE_FTYPE_MOSTLY_Q5_K_M: return more ? CANDLE_DTYPE_Q6_K : t;
    case CANDLE_FTYPE_MOSTLY_Q4_K_S: return !m->falcon && i < n / 8 ? CANDLE_DTYPE_Q5_K : t;
    default: return t;
    }
}

static candle_dtype attn_output_type(const quant_model *m, candle_ftype f, candle_dtype t) {
    if (m->falcon) return f == CANDLE_FTYPE_MOSTLY_Q3_K_L ? CANDLE_DTYPE_Q4_K : t;
    if (m->n_expert == 8) {
        switch (f) {
        case CANDLE_FTYPE_MOSTLY_Q2_K: case CANDLE_FTYPE_MOSTLY_Q3_K_S:
        case CANDLE_FTYPE_MOSTLY_Q3_K_M: case CANDLE_FTYPE_MOSTLY_IQ4_NL:
        case CANDLE_FTYPE_MOSTLY_Q4_K_S: case CANDLE_FTYPE_MOSTLY_Q4_K_M:
        case CANDLE_FTYPE_MOSTLY_IQ4_XS: return CANDLE_DTYPE_Q5_K;
        default: return t;
        }
    }
    if (f == CANDLE_FTYPE_MOSTLY_Q2_K) return CANDLE_DTYPE_Q3_K;
    if (f == CANDLE_FTYPE_MOSTLY_Q3_K_M) return CANDLE_DTYPE_Q4_K;
    if (f == CANDLE_FTYPE_MOSTLY_Q3_K_L) return CANDLE_DTYPE_Q5_K;
    return t;
}

static candle_dtype attn_qkv_type(candle_ftype f, candle_dtype t) {
    if (is_ft(f, CANDLE_FTYPE_MOSTLY_Q3_K_M, CANDLE_FTYPE_MOSTLY_Q3_K_L)) return CANDLE_DTYPE_Q4_K;
    if (f == CANDLE_FTYPE_MOSTLY_Q4_K_M) return CANDLE_DTYPE_Q5_K;
    if (f == CANDLE_FTYPE_MOSTLY_Q5_K_M) return CANDLE_DTYPE_Q6_K;
    return t;
}

static candle_dtype mixture_type(quant_model *m, candle_ftype f, candle_dtype base,
                                 const char *name, int64_t ne0) {
    if (!strcmp(name, "output.weight") || (!m->has_output && !strcmp(name, "token_embd.weight")))
        return output_type(m, base, ne0);
    if (!strcmp(name, "token_embd.weight")) return base;
    if (strstr(name, "attn_v.weight")) return attn_v_type(m, f, base);
    if (strstr(name, "attn_k.weight")) return m->n_expert == 8 ? CANDLE_DTYPE_Q8_0 : base;
    if (strstr(name, "ffn_down")) return ffn_down_type(m, f, base, name);
    if (strstr(name, "attn_output.weight")) return attn_output_type(m, f, base);
    if (strstr(name, "attn_qkv.weight")) return attn_qkv_type(f, base);
    return base;
}

/* A type whose blocks fit rows that the k-quants' 256 do not: llama.cpp's
 * current choices (checked against llama_model_quantize), so files match; then
 * f16, which fits any row. Low-bit k-quants go to q4_0, which every backend
 * runs, rather than iq4_nl. */
static candle_dtype fallback_type(candle_dtype t, int64_t ne0) {
    switch (t) {
    case CANDLE_DTYPE_Q2_K: case CANDLE_DTYPE_Q3_K: t = CANDLE_DTYPE_Q4_0; break;
    case CANDLE_DTYPE_IQ4_XS: t = CANDLE_DTYPE_IQ4_NL; break;
    case CANDLE_DTYPE_Q4_K: t = CANDLE_DTYPE_Q5_0; break;
    case CANDLE_DTYPE_Q5_K: t = CANDLE_DTYPE_Q5_1; break;
    case CANDLE_DTYPE_Q6_K: t = CANDLE_DTYPE_Q8_0; break;
    default: t = CANDLE_DTYPE_F16; break;
    }
    return ne0 % candle_dtype_info(t)->block_size ? CANDLE_DTYPE_F16 : t;
}

candle_dtype quant_tensor_type(quant_model *m, candle_ftype ftype, const candle_quantize_params *p,
                               const candle_weights_tensor_info *t, char *note, size_t n_note,
                               bool *fallback) {
    candle_dtype base = candle_ftype_dtype(ftype);
    int64_t ne0 = t->rank ? t->shape[t->rank - 1] : 1;
    candle_dtype dt = base;
    if (!p->pure && candle_dtype_info(base)->is_quantized)
        dt = mixture_type(m, ftype, base, t->name, ne0);
    bool embd = !strcmp(t->name, "token_embd.weight");
    if (p->output_type < CANDLE_DTYPE_COUNT && (!strcmp(t->name, "output.weight") || (embd && !m->has_output)))
        dt = p->output_type;
    if (p->token_embd_type < CANDLE_DTYPE_COUNT && embd) dt = p->token_embd_type;
    *fallback = false;
    note[0] = 0;
    int64_t bs = candle_dtype_info(dt)->block_size;
    if (ne0 % bs) {
        candle_dtype fb = fallback_type(dt, ne0);
        snprintf(note, n_note, "%s: rows of %" PRId64 " are not a multiple of the %s block (%" PRId64
                 "): using %s", t->name, ne0, candle_dtype_name(dt), bs, candle_dtype_name(fb));
        *fallback = true;
        dt = fb;
    }
    return dt;
}
