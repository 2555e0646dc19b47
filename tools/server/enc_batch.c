/* Batching of an encoder's /v1/embeddings, classify and rerank requests
 * across clients by a token budget (server.h, srv_enc_job). There is no
 * batcher thread: the waiting handler that finds no batch running computes
 * the next one (its own inputs or earlier ones), so nothing is left to
 * start or stop, and a lone request runs on its own thread at once. Each
 * job waits on its own condition variable: a batch's end wakes the jobs it
 * finished and the queue's head (the next batch's leader), not every
 * waiter.
 *
 * A row hardly depends on the company it keeps: the library packs
 * variable-length inputs without padding and attends per sequence, but its
 * products pick their blocking by row count, so a row's bits may differ
 * from the request's reply alone by float rounding (max abs diff 1-4e-7
 * on MiniLM and the tiny encoders, cosine 1.0000000;
 * tests/models/test_server_embeddings.sh checks 1e-5, and
 * test_server_heads.sh the scores). Per-request parameters: the prompt,
 * the pair template and the cut are in the ids (the handler tokenized
 * them), so only the kind (embed, classify, rerank) and an embedding's
 * dimensions differ, and a batch holds requests asking the same: one
 * candle_encoder_embed_tokens, _classify_tokens or _rerank_tokens call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

/* A pooled job bigger than this is freed instead of kept (one request of
 * thousands of long inputs should not pin its buffers). */
#define JOB_KEEP_BYTES (4u << 20)

/* One run of a job's inputs inside the batch. */
typedef struct part {
    srv_enc_job *job;
    int64_t i0, n, row; /* job inputs i0..i0+n-1 are batch rows row.. */
} part;

typedef struct srv_enc_batch {
    pthread_mutex_t mu;
    srv_enc_job *head, *tail; /* jobs with inputs not yet taken, in arrival order */
    bool busy;            /* a handler is computing a batch */
    int64_t max_tokens;
    srv_enc_job *pool;    /* idle jobs */
    /* The running batch (only its computing thread touches them). */
    const int32_t **ids;  /* [cap] */
    const int32_t **types; /* [cap] (rerank) */
    int64_t *n_ids;       /* [cap] */
    part *parts;          /* [cap] */
    int64_t cap, n_parts;
    float *out;           /* [cap_out] */
    size_t cap_out;
} srv_enc_batch;

/* Capacity for need elements in each array of arrs (elem bytes each), all
 * sharing *cap; false on memory (the arrays that grew stay valid). */
static bool grow(void **arrs[], const size_t elem[], int n_arrs, int64_t *cap, int64_t need) {
    if (need <= *cap) return true;
    int64_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    for (int a = 0; a < n_arrs; a++) {
        void *q = realloc(*arrs[a], (size_t)c * elem[a]);
        if (!q) return false;
        *arrs[a] = q;
    }
    *cap = c;
    return true;
}

