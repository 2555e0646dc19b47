/* Samplers, in llama.cpp's order: penalties, top-k, top-p, min-p,
 * temperature, then a seeded draw. top-p and min-p look at the distribution
 * before temperature, so a temperature change does not move their cut. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "candle/sampler.h"
#include "nn-impl.h"

typedef struct cand {
    int32_t id;
    float logit;
    double p;
} cand;

typedef struct spec_req spec_req;

struct candle_sampler {
    candle_sampler_params p;
    int32_t n_vocab;
    cand *cands;      /* [n_vocab] scratch */
    int32_t *counts;  /* [n_vocab] scratch, zero between calls */
    int32_t *history; /* ring of the last penalty_last_n accepted tokens */
    int32_t n_hist, hist_head;
    uint64_t rng[4]; /* xoshiro256** state */
    candle_grammar_state *grammar; /* optional constraint, not owned */
    const candle_grammar_vocab *gvocab;
    float *masked; /* [n_vocab] logits with the grammar's mask, allocated on first use */
    int32_t *bias_tok; /* [n_bias] logit_bias tokens */
    float *bias_val;   /* [n_bias] their biases */
    int32_t n_bias;
    float *biased; /* [n_vocab] logits plus the biases, allocated on first use */
    float *lpbuf;  /* [n_vocab] penalised logits in id order for logprobs, allocated on first use */
    spec_req *spec; /* set for the length of one speculative call, else NULL */
};

/* What candle_sampler_sample_logprobs asks of one step. */
typedef struct lp_req {
    int32_t n_top;
    candle_token_logprob *chosen, *top;
    int32_t *n_out;
    double lse; /* log of the normaliser, set by lp_prepare */
} lp_req;

/* What a speculative-decoding call asks of the final draw, in place of a
 * plain draw: the distribution written out (a draft model's q), or a drafted
 * token tested against it. */
struct spec_req {
    float *probs;    /* [n_vocab]: the distribution drawn from, written; NULL: verify */
    int32_t draft;   /* verify: the drafted token */
    const float *q;  /* verify: the draft's distribution [n_vocab]; NULL: a point mass */
    bool accepted;
};

static bool in_range(float v, float lo, float hi) { return v >= lo && v <= hi; } /* NaN: false */

static candle_status range_err(const char *field, double v, const char *want) {
    return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "sampler: %s %g is out of range (%s)",
                            field, v, want);
}

candle_status candle_sampler_params_check(const candle_sampler_params *p) {
    if (!p) return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "sampler: NULL params");
    if (!in_range(p->temp, 0, 10)) return range_err("temperature", p->temp, "0 to 10; 0 is greedy");
    if (p->top_k < 0) return range_err("top_k", p->top_k, "0 or more; 0 is off");
    if (!in_range(p->top_p, 0, 1)) return range_err("top_p", p->top_p, "0 to 1; 1 is off");
    if (!in_range(p->min_p, 0, 1)) return range_err("min_p", p->min_p, "0 to 1; 0 is off");
    if (!in_range(p->repeat_penalty, 1e-6f, 10) )
        return range_err("repeat_penalty", p->repeat_penalty, "above 0, at most 10; 1 is off");
    if (!in_range(p->presence_penalty, -2, 2))
        return range_err("presence_penalty", p->presence_penalty, "-2 to 2; 0 is off");
    if (!in_range(p->frequency_penalty, -2, 2))
        return range_err("frequency_penalty", p->frequency_penalty, "-2 to 2; 0 is off");
    if (p->penalty_last_n < 0)
        return range_err("repeat_last_n", p->penalty_last_n, "0 or more; 0 is off");
    return CANDLE_OK;
}

