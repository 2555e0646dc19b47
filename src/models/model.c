/* Loading a model and running sessions over it. */
#include <stdlib.h>
#include <string.h>

#include "model-impl.h"

candle_model_params candle_model_default_params(void) {
    return (candle_model_params){.n_threads = 0, .no_mmap = false, .backend = NULL,
                                 .weight_dtype = CANDLE_DTYPE_F32};
}

candle_status model_backend_for(const candle_model *m, int n_threads, candle_backend **out, bool *own) {
    *out = m->backend;
    *own = false;
    candle_cpu_params cpu;
    if (n_threads <= 0 || n_threads == m->backend->n_threads) return CANDLE_OK;
    if (!candle_backend_cpu_params(m->backend, &cpu))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "%d threads asked of a model on %s: its backend sets the threads", n_threads,
                                candle_backend_name(m->backend));
    cpu.n_threads = n_threads;
    candle_status s = candle_backend_cpu_init_params(out, &cpu);
    *own = !s;
    return s;
}

candle_status model_need_decoder(const candle_model *m, const char *who) {
    if (m->cfg.kind == CANDLE_MODEL_DECODER_LM && m->cfg.bidirectional)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                "%s: the %s model attends bidirectionally (attention.causal false) and "
                                "generates nothing: use candle_model_forward or candle_encoder", who,
                                m->family->name);
    if (m->cfg.kind == CANDLE_MODEL_DECODER_LM) return CANDLE_OK;
    return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                            "%s: the %s model is of kind %s and generates nothing: use "
                            "candle_model_forward or candle_encoder", who, m->family->name,
                            candle_model_kind_name(m->cfg.kind));
}

/* Move an error recorded on ctx to the thread-local last error. */
static candle_status to_last_error(candle_ctx *ctx) {
    return cdl_set_error(NULL, candle_errcode(ctx), "%s", candle_errmsg(ctx));
}

static candle_status read_config(candle_model *m) {
    const char *arch;
    size_t len;
    if (!candle_weights_get_str(m->weights, "general.architecture", &arch, &len))
        return cdl_set_error(NULL, CANDLE_ERR_FORMAT,
                                "model: metadata key 'general.architecture' missing");
    candle_status s = model_family_find(arch, len, &m->family);
    if (!s) s = m->family->desc.kind == CANDLE_MODEL_ENCODER ? encoder_check_desc(m->family)
                                                            : decoder_check_desc(m->family);
    if (s) return s;
    m->cfg.arch = m->family->arch;
    m->cfg.kind = m->family->desc.kind;
    if ((s = model_cfg_read_common(m->weights, m->family->name, &m->cfg))) return s;
    if ((s = m->family->config(m->weights, &m->cfg))) return s;
    return model_cfg_check_values(m->family->name, &m->cfg);
}

candle_status candle_model_load(candle_model **out, const char *path,
                                 const candle_model_params *p) {
    if (!out || !path)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "model_load: NULL argument");
    *out = NULL;
    candle_model_params def = candle_model_default_params();
    if (!p) p = &def;
    candle_model *m = calloc(1, sizeof *m);
    if (!m) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: model");
    m->backend = p->backend;
    m->weight_dtype = p->weight_dtype;
    candle_status s = CANDLE_OK;
    if (m->weight_dtype != CANDLE_DTYPE_F32 && m->weight_dtype != CANDLE_DTYPE_F16 &&
        m->weight_dtype != CANDLE_DTYPE_BF16 && m->weight_dtype != CANDLE_DTYPE_Q8_0)
        s = cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                          "model_load: weight_dtype %s (want f32 for as stored, f16, bf16 or q8_0)",
                          candle_dtype_name(m->weight_dtype));
    if (!s && !m->backend) {
        m->backend = candle_backend_cpu_init(p->n_threads);
        m->owns_backend = m->backend != NULL;
        if (!m->backend) s = candle_last_error();
    }
    candle_weights_params wp = {.no_mmap = p->no_mmap};
    if (!s) s = candle_weights_open(&m->weights, path, &wp);
    if (!s) s = read_config(m);
    candle_ctx_params cp = candle_ctx_default_params();
    cp.backend = m->backend;
    if (!s) s = candle_ctx_init(&m->ctx, &cp);
    if (!s) s = model_ws_pool_init(m);
    bool encoder = !s && m->cfg.kind == CANDLE_MODEL_ENCODER;
    if (!s && encoder && !(m->enc = calloc((size_t)m->cfg.n_layer, sizeof *m->enc)))
        s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: layer table");
    if (!s && !encoder && !(m->layers = calloc((size_t)m->cfg.n_layer, sizeof *m->layers)))
        s = cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: layer table");
    if (!s && (encoder ? encoder_load_weights(m) : decoder_load_weights(m))) s = to_last_error(m->ctx);
    if (s) {
        candle_model_free(m);
        return s;
    }
    *out = m;
    return CANDLE_OK;
}

