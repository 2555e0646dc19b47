/* The draft lengths' cost model (candle/spec_cost.h): candle_spec's
 * cost-aware schedule and candle serve's for its greedy requests. */
#include "candle/spec_cost.h"

#include <stddef.h>

/* Older measurements weigh less: the acceptance follows the text (a quoted
 * span is kept whole, the prose after it is not), the times the machine. */
#define COST_DECAY 0.9
#define ACC_DECAY 0.7

/* Every step ages every line, the multi-row one too on one-row steps: a
 * slope measured on a busy moment must not outlive it. */
static void line_decay(candle_spec_line *c) {
    c->w *= COST_DECAY, c->sr *= COST_DECAY, c->st *= COST_DECAY;
    c->srr *= COST_DECAY, c->srt *= COST_DECAY;
}

static void line_add(candle_spec_line *c, double r, double secs) {
    line_decay(c);
    c->w += 1, c->sr += r, c->st += secs, c->srr += r * r, c->srt += r * secs;
    /* the range drifts back toward this step's rows so that it reflects the recent ones */
    c->r_lo = c->n ? (r < c->r_lo ? r : c->r_lo + 0.1 * (r - c->r_lo)) : r;
    c->r_hi = c->n ? (r > c->r_hi ? r : c->r_hi + 0.1 * (r - c->r_hi)) : r;
    c->n++;
    /* a new slope once the recent steps' rows differ; until then the last stands */
    double var = c->w * c->srr - c->sr * c->sr;
    if (c->n >= 4 && c->r_hi - c->r_lo >= 0.5 && var > 1e-9 * c->w * c->w) {
        c->b = (c->w * c->srt - c->sr * c->st) / var;
        c->b = c->b > 0 ? c->b : 0;
        c->fitted = true;
    }
}

/* The line through c's decayed means with slope b. */
static double line_at(const candle_spec_line *c, double b, double r) {
    return (c->st - b * c->sr) / c->w + b * r;
}

void candle_spec_times_step(candle_spec_times *c, int64_t rows, double secs) {
    if (!c || rows < 1) return;
    line_add(&c->all, (double)rows, secs);
    if (rows > 1) line_add(&c->multi, (double)rows, secs);
    else line_decay(&c->multi);
    c->w1 = COST_DECAY * c->w1 + (rows == 1);
    c->st1 = COST_DECAY * c->st1 + (rows == 1 ? secs : 0);
}

/* Multi-row steps by their own line while there are recent ones (its slope
 * at most every step's: the cost per row only falls past the first; a
 * slope left from a busy moment, long ago, would outweigh the probe that
 * comes after it), else by every step's line; one-row steps by their mean
 * while there are recent ones, at most a two-row step's (a mean kept
 * through a run of drafting steps outlived the machine's speed: one-row
 * steps taken on a slow moment then cost more than the two-row steps
 * measured since, and every step drafted). */
double candle_spec_times_estimate(const candle_spec_times *c, int64_t rows) {
    if (!c || !c->all.fitted) return 0;
    if (rows == 1 && c->w1 > 0.05) {
        double t2 = candle_spec_times_estimate(c, 2);
        return c->st1 / c->w1 < t2 ? c->st1 / c->w1 : t2;
    }
    const candle_spec_line *m = &c->multi;
    if (rows > 1 && m->fitted && m->w > 0.05) return line_at(m, m->b < c->all.b ? m->b : c->all.b, (double)rows);
    return line_at(&c->all, c->all.b, (double)rows);
}

void candle_spec_times_draft(candle_spec_times *c, int32_t nd, int64_t span, double first, double total) {
    if (!c || nd < 1) return;
    if (span > CANDLE_SPEC_STEADY_SPAN) {
        /* a long catch-up (the prompt, the tokens of a pause) is paid once:
         * it prices no later draft, and guesses the first token's seconds
         * only while none is measured, optimistically (its seconds per
         * token for a steady span of 2, the last draft and the token after
         * it; a batch's tokens cost less each than a step's). A guess too
         * high is never corrected: it stops the drafting that would measure
         * it (a server's draft model reading the prompt while its weights
         * paged in priced every later draft out) */
        if (c->draft_first <= 0) {
            c->draft_first = first * 2 / (double)span;
            c->first_guessed = true;
        }
    } else if (c->draft_first <= 0 || c->first_guessed) {
        c->draft_first = first;
        c->first_guessed = false;
    } else {
        c->draft_first = 0.8 * c->draft_first + 0.2 * first;
    }
    if (nd < 2) return;
    double next = (total - first) / (nd - 1);
    c->draft_next = c->draft_next > 0 ? 0.8 * c->draft_next + 0.2 * next : next;
}

