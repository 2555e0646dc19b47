/* libFuzzer target for model loading: hyperparameters from a GGUF's
 * `<arch>.*` metadata, weights checked against the shapes they imply
 * (src/models/config.c, weights.c and each family's config), then a short
 * session. An input is
 *   [u8 flags][GGUF]
 * (flags bit 0: KV cache in f16; bit 1: evaluate two tokens, else one;
 * bit 2: read the weights instead of mapping them; bit 3: KV cache in q8_0).
 * Beyond "no crash":
 * - load fails with a documented kind and no model, or gives a config
 *   whose attention shape is consistent (heads a multiple of kv heads, rope
 *   dims even and within the head);
 * - whatever loads also runs: a session of 8 positions evaluates tokens
 *   (ids from the input, in the vocabulary) with logits, and then refuses
 *   a batch past its end; the only error it may give is out of memory
 *   (dtypes and metadata values are checked at load), or, for a q8_0
 *   cache, that head_dim is not a multiple of its 32-element blocks.
 * Seeds: tests/fuzz/gen_model_corpus.py (tiny random models of every
 * family). Built with -DCANDLE_FUZZ=ON. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/candle.h"
#include "fuzz-check.h"

#define N_CTX 8
#define MAX_LOGITS ((int64_t)1 << 20) /* vocabularies larger than this are not run */

static char path[128];
static bool verbose; /* FUZZ_VERBOSE=1: each load's outcome, to see the seeds reach a run */

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/fuzz_model.%d.gguf", dir, (int)getpid());
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    return 0;
}

static void run(const candle_model *m, uint8_t flags, const uint8_t *data, size_t size) {
    const candle_model_config *c = candle_model_get_config(m);
    if (c->n_vocab > MAX_LOGITS || c->n_layer > 64) return;
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = N_CTX;
    sp.n_threads = 1;
    sp.kv_type = flags & 8 ? CANDLE_DTYPE_Q8_0 : flags & 1 ? CANDLE_DTYPE_F16 : CANDLE_DTYPE_F32;
    candle_session *s = NULL;
    candle_status st = candle_session_init(&s, m, &sp);
    if (st != CANDLE_OK) {
        /* a q8_0 cache refuses a head_dim that is not whole blocks */
        check(!s && (st == CANDLE_ERR_OOM || (st == CANDLE_ERR_DTYPE && (flags & 8) && c->head_dim % 32)));
        return;
    }
    check(candle_session_n_ctx(s) == N_CTX && candle_session_pos(s) == 0);
    int32_t tok[2] = {0, 0};
    for (int i = 0; i < 2 && (size_t)i < size; i++) tok[i] = (int32_t)(data[size - 1 - i] % c->n_vocab);
    int64_t n = flags & 2 ? 2 : 1;
    float *logits = malloc((size_t)c->n_vocab * sizeof *logits);
    if (logits) {
        st = candle_session_eval(s, tok, n, logits, false);
        if (verbose) fprintf(stderr, "eval: %s %s\n", candle_status_name(st), candle_session_errmsg(s));
        if (st == CANDLE_OK) {
            check(candle_session_pos(s) == n);
            int32_t many[N_CTX] = {0};
            check(candle_session_eval(s, many, N_CTX, NULL, false) == CANDLE_ERR_INVALID_ARG);
            check(candle_session_pos(s) == n);
        } else {
            /* a file's weights may be NaN or overflow: refused as non-finite logits */
            check(st == CANDLE_ERR_OOM || st == CANDLE_ERR_NUMERIC);
            check(candle_session_pos(s) == 0);
        }
        free(logits);
    }
    candle_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    /* The cheap checks first: only a GGUF that parses goes to a file. */
    candle_gguf *g = NULL;
    if (candle_gguf_open_memory(&g, data + 1, size - 1) != CANDLE_OK) return 0;
    candle_gguf_close(g);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    bool ok = fwrite(data + 1, 1, size - 1, f) == size - 1;
    if (fclose(f) != 0 || !ok) return 0;
    candle_model_params mp = candle_model_default_params();
    mp.n_threads = 1;
    mp.no_mmap = data[0] & 4;
    candle_model *m = NULL;
    candle_status st = candle_model_load(&m, path, &mp);
    unlink(path);
    if (verbose) fprintf(stderr, "load: %s %s\n", candle_status_name(st), st ? candle_last_errmsg() : "");
    if (st != CANDLE_OK) {
        check(!m && (st == CANDLE_ERR_FORMAT || st == CANDLE_ERR_UNSUPPORTED ||
                     st == CANDLE_ERR_OOM || st == CANDLE_ERR_SHAPE || st == CANDLE_ERR_DTYPE));
        return 0;
    }
    const candle_model_config *c = candle_model_get_config(m);
    check(c->n_layer > 0 && c->n_embd > 0 && c->n_head > 0 && c->n_head_kv > 0 &&
          c->n_head % c->n_head_kv == 0 && c->head_dim > 0 && c->n_rot > 0 &&
          c->n_rot <= c->head_dim && c->n_rot % 2 == 0 && c->n_vocab > 0);
    run(m, data[0], data + 1, size - 1);
    candle_model_free(m);
    return 0;
}
