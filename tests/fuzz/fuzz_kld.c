/* libFuzzer target for the KL-divergence base file (src/formats/kld_base.c,
 * format in include/candle/kld.h), which `candle perplexity --kl-divergence`
 * reads from wherever it is told. Beyond "no crash":
 * - an opened file's header is consistent (rows, sizes, first = n_ctx/2) and
 *   its token ids lie below n_vocab;
 * - every row read gives finite log-probabilities that sum to 1 (to 1e-4)
 *   with the argmax's the largest;
 * - finish succeeds only once every row is read, and a second finish or read
 *   after it fails without harm;
 * - a file that reads through is written again by the writer from the rows'
 *   log-probabilities and reads back with the same header, tokens and
 *   argmaxes, the log-probabilities within the codes' step.
 * Seeds: tests/fuzz/gen_kld_corpus.py. Built with -DCANDLE_FUZZ=ON. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/kld.h"
#include "fuzz-check.h"

static void round_trip(const candle_kld_header *h, const int32_t *tokens, const float *all,
                       const candle_kld_row *rows) {
    int64_t V = h->n_vocab, n = candle_kld_n_rows(h);
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_kld.%d", (int)getpid());
    candle_kld_writer *w;
    check(candle_kld_create(&w, path, h, tokens) == CANDLE_OK);
    for (int64_t r = 0; r < n; r++) {
        /* the next token: one whose log-prob is the row's logp_next's nearest */
        int32_t next = rows[r].argmax;
        check(candle_kld_write_row(w, all + r * V, next) == CANDLE_OK);
    }
    check(candle_kld_commit(w, true) == CANDLE_OK);
    candle_kld_reader *rd;
    check(candle_kld_open(&rd, path) == CANDLE_OK);
    const candle_kld_header *g = candle_kld_header_of(rd);
    check(!memcmp(g, h, sizeof *h));
    check(!memcmp(candle_kld_tokens(rd), tokens, (size_t)h->n_tokens * sizeof *tokens));
    float *lp = malloc((size_t)V * sizeof *lp);
    check(lp != NULL);
    for (int64_t r = 0; r < n; r++) {
        candle_kld_row row;
        check(candle_kld_read_row(rd, lp, &row) == CANDLE_OK);
        /* ties among the codes may move the argmax to an equal one */
        check(fabsf(all[r * V + row.argmax] - all[r * V + rows[r].argmax]) <= 1e-3f);
        for (int64_t i = 0; i < V; i++) {
            float want = all[r * V + i];
            /* clamped codes (more than 64 below the top) read higher */
            if (want > all[r * V + rows[r].argmax] - 60.0f) check(fabsf(lp[i] - want) <= 2e-3f);
        }
    }
    check(candle_kld_finish(rd) == CANDLE_OK);
    free(lp);
    candle_kld_close(rd);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    candle_kld_reader *rd;
    if (candle_kld_open_memory(&rd, data, size) != CANDLE_OK) return 0;
    const candle_kld_header *h = candle_kld_header_of(rd);
    int64_t V = h->n_vocab, n = candle_kld_n_rows(h);
    check(V >= 2 && h->n_ctx >= 4 && h->first == h->n_ctx / 2 && h->n_chunk >= 1);
    check(h->n_chunk * h->n_ctx <= h->n_tokens);
    check((uint64_t)(56 + 4 * h->n_tokens + n * (16 + 2 * V) + 8) == size);
    const int32_t *tok = candle_kld_tokens(rd);
    for (int64_t i = 0; i < h->n_tokens; i++) check(tok[i] >= 0 && tok[i] < V);
    float *all = malloc((size_t)(n * V) * sizeof *all);
    candle_kld_row *rows = malloc((size_t)n * sizeof *rows);
    check(all && rows);
    check(candle_kld_finish(rd) != CANDLE_OK || n == 0); /* rows unread */
    int64_t r = 0;
    for (; r < n; r++) {
        float *lp = all + r * V;
        if (candle_kld_read_row(rd, lp, &rows[r]) != CANDLE_OK) break;
        check(rows[r].argmax >= 0 && rows[r].argmax < V);
        double sum = 0;
        for (int64_t i = 0; i < V; i++) {
            check(isfinite(lp[i]));
            check(lp[i] <= lp[rows[r].argmax]);
            sum += exp((double)lp[i]);
        }
        check(fabs(sum - 1) <= 1e-4);
    }
    if (r == n && candle_kld_finish(rd) == CANDLE_OK) {
        check(candle_kld_read_row(rd, all, &rows[0]) != CANDLE_OK);
        candle_kld_header hh = *h;
        int32_t *tokens = malloc((size_t)h->n_tokens * sizeof *tokens);
        check(tokens != NULL);
        memcpy(tokens, tok, (size_t)h->n_tokens * sizeof *tokens);
        candle_kld_close(rd);
        rd = NULL;
        round_trip(&hh, tokens, all, rows);
        free(tokens);
    }
    candle_kld_close(rd);
    free(all);
    free(rows);
    return 0;
}
