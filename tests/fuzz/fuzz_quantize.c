/* libFuzzer target for `candle quantize`: its type names, the mixture rules
 * (src/formats/quantize_rules.c) over a GGUF's metadata and tensor list, and
 * the whole conversion of that file. An input is
 *   [u8 file type index][u8 flags][GGUF]
 * (flags bit 0 pure, bit 1 allow_requantize; bit 7: the rest of the input
 * is a type name for candle_ftype_from_name instead of a GGUF). Beyond "no
 * crash":
 * - a name parses to a type whose own name it is (case aside) or an alias;
 *   every type's name parses back to it;
 * - under every file type the rules give each weight a dtype whose block
 *   divides its rows, with a note exactly when they fell back;
 * - quantize_file either fails with a documented kind and leaves no output
 *   (nor a temporary beside it), or writes a GGUF that opens with the same tensors in the
 *   same order and shapes (a rank-0 scalar as [1]), each in the dtype the
 *   rules chose, the tensors it did not convert byte for byte, and stats
 *   that add up.
 * Seeds: tests/fuzz/gen_quantize_corpus.py. Built with -DCANDLE_FUZZ=ON. */
#include <glob.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "candle/candle.h"
#include "formats/quantize-impl.h"
#include "fuzz-check.h"

static candle_ftype ftypes[CANDLE_FTYPE_COUNT];
static int n_ftypes;
static char in_path[128], out_path[128], tmp_path[160];

static bool no_temps(void) {
    glob_t g;
    int r = glob(tmp_path, 0, NULL, &g);
    if (r == 0) globfree(&g);
    return r == GLOB_NOMATCH;
}
static bool verbose; /* FUZZ_VERBOSE=1: each conversion's outcome, to see the seeds reach it */

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    for (int f = 0; f < CANDLE_FTYPE_COUNT; f++)
        if (candle_ftype_name((candle_ftype)f)) ftypes[n_ftypes++] = (candle_ftype)f;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(in_path, sizeof in_path, "%s/fuzz_quantize.%d.in.gguf", dir, (int)getpid());
    snprintf(out_path, sizeof out_path, "%s/fuzz_quantize.%d.out.gguf", dir, (int)getpid());
    /* the writer's temporaries: ".NAME.XXXXXX" beside the output */
    snprintf(tmp_path, sizeof tmp_path, "%s/.fuzz_quantize.%d.out.gguf.*", dir, (int)getpid());
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    return 0;
}

static void check_name(const char *name) {
    candle_ftype f;
    candle_status s = candle_ftype_from_name(name, &f);
    if (s != CANDLE_OK) {
        check(s == CANDLE_ERR_INVALID_ARG && strstr(candle_last_errmsg(), "valid types"));
        return;
    }
    const char *own = candle_ftype_name(f);
    check(own && candle_ftype_dtype(f) != CANDLE_DTYPE_COUNT);
    bool alias = !strcasecmp(name, "Q3_K") || !strcasecmp(name, "Q4_K") || !strcasecmp(name, "Q5_K");
    check(!strcasecmp(name, own) || alias);
}

/* The dtypes the rules pick, for the checks after converting; NULL if OOM. */
static candle_dtype *check_rules(const candle_weights *g, candle_ftype want, bool want_pure) {
    int64_t n = candle_weights_n_tensors(g);
    candle_dtype *picked = malloc((size_t)(n ? n : 1) * sizeof *picked);
    if (!picked) return NULL;
    for (int k = 0; k < n_ftypes; k++) {
        for (int pure = 0; pure < 2; pure++) {
            quant_model m;
            quant_model_init(&m, g);
            check(m.n_gqa >= 1 || m.n_gqa == 0);
            for (int64_t i = 0; i < n; i++) {
                const candle_weights_tensor_info *t = candle_weights_tensor(g, i);
                candle_dtype dt = t->dtype;
                if (quant_is_weight(t)) {
                    char note[48];
                    bool fb = true;
                    memset(note, 'x', sizeof note);
                    candle_quantize_params qp = candle_quantize_default_params();
                    qp.pure = pure;
                    dt = quant_tensor_type(&m, ftypes[k], &qp, t, note, sizeof note, &fb);
                    const candle_dtype_traits *tr = candle_dtype_info(dt);
                    int64_t ne0 = t->rank ? t->shape[t->rank - 1] : 1;
                    check(tr && (tr->is_float || tr->is_quantized) && ne0 % tr->block_size == 0);
                    check(memchr(note, 0, sizeof note) && (note[0] != 0) == fb);
                }
                if (ftypes[k] == want && pure == want_pure) picked[i] = dt;
            }
        }
    }
    return picked;
}