candle_sampler_params candle_sampler_default_params(void) {
    return (candle_sampler_params){.temp = 0.8f,
                                   .top_k = 40,
                                   .top_p = 0.95f,
                                   .min_p = 0.05f,
                                   .repeat_penalty = 1.0f,
                                   .presence_penalty = 0.0f,
                                   .frequency_penalty = 0.0f,
                                   .penalty_last_n = 64,
                                   .seed = 0};
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

void candle_sampler_reset(candle_sampler *s) {
    if (!s) return;
    s->n_hist = s->hist_head = 0;
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

candle_status candle_sampler_init(candle_sampler **out, int32_t n_vocab,
                                  const candle_sampler_params *p) {
    if (!out || n_vocab <= 0)
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "sampler: n_vocab %d must be > 0",
                                (int)n_vocab);
    *out = NULL;
    candle_sampler *s = calloc(1, sizeof *s);
    if (!s) return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: sampler");
    s->p = p ? *p : candle_sampler_default_params();
    if (s->p.penalty_last_n < 0) s->p.penalty_last_n = 0;
    s->n_vocab = n_vocab;
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->history = malloc((size_t)(s->p.penalty_last_n + 1) * sizeof *s->history);
    if (!s->cands || !s->counts || !s->history) {
        candle_sampler_free(s);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: sampler");
    }
    candle_sampler_reset(s);
    *out = s;
    return CANDLE_OK;
}

void candle_sampler_free(candle_sampler *s) {
    if (!s) return;
    free(s->cands);
    free(s->counts);
    free(s->history);
    free(s->masked);
    free(s->bias_tok);
    free(s->bias_val);
    free(s->biased);
    free(s->lpbuf);
    free(s);
}

void candle_sampler_accept(candle_sampler *s, int32_t token) {
    if (!s || s->p.penalty_last_n == 0 || token < 0 || token >= s->n_vocab) return;
    s->history[s->hist_head] = token;
    s->hist_head = (s->hist_head + 1) % s->p.penalty_last_n;
    if (s->n_hist < s->p.penalty_last_n) s->n_hist++;
}

static bool penalties_on(const candle_sampler_params *p) {
    return p->penalty_last_n > 0 &&
           (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
}

static void apply_penalties(candle_sampler *s) {
    for (int32_t i = 0; i < s->n_hist; i++) s->counts[s->history[i]]++;
    for (int32_t i = 0; i < s->n_hist; i++) {
        int32_t id = s->history[i], c = s->counts[id];
        if (c == 0) continue; /* already applied for this id */
        float *l = &s->cands[id].logit;
        if (*l > 0) *l /= s->p.repeat_penalty;
        else *l *= s->p.repeat_penalty;
        *l -= (float)c * s->p.frequency_penalty + s->p.presence_penalty;
        s->counts[id] = 0;
    }
}

/* Descending logit, ties to the lower id, so results do not depend on qsort. */
static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Move the k best to the front, sorted: a min-heap keeps selection O(n log k). */
static void select_top_k(cand *c, int32_t n, int32_t k) {
    for (int32_t i = k / 2 - 1; i >= 0; i--) { /* heapify c[0..k) as a min-heap on order */
        for (int32_t j = i;;) {
            int32_t m = j, l = 2 * j + 1, r = l + 1;
            if (l < k && cmp_cand(&c[l], &c[m]) > 0) m = l;
            if (r < k && cmp_cand(&c[r], &c[m]) > 0) m = r;
            if (m == j) break;
            cand t = c[j]; c[j] = c[m]; c[m] = t;
            j = m;
        }
    }
    for (int32_t i = k; i < n; i++) {
        if (cmp_cand(&c[i], &c[0]) >= 0) continue; /* not better than the worst kept */
        cand t = c[0]; c[0] = c[i]; c[i] = t;
        for (int32_t j = 0;;) {
            int32_t m = j, l = 2 * j + 1, r = l + 1;
            if (l < k && cmp_cand(&c[l], &c[m]) > 0) m = l;
            if (r < k && cmp_cand(&c[r], &c[m]) > 0) m = r;
            if (m == j) break;
            cand u = c[j]; c[j] = c[m]; c[m] = u;
            j = m;
        }
    }
    qsort(c, (size_t)k, sizeof *c, cmp_cand);
}

/* Probabilities of c[0..n) (sorted, best first) at temperature t. */
static void softmax_sorted(cand *c, int32_t n, double t) {
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += c[i].p = exp(((double)c[i].logit - c[0].logit) / t);
    for (int32_t i = 0; i < n; i++) c[i].p /= sum;
}

static int32_t greedy(const cand *c, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (c[i].logit > c[best].logit) best = i;
    return c[best].id;
}

/* The first largest logit (NaN never wins; logits[0] NaN gives 0), one
 * element after the other. */
static int32_t argmax_serial(const float *logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Lanes of the vectorized argmax: the compiler turns the lane loop into
 * vector compares and selects (the serial loop is one dependent load, compare
 * and select per element: 28 us per 49152-entry row, 0.46 ms per 16-row
 * server step; this one 8 us). */
#define ARGMAX_LANES 16

/* The same index as argmax_serial, read in place: greedy decoding without
 * penalties (every decode row of a server step) needs no candidate copy.
 * Lane j keeps the largest of elements j, j + L, ... and the first index
 * holding it (strict >: NaN never enters, the first of equals stays); the
 * largest lane value, at its smallest index, is then the first largest of the
 * whole row. A lane that saw only -inf and NaN holds no index; when no lane
 * holds one (no logit above -inf), the serial loop decides. */
static int32_t argmax(const float *logits, int32_t n) {
    if (n < 4 * ARGMAX_LANES || logits[0] != logits[0]) return argmax_serial(logits, n);
    float m[ARGMAX_LANES];
    int32_t at[ARGMAX_LANES];
    for (int j = 0; j < ARGMAX_LANES; j++) {
        m[j] = -INFINITY;
        at[j] = INT32_MAX;
    }
    int32_t i = 0;
    for (; i + ARGMAX_LANES <= n; i += ARGMAX_LANES)
        for (int j = 0; j < ARGMAX_LANES; j++) {
            float v = logits[i + j];
            at[j] = v > m[j] ? i + j : at[j];
            m[j] = v > m[j] ? v : m[j];
        }
    float bm = -INFINITY;
    int32_t best = INT32_MAX;
    for (int j = 0; j < ARGMAX_LANES; j++)
        if (at[j] != INT32_MAX && (m[j] > bm || (m[j] == bm && at[j] < best))) {
            bm = m[j];
            best = at[j];
        }
    for (; i < n; i++) /* the tail: later indices, so only a larger value wins */
        if (logits[i] > bm) {
            bm = logits[i];
            best = i;
        }
    return best == INT32_MAX ? argmax_serial(logits, n) : best;
}

void candle_sampler_set_grammar(candle_sampler *s, candle_grammar_state *g,
                                const candle_grammar_vocab *v) {
    if (!s) return;
    s->grammar = g && v ? g : NULL;
    s->gvocab = g && v ? v : NULL;
    free(s->masked); /* sized for the vocabulary on next use */
    s->masked = NULL;
}

candle_status candle_sampler_set_logit_bias(candle_sampler *s, const int32_t *tokens,
                                            const float *bias, int32_t n) {
    if (!s || n < 0 || (n > 0 && (!tokens || !bias)))
        return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "sampler: logit_bias: NULL or negative count");
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= s->n_vocab)
            return cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG,
                                 "sampler: logit_bias token %d is not in [0, %d)", (int)tokens[i],
                                 (int)s->n_vocab);
        if (!in_range(bias[i], -100, 100))
            return range_err("logit_bias", bias[i], "-100 to 100");
    }
    int32_t *t = n ? malloc((size_t)n * sizeof *t) : NULL;
    float *b = n ? malloc((size_t)n * sizeof *b) : NULL;
    if (n && (!t || !b)) {
        free(t);
        free(b);
        return cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: sampler logit_bias");
    }
    if (n) {
        memcpy(t, tokens, (size_t)n * sizeof *t);
        memcpy(b, bias, (size_t)n * sizeof *b);
    }
    free(s->bias_tok);
    free(s->bias_val);
    s->bias_tok = t;
    s->bias_val = b;
    s->n_bias = n;
    return CANDLE_OK;
}

