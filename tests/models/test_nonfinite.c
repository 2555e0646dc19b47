/* NaN or Inf logits are an error (CANDLE_ERR_NUMERIC), in the session and
 * the batch path alike (issue 22, finding 8), not sampled as plausible text
 * or nothing: tests/data/tiny/qwen2.gguf with output_norm.weight all NaN
 * (then +Inf). `test_nonfinite --write PATH` writes the NaN model for
 * test_nonfinite_cli.sh (the CLI and the server on it). */
#include <math.h>
#include <unistd.h>

#include "common/tiny_variant.h"
#include "test.h"

static void check_model(const char *path, const char *what) {
    candle_model *m = NULL;
    CHECK_OK(NULL, candle_model_load(&m, path, NULL));
    if (!m) return;
    int64_t nv = candle_model_get_config(m)->n_vocab;
    float *logits = malloc((size_t)nv * sizeof *logits);
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 32;
    candle_session *s = NULL;
    CHECK_OK(NULL, candle_session_init(&s, m, &sp));
    const int32_t toks[4] = {1, 40, 50, 60};
    if (s && logits) {
        CHECK_MSG(candle_session_eval(s, toks, 4, logits, false) == CANDLE_ERR_NUMERIC, "%s: session",
                  what);
        CHECK_CONTAINS(candle_session_errmsg(s), "non-finite logits");
        CHECK(candle_session_pos(s) == 0); /* the failed batch left the cache as before */
    }
    candle_batch *b = NULL;
    CHECK_OK(NULL, candle_batch_init(&b, m, 1));
    if (b && s && logits) {
        candle_batch_seq q = {.sess = s, .tokens = toks, .n = 4, .logits = logits};
        CHECK_MSG(candle_batch_eval(b, &q, 1) == CANDLE_ERR_NUMERIC, "%s: batch", what);
        CHECK_CONTAINS(candle_batch_errmsg(b), "non-finite logits");
        CHECK(candle_session_pos(s) == 0);
    }
    candle_batch_free(b);
    candle_session_free(s);
    free(logits);
    candle_model_free(m);
}

int main(int argc, char **argv) {
    char base[1024], out[1024];
    test_path("tests/data/tiny/qwen2.gguf", base, sizeof base);
    tiny_variant v = {.fill_of = "output_norm.weight", .fill = NAN};
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        candle_status s = tiny_variant_write(base, argv[2], &v);
        if (s) fprintf(stderr, "test_nonfinite: %s\n", candle_last_errmsg());
        return s ? 1 : 0;
    }
    if (!test_need_file("test_nonfinite", base)) return test_done("test_nonfinite");
    snprintf(out, sizeof out, "%s/test_nonfinite.gguf",
             getenv("CANDLE_BINARY_DIR") ? getenv("CANDLE_BINARY_DIR") : ".");
    CHECK_OK(NULL, tiny_variant_write(base, out, &v));
    check_model(out, "NaN norm");
    v.fill = INFINITY;
    CHECK_OK(NULL, tiny_variant_write(base, out, &v));
    check_model(out, "Inf norm");
    remove(out);
    return test_done("test_nonfinite");
}