void candle_spec_accept_add(candle_spec_accept *a, int32_t tried, int32_t kept) {
    if (!a || tried < 1) return;
    a->first_tried = ACC_DECAY * a->first_tried + 1;
    a->first_kept = ACC_DECAY * a->first_kept + (kept > 0);
    if (kept < 1) return; /* nothing after a kept one was verified */
    a->next_tried = ACC_DECAY * a->next_tried + (tried - 1);
    a->next_kept = ACC_DECAY * a->next_kept + (kept - 1);
}

double candle_spec_accept_tokens(const candle_spec_accept *a, int32_t k) {
    if (!a || k < 1) return 1;
    /* a prior of one half for the first, weighing a quarter of a draft (the
     * decay keeps about 3 drafts' worth: a whole one would hold a refusing
     * sequence at 12%); the first's rate for the later ones, weighing one */
    double a1 = (a->first_kept + 0.125) / (a->first_tried + 0.25);
    double a2 = (a->next_kept + a1) / (a->next_tried + 1);
    a1 = a1 < 0.999 ? a1 : 0.999;
    a2 = a2 < 0.999 ? a2 : 0.999;
    double g = 0, p = 1;
    for (int32_t j = 0; j < k; j++, p *= a2) g += p; /* 1 + a2 + .. a2^(k-1) */
    return 1 + a1 * g;
}

/* One sequence's part of a step at length k: its expected tokens and its
 * drafting's seconds. */
static void part(const candle_spec_times *c, const candle_spec_accept *a, int32_t k, double *tokens,
                 double *secs) {
    *tokens = candle_spec_accept_tokens(a, k);
    *secs = k ? c->draft_first + (double)(k - 1) * c->draft_next : 0;
}

/* The step's rate is (G + g_i(k)) / (t(R + k) + D + d_i(k)) with the others'
 * tokens in G, rows in R and drafting in D: each sequence in turn takes its
 * best length with the others' fixed, twice over (one sequence: once, which
 * is the exhaustive choice). */
bool candle_spec_cost_lengths(const candle_spec_times *c, int32_t n, const candle_spec_accept *acc,
                              const int32_t *k_max, int64_t rows_fixed, double tokens_fixed, int32_t *k) {
    if (!c || n < 1 || !acc || !k_max || !k || !c->all.fitted) return false;
    int64_t R = rows_fixed + n;
    double G = tokens_fixed + n, D = 0;
    for (int32_t i = 0; i < n; i++) k[i] = 0;
    for (int pass = 0; pass < (n > 1 ? 2 : 1); pass++) {
        for (int32_t i = 0; i < n; i++) {
            const candle_spec_accept *a = &acc[i];
            double g, d;
            part(c, a, k[i], &g, &d);
            G -= g, D -= d, R -= k[i];
            int32_t best = 0;
            double best_rate = 0;
            for (int32_t kk = 0; kk <= k_max[i]; kk++) {
                part(c, a, kk, &g, &d);
                double t = candle_spec_times_estimate(c, R + kk) + D + d;
                if (t <= 0) continue;
                if ((G + g) / t > best_rate * (1 + 1e-9)) best_rate = (G + g) / t, best = kk;
            }
            k[i] = best;
            part(c, a, best, &g, &d);
            G += g, D += d, R += best;
        }
    }
    return true;
}

int32_t candle_spec_warmup_length(bool draft_model, int64_t step) {
    return draft_model ? (int32_t)(step % 2) : 1 + (int32_t)(step % 3);
}

bool candle_spec_probe(candle_spec_accept *a) {
    if (!a || a->probe_wait <= 0) return a != NULL;
    a->probe_wait--;
    return false;
}

/* A kept probe doubles the wait too: it raised the acceptance the next
 * choice weighs, so if that choice is still 0 the times are what keep it
 * there, and each probe costs a step of two rows plus the draft model's
 * catching up on the tokens since the last (probes every 8 steps took
 * Qwen2.5-Coder-1.5B with the 0.5B draft to 0.70x of plain on code, 95% of
 * them kept). */
void candle_spec_probe_done(candle_spec_accept *a) {
    if (!a) return;
    int32_t gap = a->probe_gap;
    a->probe_gap = a->probe_wait = gap < 8 ? 8 : gap < 128 ? 2 * gap : 256;
}