/* --- log-probabilities ------------------------------------------------------ */

/* e^x for x <= 0 without a call, so that the loop over a vocabulary
 * vectorizes (glibc's exp took 8 ns a logit, 0.4 ms a 49152-token step):
 * x = k ln2 + r with |r| <= ln2 / 2, e^r by its degree-6 Taylor polynomial
 * (relative error below 2e-7), 2^k from the exponent bits. Below -87 (and
 * -inf, NaN) it gives e^-87, about 1.6e-38: nothing beside the maximum's 1 in
 * a sum. */
static inline float exp_nonpos(float x) {
    /* below -87 (bits above -87's among the negatives), -inf and NaN become
     * -87; in integer operations without a branch or a float compare (which
     * may trap, so the compiler would not make it a vector select) */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t bad = (uint32_t)(u > 0xC2AE0000u) | (uint32_t)(u - 1u < 0x7FFFFFFFu); /* or a positive NaN */
    uint32_t mask = 0u - bad;
    u = (u & ~mask) | (0xC2AE0000u & mask);
    memcpy(&x, &u, sizeof x);
    float k = (x * 1.44269504f + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 */
    float r = x - k * 0.693145752f - k * 1.42860677e-6f;     /* ln2 in two parts */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 +
                                                                              r * (1.0f / 720))))));
    int32_t bits = ((int32_t)k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* The sum of e^(x[i] - m) over x[0..n), every x <= m: eight independent
 * float lanes (a reduction the compiler may vectorize without reassociating)
 * over blocks of 256, each lane's 32 terms added into a double, so the sum's
 * relative error stays below 32 float roundings (2e-6). */
#define EXP_BLOCK 256
static double exp_sum(const float *x, int32_t n, float m) {
    double sum = 0;
    int32_t i = 0;
    for (; i + EXP_BLOCK <= n; i += EXP_BLOCK) {
        float acc[8] = {0};
        for (int32_t b = 0; b < EXP_BLOCK; b += 8)
            for (int j = 0; j < 8; j++) acc[j] += exp_nonpos(x[i + b + j] - m);
        for (int j = 0; j < 8; j++) sum += (double)acc[j];
    }
    for (; i < n; i++) sum += (double)exp_nonpos(x[i] - m);
    return sum;
}

/* The largest of x[0..16) (NaN never wins: it fails every compare). */
#define TOP_BLOCK 16
static float block_max(const float *x) {
    float mx[TOP_BLOCK];
    for (int j = 0; j < TOP_BLOCK; j++) mx[j] = x[j];
    float best = -INFINITY;
    for (int j = 0; j < TOP_BLOCK; j++) best = mx[j] > best ? mx[j] : best;
    return best;
}

/* The top n_top tokens into lp->top and the log-normaliser into lp->lse,
 * over the float row f, or else the candidates c (still in id order: before
 * any selection or sort) copied to buf. best: f's argmax if known, or -1.
 * Passes: the maximum (vectorized argmax), the best few (blocks whose
 * maximum cannot enter the list skipped), the sum of exponentials
 * (vectorized). NaN counts as -inf: never reported, in the sum as e^-87. */
static void lp_prepare(lp_req *lp, const float *f, const cand *c, float *buf, int32_t n, int32_t best) {
    int32_t k = 0, want = lp->n_top;
    candle_token_logprob *top = lp->top;
    if (!f) {
        for (int32_t i = 0; i < n; i++) buf[i] = c[i].logit;
        f = buf;
    }
    float m = f[best >= 0 ? best : argmax(f, n)];
    /* the best few: a block of 16 is looked at one by one only when its
     * maximum would enter the list (after the first blocks, hardly ever) */
    for (int32_t i0 = 0; want > 0 && i0 < n; i0 += TOP_BLOCK) {
        int32_t end = i0 + TOP_BLOCK <= n ? i0 + TOP_BLOCK : n;
        if (end - i0 == TOP_BLOCK && k == want && !(block_max(f + i0) > top[k - 1].logprob)) continue;
        for (int32_t i = i0; i < end; i++) {
            float v = f[i];
            if (!(v > -INFINITY) || (k == want && !(v > top[k - 1].logprob))) continue;
            int32_t j = k < want ? k++ : want - 1; /* the slot freed at the end */
            while (j > 0 && top[j - 1].logprob < v) { /* equal ones stay first: lower ids */
                top[j] = top[j - 1];
                j--;
            }
            top[j] = (candle_token_logprob){i, v};
        }
    }
    lp->lse = m > -INFINITY ? (double)m + log(exp_sum(f, n, m)) : INFINITY;
    for (int32_t i = 0; i < k; i++) top[i].logprob = (float)((double)top[i].logprob - lp->lse);
    if (lp->n_out) *lp->n_out = k;
}

static int32_t lp_finish(lp_req *lp, int32_t id, float logit) {
    if (lp && lp->chosen)
        *lp->chosen = (candle_token_logprob){
            id, logit > -INFINITY && lp->lse < INFINITY ? (float)((double)logit - lp->lse) : -INFINITY};
    return id;
}

static int32_t sample_logits(candle_sampler *s, const float *logits, lp_req *lp);

/* A deterministic (greedy) choice under a speculative call: its
 * distribution is the point mass at id, so a draft is accepted exactly
 * when it is id, and the residual max(0, p - q) is that point mass again. */
static int32_t spec_point(candle_sampler *s, int32_t id) {
    spec_req *q = s->spec;
    if (!q) return id;
    if (q->probs) {
        memset(q->probs, 0, (size_t)s->n_vocab * sizeof *q->probs);
        q->probs[id] = 1.0f;
    } else {
        q->accepted = id == q->draft;
    }
    return id;
}

/* p - q at candidate c (q a point mass at the draft when q->q is NULL). */
static double residual(const spec_req *q, const cand *c) {
    double qi = q->q ? (double)q->q[c->id] : (double)(c->id == q->draft);
    return c->p - qi;
}

/* The speculative test of q->draft against the final distribution c[0..n)
 * (Leviathan et al. 2023, Chen et al. 2023): accepted with probability
 * min(1, p(d) / q(d)); otherwise a token drawn from max(0, p - q)
 * normalised. Either way the token returned has distribution p, whatever q
 * the draft was drawn from. q(d) = 0 (a draft that q could not draw) is
 * accepted exactly when p(d) > 0. -1 means "draw from p as usual" (the
 * distribution write-out, or a residual lost to rounding). */
static int32_t spec_draw(candle_sampler *s, const cand *c, int32_t n, lp_req *lp) {
    spec_req *q = s->spec;
    if (q->probs) {
        memset(q->probs, 0, (size_t)s->n_vocab * sizeof *q->probs);
        for (int32_t i = 0; i < n; i++) q->probs[c[i].id] = (float)c[i].p;
        return -1;
    }
    int32_t at = -1;
    for (int32_t i = 0; i < n && at < 0; i++)
        if (c[i].id == q->draft) at = i;
    double pd = at >= 0 ? c[at].p : 0, qd = q->q ? (double)q->q[q->draft] : 1.0;
    double u = next_unit(s->rng);
    q->accepted = pd > 0 && (qd <= 0 || u * qd < pd);
    if (q->accepted) return lp_finish(lp, q->draft, c[at].logit);
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        double r = residual(q, &c[i]);
        if (r > 0) sum += r;
    }
    if (!(sum > 0)) return -1;
    double v = next_unit(s->rng) * sum, cum = 0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        double r = residual(q, &c[i]);
        if (r <= 0) continue;
        last = i;
        cum += r;
        if (v < cum) break;
    }
    return lp_finish(lp, c[last].id, c[last].logit);
}

