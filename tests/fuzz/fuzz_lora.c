/* libFuzzer target for LoRA adapter loading (src/models/lora.c) onto the
 * tiny Llama of tests/data/hf/llama, then a step with the adapter. An input is
 *   [u8 flags][u16 LE n][n bytes of adapter_config.json][file]
 * flags bit 0: the file is a GGUF LoRA (the config is ignored), else the
 * adapter_model.safetensors of a PEFT directory with that config.
 * Beyond "no crash":
 * - a refused adapter gives a documented kind (format, unsupported, io,
 *   out of memory) and no adapter;
 * - an adapter that loads has at least one pair and a positive rank, and
 *   a session step with it at scale 1 gives logits or (for wild values)
 *   the non-finite error, never another;
 * - the base model's logits before and after are the same, bit for bit
 *   (nothing of the adapter reaches the model).
 * Seeds: tests/fuzz/corpus/lora (the committed adapters of tests/data/lora).
 * Built with -DCANDLE_FUZZ=ON. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candle/candle.h"
#include "fuzz-check.h"

static char dir[128], gguf_path[160], st_path[160], cfg_path[160];
static candle_model *model;
static float *base_logits; /* [n_vocab] of the probe tokens without an adapter */
static const int32_t probe[2] = {1, 2};

int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Logits of the probe tokens with use[n] into out; the eval's status. */
static candle_status step(const candle_lora_use *use, int n, float *out) {
    candle_session_params sp = candle_session_default_params();
    sp.n_ctx = 4;
    sp.n_threads = 1;
    candle_session *s = NULL;
    candle_status st = candle_session_init(&s, model, &sp);
    if (!st) st = candle_session_set_lora(s, use, n);
    if (!st) st = candle_session_eval(s, probe, 2, out, false);
    candle_session_free(s);
    return st;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/fuzz_lora.%d", base, (int)getpid());
    mkdir(dir, 0700);
    snprintf(gguf_path, sizeof gguf_path, "%s/adapter.gguf", dir);
    snprintf(st_path, sizeof st_path, "%s/adapter_model.safetensors", dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/adapter_config.json", dir);
    candle_model_params mp = candle_model_default_params();
    mp.n_threads = 1;
    if (candle_model_load(&model, CANDLE_FUZZ_LORA_MODEL, &mp)) {
        fprintf(stderr, "fuzz_lora: %s: %s\n", CANDLE_FUZZ_LORA_MODEL, candle_last_errmsg());
        abort();
    }
    base_logits = malloc((size_t)candle_model_get_config(model)->n_vocab * sizeof *base_logits);
    check(base_logits && step(NULL, 0, base_logits) == CANDLE_OK);
    return 0;
}

static bool put(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    bool is_gguf = data[0] & 1;
    size_t n_cfg = (size_t)data[1] | (size_t)data[2] << 8;
    if (n_cfg > size - 3) return 0;
    const uint8_t *file = data + 3 + n_cfg;
    size_t n_file = size - 3 - n_cfg;
    if (is_gguf ? !put(gguf_path, file, n_file)
                : !put(cfg_path, data + 3, n_cfg) || !put(st_path, file, n_file))
        return 0;
    candle_lora *l = NULL;
    candle_status st = candle_lora_load(&l, model, is_gguf ? gguf_path : dir);
    unlink(gguf_path);
    unlink(st_path);
    unlink(cfg_path);
    if (st != CANDLE_OK) {
        check(!l && (st == CANDLE_ERR_FORMAT || st == CANDLE_ERR_UNSUPPORTED || st == CANDLE_ERR_IO ||
                     st == CANDLE_ERR_OOM));
        return 0;
    }
    check(candle_lora_n_pairs(l) > 0 && candle_lora_rank(l) > 0 && candle_lora_model(l) == model);
    int64_t nv = candle_model_get_config(model)->n_vocab;
    float *lg = malloc((size_t)nv * sizeof *lg);
    if (lg) {
        candle_lora_use u = {l, 1.0f};
        st = step(&u, 1, lg);
        check(st == CANDLE_OK || st == CANDLE_ERR_NUMERIC || st == CANDLE_ERR_OOM);
        check(step(NULL, 0, lg) == CANDLE_OK && !memcmp(lg, base_logits, (size_t)nv * sizeof *lg));
        free(lg);
    }
    candle_lora_free(l);
    return 0;
}