void candle_model_free(candle_model *m) {
    if (!m) return;
    model_ws_pool_free(m); /* before the backend its contexts compute on */
    candle_ctx_free(m->ctx);
    if (m->owns_backend) candle_backend_free(m->backend);
    candle_weights_close(m->weights);
    for (int64_t il = 0; m->layers && il < m->cfg.n_layer; il++) free(m->layers[il].exp_gate);
    free(m->layers);
    free(m->enc);
    free(m->in_orders);
    free(m);
}

/* An earlier linear's order tensor of the same values, or NULL. */
static candle_tensor *same_order(const candle_model *m, const candle_tensor *order) {
    size_t n = candle_tensor_nbytes(order);
    for (int64_t i = m->n_in_orders - 1; i >= 0 && i >= m->n_in_orders - 8; i--) {
        candle_tensor *o = m->in_orders[i].order;
        if (candle_tensor_nbytes(o) == n && candle_tensor_is_host(o) && candle_tensor_is_host(order) &&
            !memcmp(candle_tensor_data(o), candle_tensor_data(order), n))
            return o;
    }
    return NULL;
}

candle_status model_add_in_order(candle_model *m, const candle_tensor *wt, candle_tensor *order,
                                 candle_tensor *corr, int64_t group) {
    candle_tensor *same = order ? same_order(m, order) : NULL;
    if (same) order = same; /* one gather for the linears of one input */
    struct model_in_order *o = realloc(m->in_orders, (size_t)(m->n_in_orders + 1) * sizeof *o);
    if (!o) return cdl_set_error(m->ctx, CANDLE_ERR_OOM, "out of memory: the input form of '%s'", wt->name);
    m->in_orders = o;
    o[m->n_in_orders++] = (struct model_in_order){wt, order, corr, group};
    return CANDLE_OK;
}

static const struct model_in_order *in_order_of(const candle_model *m, const candle_tensor *wt) {
    for (int64_t i = 0; i < m->n_in_orders; i++)
        if (m->in_orders[i].wt == wt) return &m->in_orders[i];
    return NULL;
}

candle_tensor *model_linear(candle_ctx *ctx, const candle_model *m, candle_tensor *h, candle_tensor *wt,
                            model_gather_memo *memo, unsigned flags) {
    const struct model_in_order *f = in_order_of(m, wt);
    if (!f) return cdl_matmul_ex(ctx, h, wt, NULL, flags);
    if (f->order && memo && memo->out && memo->h == h && memo->order == f->order) {
        h = memo->out;
    } else if (f->order) {
        candle_tensor *g = candle_index_select(ctx, h, (int)h->rank - 1, f->order);
        if (memo) memo->h = h, memo->order = f->order, memo->out = g;
        h = g;
    }
    return f->corr ? candle_matmul_group_corr(ctx, h, wt, f->corr, f->group) : cdl_matmul_ex(ctx, h, wt, NULL, flags);
}

candle_tensor *model_linear_bias(candle_ctx *ctx, const candle_model *m, candle_tensor *h, candle_tensor *wt,
                                 candle_tensor *b, unsigned flags) {
    if (!in_order_of(m, wt)) return cdl_matmul_ex(ctx, h, wt, b, flags);
    candle_tensor *y = model_linear(ctx, m, h, wt, NULL, flags);
    return b ? candle_add(ctx, y, b) : y;
}

const candle_model_config *candle_model_get_config(const candle_model *m) { return &m->cfg; }
const candle_gguf *candle_model_gguf(const candle_model *m) { return candle_weights_gguf(m->weights); }
const candle_weights *candle_model_weights(const candle_model *m) { return m->weights; }
size_t candle_model_weight_bytes(const candle_model *m) { return m->weight_bytes; }