/* The bias, then the grammar, then sample_logits. */
static int32_t sample_impl(candle_sampler *s, const float *logits, lp_req *lp) {
    if (s->n_bias) {
        if (!s->biased && !(s->biased = malloc((size_t)s->n_vocab * sizeof *s->biased))) {
            cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: sampler logit_bias");
            return -1;
        }
        memcpy(s->biased, logits, (size_t)s->n_vocab * sizeof *logits);
        for (int32_t i = 0; i < s->n_bias; i++) s->biased[s->bias_tok[i]] += s->bias_val[i];
        logits = s->biased;
    }
    if (!s->grammar) return sample_logits(s, logits, lp);
    /* Greedy: the best token is the masked argmax whenever the grammar
     * allows it, and checking one token is much cheaper than the mask (not
     * with logprobs: their normaliser needs every allowed token). */
    if (!lp && s->p.temp <= 0 && !penalties_on(&s->p)) {
        int32_t best = argmax(logits, s->n_vocab);
        if (logits[best] > -INFINITY && candle_grammar_token_ok(s->grammar, s->gvocab, best))
            return spec_point(s, best);
    }
    int32_t nv = candle_grammar_vocab_n(s->gvocab);
    size_t n_buf = (size_t)(nv > s->n_vocab ? nv : s->n_vocab); /* the mask writes nv entries */
    if (!s->masked && !(s->masked = calloc(n_buf, sizeof *s->masked))) {
        cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: sampler grammar mask");
        return -1;
    }
    /* top-k sampling without penalties depends only on the top_k best
     * allowed tokens: when the 4 * top_k best tokens hold that many allowed
     * ones, they are the top_k best allowed ones, and checking those few
     * gives the distribution the full mask would (inside a JSON string,
     * where nearly every token is allowed, the full mask walks the whole
     * vocabulary). */
    int32_t k = s->p.top_k, kk = 4 * k;
    if (!lp && k > 0 && kk < s->n_vocab && !penalties_on(&s->p)) {
        cand *c = s->cands;
        for (int32_t i = 0; i < s->n_vocab; i++) c[i] = (cand){i, logits[i], 0};
        select_top_k(c, s->n_vocab, kk);
        int32_t found = 0;
        for (int32_t i = 0; i < kk && found < k; i++)
            if (c[i].id < nv && c[i].logit > -INFINITY &&
                candle_grammar_token_ok(s->grammar, s->gvocab, c[i].id))
                c[found++] = c[i];
        if (found == k) {
            for (int32_t i = 0; i < s->n_vocab; i++) s->masked[i] = -INFINITY;
            for (int32_t i = 0; i < k; i++) s->masked[c[i].id] = c[i].logit;
            return sample_logits(s, s->masked, NULL);
        }
    }
    memcpy(s->masked, logits, (size_t)s->n_vocab * sizeof *logits);
    for (int32_t i = nv; i < s->n_vocab; i++) s->masked[i] = -INFINITY;
    if (candle_grammar_mask(s->grammar, s->gvocab, s->masked, NULL)) return -1;
    return sample_logits(s, s->masked, lp);
}