static srv_enc_batch *batch_of(srv_ctx *c, srv_model *md) {
    srv_enc_batch *b = __atomic_load_n(&md->batch, __ATOMIC_ACQUIRE);
    if (b) return b;
    pthread_mutex_lock(&md->enc_mu);
    b = md->batch;
    if (!b && (b = calloc(1, sizeof *b))) {
        pthread_mutex_init(&b->mu, NULL);
        b->max_tokens = c->load.max_batch_tokens > 0 ? c->load.max_batch_tokens : SRV_MAX_BATCH_TOKENS;
        __atomic_store_n(&md->batch, b, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&md->enc_mu);
    return b;
}

static void job_free(srv_enc_job *j) {
    if (!j) return;
    free(j->tok);
    free(j->types);
    free(j->off);
    free(j->n_ids);
    free(j->out);
    pthread_cond_destroy(&j->cv);
    free(j);
}

srv_enc_job *srv_enc_job_get(srv_ctx *c, srv_model *md, srv_enc_kind kind, int64_t n, int64_t dim) {
    srv_enc_batch *b = batch_of(c, md);
    if (!b) return NULL;
    pthread_mutex_lock(&b->mu);
    srv_enc_job *j = b->pool;
    if (j) b->pool = j->link;
    pthread_mutex_unlock(&b->mu);
    if (!j) {
        if (!(j = calloc(1, sizeof *j))) return NULL;
        pthread_cond_init(&j->cv, NULL);
    }
    void **rows[] = {(void **)&j->off, (void **)&j->n_ids}, **outs[] = {(void **)&j->out};
    const size_t re[] = {sizeof *j->off, sizeof *j->n_ids}, oe[] = {sizeof *j->out};
    if (!grow(rows, re, 2, &j->cap_n, n) || !grow(outs, oe, 1, &j->cap_out, n * dim)) {
        job_free(j);
        return NULL;
    }
    j->kind = kind;
    j->n = n;
    j->dim = dim;
    j->used = 0;
    j->next = j->done = 0;
    j->status = CANDLE_OK;
    j->err[0] = 0;
    j->link = NULL;
    return j;
}

int32_t *srv_enc_job_room(srv_enc_job *j, size_t k) {
    void **a[] = {(void **)&j->tok, (void **)&j->types};
    const size_t e[] = {sizeof *j->tok, sizeof *j->types};
    int64_t cap = (int64_t)j->cap_tok;
    if (!grow(a, e, 2, &cap, (int64_t)(j->used + k))) return NULL;
    j->cap_tok = (size_t)cap;
    return j->tok + j->used;
}

void srv_enc_job_add(srv_enc_job *j, int64_t i, int64_t n_ids) {
    j->off[i] = (int64_t)j->used;
    j->n_ids[i] = n_ids;
    j->used += (size_t)n_ids;
}

void srv_enc_job_put(srv_model *md, srv_enc_job *j) {
    srv_enc_batch *b = md->batch;
    size_t bytes = j->cap_tok * 2 * sizeof *j->tok + (size_t)j->cap_n * 16 + (size_t)j->cap_out * sizeof *j->out;
    if (!b || bytes > JOB_KEEP_BYTES) {
        job_free(j);
        return;
    }
    pthread_mutex_lock(&b->mu);
    j->link = b->pool;
    b->pool = j;
    pthread_mutex_unlock(&b->mu);
}

/* Under b->mu: how many of j's untaken inputs fit beside *tokens (at
 * least one when the batch is empty). */
static int64_t fits(const srv_enc_batch *b, const srv_enc_job *j, int64_t rows, int64_t *tokens) {
    int64_t k = 0;
    while (j->next + k < j->n) {
        int64_t t = j->n_ids[j->next + k];
        if ((rows + k || *tokens) && *tokens + t > b->max_tokens) break;
        *tokens += t;
        k++;
    }
    return k;
}

/* Under b->mu: the next batch into b->ids/types/n_ids/parts (rows
 * returned, its tokens in *tokens): queued inputs in arrival order up to
 * the budget, from jobs of the head's kind and dimensions; jobs whose
 * inputs are all taken leave the queue. */
static int64_t take(srv_enc_batch *b, srv_enc_kind *kind, int64_t *dim, int64_t *tokens) {
    int64_t rows = 0;
    *tokens = 0;
    b->n_parts = 0;
    *kind = b->head->kind;
    *dim = b->head->dim;
    for (srv_enc_job *j = b->head; j; j = j->link) {
        if (j->kind != *kind || j->dim != *dim) continue;
        int64_t k = fits(b, j, rows, tokens);
        if (!k) break;
        void **a[] = {(void **)&b->ids, (void **)&b->types, (void **)&b->n_ids, (void **)&b->parts};
        const size_t e[] = {sizeof *b->ids, sizeof *b->types, sizeof *b->n_ids, sizeof *b->parts};
        if (!grow(a, e, 4, &b->cap, rows + k))
            break; /* out of memory: run what is there (an empty batch fails its head below) */
        for (int64_t i = 0; i < k; i++) {
            b->ids[rows + i] = j->tok + j->off[j->next + i];
            b->types[rows + i] = j->types + j->off[j->next + i];
            b->n_ids[rows + i] = j->n_ids[j->next + i];
        }
        b->parts[b->n_parts++] = (part){j, j->next, k, rows};
        j->next += k;
        rows += k;
        if (j->next < j->n) break; /* the budget is spent inside j */
    }
    srv_enc_job **pp = &b->head;
    b->tail = NULL;
    while (*pp) {
        if ((*pp)->next == (*pp)->n) *pp = (*pp)->link;
        else {
            b->tail = *pp;
            pp = &(*pp)->link;
        }
    }
    return rows;
}

/* One library call over the batch's rows into b->out (need floats). */
static candle_status compute(srv_model *md, srv_enc_batch *b, srv_enc_kind kind, int64_t rows, int64_t dim,
                             size_t need) {
    candle_status s;
    pthread_mutex_lock(&md->enc_mu);
    if (kind == SRV_ENC_CLASSIFY) {
        s = candle_encoder_classify_tokens(md->enc, b->ids, b->n_ids, rows, NULL, b->out, need);
    } else if (kind == SRV_ENC_RERANK) {
        s = candle_encoder_rerank_tokens(md->enc, b->ids, b->types, b->n_ids, rows, NULL, b->out);
    } else {
        candle_embed_params p = candle_embed_default_params();
        p.dimensions = dim;
        s = candle_encoder_embed_tokens(md->enc, b->ids, b->n_ids, rows, &p, b->out, need);
    }
    pthread_mutex_unlock(&md->enc_mu);
    return s;
}

/* Called with b->mu held and the batcher idle; returns with it held. */
static void run_batch(srv_model *md, srv_enc_batch *b) {
    srv_enc_kind kind;
    int64_t dim, tokens, rows = take(b, &kind, &dim, &tokens);
    b->busy = true;
    pthread_mutex_unlock(&b->mu);
    size_t need = (size_t)(rows * dim);
    candle_status s = CANDLE_OK;
    if (need > b->cap_out) {
        float *o = realloc(b->out, need * sizeof *o);
        if (o) {
            b->out = o;
            b->cap_out = need;
        } else {
            s = CANDLE_ERR_OOM;
        }
    }
    const char *msg = "out of memory";
    if (!s && rows) {
        double t0 = srv_now();
        for (int64_t k = 0; k < b->n_parts; k++) /* the requests this batch starts */
            if (b->parts[k].i0 == 0)
                srv_metrics_observe(&md->metrics, &md->metrics.enc_queue[kind], t0 - b->parts[k].job->queued);
        s = compute(md, b, kind, rows, dim, need);
        msg = candle_last_errmsg();
        /* every batch the library ran, failed ones too: its seconds were spent */
        srv_metrics_enc_batch(&md->metrics, kind, tokens, rows, b->n_parts, srv_now() - t0);
    } else if (!rows) {
        s = CANDLE_ERR_OOM;
    }
    pthread_mutex_lock(&b->mu);
    for (int64_t k = 0; k < b->n_parts; k++) {
        part *pt = &b->parts[k];
        srv_enc_job *j = pt->job;
        if (!s) memcpy(j->out + pt->i0 * dim, b->out + pt->row * dim, (size_t)(pt->n * dim) * sizeof *b->out);
        else if (!j->status) {
            j->status = s;
            snprintf(j->err, sizeof j->err, "%s", msg);
        }
        j->done += pt->n;
        if (j->done == j->n) pthread_cond_signal(&j->cv);
    }
    if (!rows && b->head) { /* nothing could be taken (memory): fail the head rather than spin */
        srv_enc_job *j = b->head;
        j->status = CANDLE_ERR_OOM;
        snprintf(j->err, sizeof j->err, "out of memory");
        j->done += j->n - j->next;
        j->next = j->n;
        if (!(b->head = j->link)) b->tail = NULL;
        pthread_cond_signal(&j->cv);
    }
    b->busy = false;
    /* the next batch's leader, unless this thread stays one (its job is
     * not done): waking only it, not every waiter, matters at many
     * clients with small batches */
    if (b->head) pthread_cond_signal(&b->head->cv);
}

candle_status srv_enc_job_run(srv_model *md, srv_enc_job *j) {
    srv_enc_batch *b = md->batch; /* made by srv_enc_job_get */
    pthread_mutex_lock(&b->mu);
    j->queued = srv_now();
    j->link = NULL;
    if (b->tail) b->tail->link = j;
    else b->head = j;
    b->tail = j;
    while (j->done < j->n) {
        if (!b->busy && b->head) run_batch(md, b);
        else pthread_cond_wait(&j->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return j->status;
}

void srv_enc_batch_free(srv_model *md) {
    srv_enc_batch *b = md->batch;
    if (!b) return;
    while (b->pool) {
        srv_enc_job *j = b->pool;
        b->pool = j->link;
        job_free(j);
    }
    free(b->ids);
    free(b->types);
    free(b->n_ids);
    free(b->parts);
    free(b->out);
    pthread_mutex_destroy(&b->mu);
    free(b);
    md->batch = NULL;
}
