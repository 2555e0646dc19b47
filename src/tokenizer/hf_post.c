/* tokenizer.json post-processors: the special tokens and type ids put
 * around one sequence or a pair (TemplateProcessing, BertProcessing,
 * RobertaProcessing; ByteLevel only trims offsets, which ids do not
 * have). */
#include <string.h>

#include "hf-impl.h"

static void put(tok_out *o, int32_t *types, int32_t id, int32_t type) {
    if (types && o->n < o->cap) types[o->n] = type;
    tok_out_push(o, id);
}

static void put_seq(tok_out *o, int32_t *types, const int32_t *ids, int64_t n, int32_t type) {
    for (int64_t i = 0; i < n; i++) put(o, types, ids[i], type);
}

/* The processor that decides the ids: the last one of a Sequence that is
 * not ByteLevel. */
static const hf_post *effective(const hf_post *p) {
    if (!p) return NULL;
    if (p->type != HPP_SEQUENCE) return p->type == HPP_BYTELEVEL ? NULL : p;
    const hf_post *r = NULL;
    for (int i = 0; i < p->n_seq; i++) {
        const hf_post *e = effective(&p->seq[i]);
        if (e) r = e;
    }
    return r;
}

static void run_template(const hf_tmpl_item *it, int n_it, const int32_t *a, int64_t na,
                         const int32_t *b, int64_t nb, bool add_special, tok_out *o, int32_t *types) {
    for (int i = 0; i < n_it; i++) {
        if (it[i].special) {
            if (!add_special) continue;
            for (int k = 0; k < it[i].n_ids; k++) put(o, types, it[i].ids[k], it[i].type_id);
        } else if (it[i].seq_b) {
            put_seq(o, types, b, nb, it[i].type_id);
        } else {
            put_seq(o, types, a, na, it[i].type_id);
        }
    }
}

candle_status hf_post_process(const candle_tokenizer *t, const int32_t *a, int64_t na,
                              const int32_t *b, int64_t nb, bool pair, bool add_special,
                              tok_out *o, int32_t *types) {
    const hf_post *p = effective(t->hf->post);
    if (p && p->type == HPP_TEMPLATE) {
        if (pair) run_template(p->pair, p->n_pair, a, na, b, nb, add_special, o, types);
        else run_template(p->single, p->n_single, a, na, b, nb, add_special, o, types);
        return CANDLE_OK;
    }
    if (p && (p->type == HPP_BERT || p->type == HPP_ROBERTA)) {
        /* single[0] holds cls, single[1] sep (see hf_load.c). */
        int32_t cls = p->single[0].ids[0], sep = p->single[1].ids[0];
        int32_t tb = p->type == HPP_BERT ? 1 : 0;
        if (add_special) put(o, types, cls, 0);
        put_seq(o, types, a, na, 0);
        if (add_special) put(o, types, sep, 0);
        if (!pair) return CANDLE_OK;
        if (add_special && p->type == HPP_ROBERTA) put(o, types, sep, 0);
        put_seq(o, types, b, nb, tb);
        if (add_special) put(o, types, sep, tb);
        return CANDLE_OK;
    }
    const hf_tok *h = t->hf;
    if (add_special && h->add_bos && t->bos >= 0) put(o, types, t->bos, 0);
    put_seq(o, types, a, na, 0);
    if (pair) put_seq(o, types, b, nb, 1);
    if (add_special && h->add_eos && t->eos >= 0) put(o, types, t->eos, pair ? 1 : 0);
    return CANDLE_OK;
}