int32_t candle_sampler_sample(candle_sampler *s, const float *logits) {
    return sample_impl(s, logits, NULL);
}

int32_t candle_sampler_sample_probs(candle_sampler *s, const float *logits, float *probs) {
    spec_req q = {.probs = probs};
    s->spec = probs ? &q : NULL;
    int32_t id = sample_impl(s, logits, NULL);
    s->spec = NULL;
    return id;
}

int32_t candle_sampler_verify(candle_sampler *s, const float *logits, int32_t draft, const float *q,
                              bool *accepted) {
    if (accepted) *accepted = false;
    if (draft < 0 || draft >= s->n_vocab) {
        cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "sampler: draft token %d is not in [0, %d)",
                      (int)draft, (int)s->n_vocab);
        return -1;
    }
    spec_req r = {.draft = draft, .q = q};
    s->spec = &r;
    int32_t id = sample_impl(s, logits, NULL);
    s->spec = NULL;
    if (accepted) *accepted = id >= 0 && r.accepted;
    return id;
}

bool cdl_sampler_draws(const candle_sampler *s) { return s->p.temp > 0; }

candle_grammar_state *cdl_sampler_grammar(const candle_sampler *s, const candle_grammar_vocab **v) {
    if (v) *v = s ? s->gvocab : NULL;
    return s ? s->grammar : NULL;
}

