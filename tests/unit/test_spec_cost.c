/* The draft lengths' cost model (candle/spec_cost.h) on synthetic times:
 * long drafts when acceptance is ~1 and verified rows are cheap, none when
 * acceptance is ~0 and rows are dear or the draft costs more than a step;
 * no choice before two row counts are timed, the slope kept after; one
 * sequence's length the exhaustive best; several sequences' lengths near
 * the brute-force best of the whole step; the probes' spacing. */
#include "candle/spec_cost.h"
#include "test.h"

/* Steps of 1..4 rows taking a + b r seconds. */
static candle_spec_times timed(double a, double b) {
    candle_spec_times t = {0};
    for (int i = 0; i < 12; i++) candle_spec_times_step(&t, 1 + i % 4, a + b * (1 + i % 4));
    return t;
}

static uint64_t rng = 88172645463325252ull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* 40 drafts of 8 whose tokens are each kept with probability rate (until the
 * first refused), as the callers report them: draft i keeps the tokens
 * while rate^j > u_i, u_i spread evenly (golden-ratio steps) so that the
 * recent drafts, which weigh most, are a fair sample too. */
static candle_spec_accept accepting(double rate) {
    candle_spec_accept a = {0};
    for (int i = 0; i < 40; i++) {
        double u = fmod(0.5 + 0.6180339887 * i, 1.0), p = rate;
        int kept = 0;
        while (kept < 8 && p > u) kept++, p *= rate;
        candle_spec_accept_add(&a, kept < 8 ? kept + 1 : 8, kept);
    }
    return a;
}

/* The step's expected tokens per second at lengths k, as the header states it. */
static double rate(const candle_spec_times *t, int n, const candle_spec_accept *acc, const int32_t *k,
                   int64_t rows_fixed, double tokens_fixed) {
    double g = tokens_fixed, s = 0;
    int64_t rows = rows_fixed + n;
    for (int i = 0; i < n; i++) {
        g += candle_spec_accept_tokens(&acc[i], k[i]);
        rows += k[i];
        s += k[i] ? t->draft_first + (k[i] - 1) * t->draft_next : 0;
    }
    return g / (s + candle_spec_times_estimate(t, rows));
}