static bool write_input(const uint8_t *data, size_t size) {
    FILE *f = fopen(in_path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

static void check_output(const candle_gguf *g, const candle_dtype *picked,
                         const candle_quantize_stats *st) {
    candle_gguf *h = NULL;
    check(candle_gguf_open(&h, out_path, NULL) == CANDLE_OK);
    int64_t n = candle_gguf_n_tensors(g);
    check(candle_gguf_n_tensors(h) == n && st->n_tensors == n);
    check(st->n_converted + st->n_copied == n);
    const uint8_t *a = candle_gguf_storage(g)->data, *b = candle_gguf_storage(h)->data;
    int64_t converted = 0;
    for (int64_t i = 0; i < n; i++) {
        const candle_gguf_tensor_info *x = candle_gguf_tensor(g, i), *y = candle_gguf_tensor(h, i);
        /* GGUF has no rank 0: the writer stores a scalar as [1], as ggml does */
        bool scalar = x->rank == 0 && y->rank == 1 && y->shape[0] == 1;
        check(!strcmp(x->name, y->name) && (x->rank == y->rank || scalar));
        check(!memcmp(x->shape, y->shape, (size_t)x->rank * sizeof x->shape[0]));
        if (picked) check(y->dtype == picked[i]);
        if (y->dtype == x->dtype) check(y->size == x->size && !memcmp(a + x->offset, b + y->offset, x->size));
        else converted++;
    }
    check(converted == st->n_converted);
    candle_gguf_close(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    if (data[1] & 0x80) {
        char name[64];
        size_t n = size - 2 < sizeof name - 1 ? size - 2 : sizeof name - 1;
        memcpy(name, data + 2, n);
        name[n] = 0;
        check_name(name);
        for (int k = 0; k < n_ftypes; k++) {
            candle_ftype f;
            check(candle_ftype_from_name(candle_ftype_name(ftypes[k]), &f) == CANDLE_OK && f == ftypes[k]);
        }
        return 0;
    }
    candle_ftype ftype = ftypes[data[0] % n_ftypes];
    candle_quantize_params p = candle_quantize_default_params();
    candle_quantize_stats st;
    p.n_threads = 1;
    p.pure = data[1] & 1;
    p.allow_requantize = data[1] & 2;
    p.stats = &st;
    candle_gguf *g = NULL;
    if (candle_gguf_open_memory(&g, data + 2, size - 2) != CANDLE_OK) return 0;
    candle_dtype *picked = NULL;
    candle_weights *w = NULL;
    if (write_input(data + 2, size - 2) && candle_weights_open(&w, in_path, NULL) == CANDLE_OK) {
        picked = check_rules(w, ftype, p.pure);
        candle_weights_close(w);
        candle_status s = candle_quantize_file(in_path, out_path, ftype, &p);
        if (verbose)
            fprintf(stderr, "%s: %s %s\n", candle_ftype_name(ftype), candle_status_name(s),
                    candle_last_errmsg());
        if (s == CANDLE_OK) {
            check_output(g, picked, &st);
        } else {
            check(s == CANDLE_ERR_FORMAT || s == CANDLE_ERR_UNSUPPORTED || s == CANDLE_ERR_OOM ||
                  s == CANDLE_ERR_INVALID_ARG || s == CANDLE_ERR_IO);
            check(access(out_path, F_OK) != 0 && no_temps());
        }
        unlink(out_path);
    }
    unlink(in_path);
    free(picked);
    candle_gguf_close(g);
    return 0;
}