int32_t candle_sampler_sample_logprobs(candle_sampler *s, const float *logits, int32_t n_top,
                                       candle_token_logprob *chosen, candle_token_logprob *top,
                                       int32_t *n_top_out) {
    if (n_top < 0 || n_top > CANDLE_MAX_TOP_LOGPROBS || (n_top > 0 && !top)) {
        cdl_set_error(NULL, CANDLE_ERR_INVALID_ARG, "sampler: top logprobs %d is not in [0, %d]",
                      (int)n_top, CANDLE_MAX_TOP_LOGPROBS);
        return -1;
    }
    lp_req lp = {n_top, chosen, top, n_top_out, 0};
    return sample_impl(s, logits, &lp);
}

static int32_t sample_logits(candle_sampler *s, const float *logits, lp_req *lp) {
    cand *c = s->cands;
    int32_t n = s->n_vocab;
    bool penalties = penalties_on(&s->p);
    if (s->p.temp <= 0 && !penalties) {
        int32_t id = spec_point(s, argmax(logits, n));
        if (lp) lp_prepare(lp, logits, NULL, NULL, n, id);
        return lp_finish(lp, id, logits[id]);
    }
    for (int32_t i = 0; i < n; i++) c[i] = (cand){i, logits[i], 0};
    if (penalties) apply_penalties(s);
    if (lp) { /* the final logits, before truncation */
        if (!s->lpbuf && !(s->lpbuf = malloc((size_t)n * sizeof *s->lpbuf))) {
            cdl_set_error(NULL, CANDLE_ERR_OOM, "out of memory: sampler logprobs");
            return -1;
        }
        lp_prepare(lp, NULL, c, s->lpbuf, n, -1);
    }
    if (s->p.temp <= 0) {
        int32_t id = spec_point(s, greedy(c, n));
        return lp_finish(lp, id, c[id].logit);
    }
    if (s->p.top_k > 0 && s->p.top_k < n) {
        select_top_k(c, n, s->p.top_k);
        n = s->p.top_k;
    } else {
        qsort(c, (size_t)n, sizeof *c, cmp_cand);
    }
    softmax_sorted(c, n, 1.0);
    if (s->p.top_p < 1.0f) {
        double cum = 0;
        int32_t keep = n;
        for (int32_t i = 0; i < n; i++) {
            cum += c[i].p;
            if (cum >= s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (s->p.min_p > 0) {
        int32_t keep = 1;
        while (keep < n && c[keep].p >= s->p.min_p * c[0].p) keep++;
        n = keep;
    }
    softmax_sorted(c, n, s->p.temp);
    if (s->spec) {
        int32_t id = spec_draw(s, c, n, lp);
        if (id >= 0) return id;
    }
    double u = next_unit(s->rng), cum = 0;
    for (int32_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (u < cum) return lp_finish(lp, c[i].id, c[i].logit);
    }
    while (n > 1 && c[n - 1].p == 0) n--; /* rounding: never a token of probability 0 (masked) */
    return lp_finish(lp, c[n - 1].id, c[n - 1].logit);
}