int main(void) {
    int32_t k = -1, kmax = 8;
    /* before the fit (one row count) there is no choice */
    candle_spec_times t = {0};
    for (int i = 0; i < 10; i++) candle_spec_times_step(&t, 1, 0.01);
    candle_spec_accept hi = accepting(1), lo = accepting(0);
    CHECK(!candle_spec_cost_lengths(&t, 1, &hi, &kmax, 0, 0, &k) && k == -1);

    /* acceptance ~1, cheap rows (a step's fixed cost is 20 rows'), free drafts: all of k */
    t = timed(0.010, 0.0005);
    CHECK(candle_spec_cost_lengths(&t, 1, &hi, &kmax, 0, 0, &k));
    CHECK_MSG(k == kmax, "k %d", (int)k);
    /* acceptance ~0, dear rows (a row costs ten times the fixed part): none */
    t = timed(0.001, 0.010);
    CHECK(candle_spec_cost_lengths(&t, 1, &lo, &kmax, 0, 0, &k));
    CHECK_MSG(k == 0, "k %d", (int)k);
    /* acceptance ~0 even with cheap rows: none (the prior alone does not draft) */
    t = timed(0.010, 0.0005);
    CHECK(candle_spec_cost_lengths(&t, 1, &lo, &kmax, 0, 0, &k));
    CHECK_MSG(k == 0, "k %d, tokens(1) %g", (int)k, candle_spec_accept_tokens(&lo, 1));
    /* acceptance ~1 but each draft token costs more than a whole step: none */
    t = timed(0.010, 0.0005);
    candle_spec_times_draft(&t, 4, 2, 0.030, 0.120);
    CHECK(candle_spec_cost_lengths(&t, 1, &hi, &kmax, 0, 0, &k) && k == 0);
    /* a draft model's long catch-up (its prompt, or a pause) is paid once: it
     * does not price the drafts after it, which draft again */
    t = timed(0.010, 0.0005);
    candle_spec_times_draft(&t, 2, 1, 0.004, 0.008);
    candle_spec_times_draft(&t, 1, 200, 0.400, 0.400);
    CHECK_MSG(fabs(t.draft_first - 0.004) < 1e-12, "draft_first %g", t.draft_first);
    CHECK(candle_spec_cost_lengths(&t, 1, &hi, &kmax, 0, 0, &k) && k > 0);
    /* ... and guesses the first token's seconds while none is known, per
     * token of the catch-up for a span of 2 (optimistic: a dear guess would
     * stop the drafting that measures it), then the next steady draft's
     * seconds replace the guess, and later ones blend in */
    t = timed(0.010, 0.0005);
    candle_spec_times_draft(&t, 1, 200, 4.0, 4.0); /* weights paging in: 20 ms a token */
    CHECK_MSG(fabs(t.draft_first - 4.0 * 2 / 200) < 1e-12 && t.first_guessed, "draft_first %g", t.draft_first);
    CHECK(candle_spec_cost_lengths(&t, 1, &hi, &kmax, 0, 0, &k) && k > 0);
    candle_spec_times_draft(&t, 3, 2, 0.003, 0.007);
    CHECK_MSG(fabs(t.draft_first - 0.003) < 1e-12 && !t.first_guessed, "draft_first %g", t.draft_first);
    candle_spec_times_draft(&t, 3, 1, 0.004, 0.008);
    CHECK_MSG(fabs(t.draft_first - (0.8 * 0.003 + 0.2 * 0.004)) < 1e-12, "draft_first %g", t.draft_first);
    /* a middling acceptance with dear rows: short drafts, not none and not all */
    t = timed(0.004, 0.004);
    candle_spec_accept mid = accepting(0.75);
    CHECK(candle_spec_cost_lengths(&t, 1, &mid, &kmax, 0, 0, &k));
    CHECK_MSG(k >= 1 && k < kmax, "k %d", (int)k);
    /* after the fit, steps of one row count keep the slope (the callers ask
     * for lengths every step) */
    t = timed(0.010, 0.0005);
    for (int i = 0; i < 200; i++) {
        candle_spec_cost_lengths(&t, 1, &lo, &kmax, 0, 0, &k);
        candle_spec_times_step(&t, 1, 0.0105);
    }
    CHECK(candle_spec_cost_lengths(&t, 1, &hi, &kmax, 0, 0, &k) && k == kmax);
    CHECK_MSG(fabs(t.all.b - 0.0005) < 1e-6, "b %g", t.all.b);

    /* a slope fitted on a busy moment (rows dear) keeps the length at 0
     * while every step has one row; one probe's step of two cheap rows
     * refits it, and the length follows */
    t = timed(0.010, 0.050);
    for (int i = 0; i < 60; i++) {
        CHECK(candle_spec_cost_lengths(&t, 1, &mid, &kmax, 0, 0, &k) && k == 0);
        candle_spec_times_step(&t, 1, 0.0105);
    }
    candle_spec_times_step(&t, 2, 0.011);
    CHECK(candle_spec_cost_lengths(&t, 1, &mid, &kmax, 0, 0, &k));
    CHECK_MSG(k >= 1 && candle_spec_times_estimate(&t, 3) < 0.02, "k %d after the probe, t(3) %g", (int)k,
              candle_spec_times_estimate(&t, 3));
    for (int i = 0; i < 20; i++) { /* the steps at the lengths chosen finish the refit */
        candle_spec_times_step(&t, 1 + k, 0.010 + 0.0005 * (1 + k));
        candle_spec_cost_lengths(&t, 1, &mid, &kmax, 0, 0, &k);
    }
    CHECK_MSG(k >= kmax / 2 && fabs(t.multi.b - 0.0005) < 1e-4, "k %d, b %g", (int)k, t.multi.b);
    /* a step of one row cheaper than the multi-row line says (a matrix-vector
     * product; on AVX-512: 48 ms, then 72 ms + 9.5 ms a row): each priced
     * apart, and long drafts at 90% acceptance (one line through all would
     * price the 9 rows at 0.2 s and draft 3) */
    t = (candle_spec_times){0};
    for (int i = 0; i < 30; i++) candle_spec_times_step(&t, 1 + i % 9, i % 9 ? 0.072 + 0.0095 * (1 + i % 9) : 0.048);
    CHECK(fabs(candle_spec_times_estimate(&t, 1) - 0.048) < 1e-6);
    CHECK(fabs(candle_spec_times_estimate(&t, 9) - 0.1575) < 1e-6);
    candle_spec_accept a90 = accepting(0.9);
    CHECK(candle_spec_cost_lengths(&t, 1, &a90, &kmax, 0, 0, &k));
    CHECK_MSG(k >= 6, "k %d", (int)k);
    /* one-row steps long ago on a slow moment do not price the one-row step
     * above the two-row steps measured since (a run of drafting steps: the
     * old mean made every step draft) */
    t = (candle_spec_times){0};
    for (int i = 0; i < 12; i++) candle_spec_times_step(&t, 1 + i % 2, i % 2 ? 0.060 : 0.050);
    CHECK(fabs(candle_spec_times_estimate(&t, 1) - 0.050) < 1e-6);
    for (int i = 0; i < 15; i++) candle_spec_times_step(&t, 2, 0.030);
    CHECK_MSG(candle_spec_times_estimate(&t, 1) <= candle_spec_times_estimate(&t, 2) &&
                  candle_spec_times_estimate(&t, 2) < 0.035,
              "t(1) %g, t(2) %g", candle_spec_times_estimate(&t, 1), candle_spec_times_estimate(&t, 2));
    /* one sequence: the exhaustive best over random times and acceptance */
    int worse = 0;
    for (int it = 0; it < 500; it++) {
        double a0 = 0.001 + 0.02 * urand(), b = 0.02 * urand() * urand();
        t = timed(a0, b);
        if (urand() < 0.5) candle_spec_times_draft(&t, 3, 1, 0.01 * urand(), 0.03 * urand());
        candle_spec_accept ac = accepting(urand());
        int32_t km = 1 + (int32_t)(urand() * 12);
        CHECK(candle_spec_cost_lengths(&t, 1, &ac, &km, 0, 0, &k));
        double best = 0;
        for (int32_t j = 0; j <= km; j++) {
            double r = rate(&t, 1, &ac, &j, 0, 0);
            best = r > best ? r : best;
        }
        worse += k < 0 || k > km || rate(&t, 1, &ac, &k, 0, 0) < best * (1 - 1e-6);
    }
    CHECK_MSG(worse == 0, "%d of 500 not the best length", worse);

    /* several sequences in one step: one accepting, three not, cheap rows:
     * the one drafts, the others do not */
    t = timed(0.010, 0.0005);
    candle_spec_accept four[4] = {hi, lo, lo, lo};
    int32_t km4[4] = {8, 8, 8, 8}, k4[4];
    CHECK(candle_spec_cost_lengths(&t, 4, four, km4, 2, 2, k4));
    CHECK_MSG(k4[0] > 0 && !k4[1] && !k4[2] && !k4[3], "k %d %d %d %d", (int)k4[0], (int)k4[1], (int)k4[2],
              (int)k4[3]);
    /* two sequences: within 2% of the brute-force best over both lengths */
    worse = 0;
    for (int it = 0; it < 300; it++) {
        double a0 = 0.001 + 0.02 * urand(), b = 0.01 * urand() * urand();
        t = timed(a0, b);
        if (urand() < 0.5) candle_spec_times_draft(&t, 3, 1, 0.005 * urand(), 0.015 * urand());
        candle_spec_accept ac[2] = {accepting(urand()), accepting(urand())};
        int32_t km2[2] = {6, 6}, k2[2], j[2];
        double rf = (double)(int)(urand() * 3);
        CHECK(candle_spec_cost_lengths(&t, 2, ac, km2, (int64_t)rf, rf, k2));
        double best = 0;
        for (j[0] = 0; j[0] <= 6; j[0]++)
            for (j[1] = 0; j[1] <= 6; j[1]++) {
                double r = rate(&t, 2, ac, j, (int64_t)rf, rf);
                best = r > best ? r : best;
            }
        worse += rate(&t, 2, ac, k2, (int64_t)rf, rf) < 0.98 * best;
    }
    CHECK_MSG(worse == 0, "%d of 300 below 0.98 of the best", worse);

    /* warm-up lengths change from step to step (two row counts get timed) */
    CHECK(candle_spec_warmup_length(false, 0) != candle_spec_warmup_length(false, 1));
    CHECK(candle_spec_warmup_length(true, 0) != candle_spec_warmup_length(true, 1));
    CHECK(candle_spec_warmup_length(false, 5) >= 1);

    /* probes: at once, then 8, 16, 32 steps apart, kept or refused */
    candle_spec_accept p = {0};
    CHECK(candle_spec_probe(&p));
    candle_spec_probe_done(&p);
    int waits = 0;
    while (!candle_spec_probe(&p) && waits < 1000) waits++;
    CHECK_MSG(waits == 8, "waits %d", waits);
    candle_spec_probe_done(&p);
    for (waits = 0; !candle_spec_probe(&p) && waits < 1000;) waits++;
    CHECK_MSG(waits == 16, "waits %d", waits);
    candle_spec_probe_done(&p);
    for (waits = 0; !candle_spec_probe(&p) && waits < 1000;) waits++;
    CHECK_MSG(waits == 32, "waits %d after a kept one", waits);
    return test_done("test_spec_cost");
}
