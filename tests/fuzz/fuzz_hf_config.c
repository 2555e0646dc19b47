/* libFuzzer target for a Hugging Face directory's config.json: the input is
 * written as config.json beside a fixed one-layer llama model.safetensors,
 * then the directory is opened as a weight source and loaded as a model.
 * Any config must load or be refused with an error, never crash, hang or
 * allocate in proportion to a number it holds. Built with -DCANDLE_FUZZ=ON
 * and clang (`make fuzz`). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candle/candle.h"

static char dir[256];

/* model.safetensors: a one-layer llama (embeddings [8, 4], 2 heads of 2, 1 kv head). */
static void write_weights(void) {
    static const struct {
        const char *name;
        int64_t rows, cols;
    } t[] = {
        {"model.embed_tokens.weight", 8, 4},
        {"model.norm.weight", 4, 0},
        {"model.layers.0.input_layernorm.weight", 4, 0},
        {"model.layers.0.self_attn.q_proj.weight", 4, 4},
        {"model.layers.0.self_attn.k_proj.weight", 2, 4},
        {"model.layers.0.self_attn.v_proj.weight", 2, 4},
        {"model.layers.0.self_attn.o_proj.weight", 4, 4},
        {"model.layers.0.post_attention_layernorm.weight", 4, 0},
        {"model.layers.0.mlp.gate_proj.weight", 8, 4},
        {"model.layers.0.mlp.up_proj.weight", 8, 4},
        {"model.layers.0.mlp.down_proj.weight", 4, 8},
    };
    char header[4096], shape[32];
    size_t hl = 1, off = 0;
    header[0] = '{';
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        size_t nb = (size_t)(t[i].rows * (t[i].cols ? t[i].cols : 1)) * 4;
        if (t[i].cols) snprintf(shape, sizeof shape, "%lld,%lld", (long long)t[i].rows, (long long)t[i].cols);
        else snprintf(shape, sizeof shape, "%lld", (long long)t[i].rows);
        hl += (size_t)snprintf(header + hl, sizeof header - hl,
                               "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                               i ? "," : "", t[i].name, shape, off, off + nb);
        off += nb;
    }
    header[hl++] = '}';
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    uint64_t len = hl;
    fwrite(&len, 8, 1, f);
    fwrite(header, 1, hl, f);
    for (size_t i = 0; i < off / 4; i++) {
        float v = 0.01f * (float)(i % 97);
        fwrite(&v, 4, 1, f);
    }
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "/tmp/candle-fuzz-hf-XXXXXX");
    if (!mkdtemp(dir)) abort();
    write_weights();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fwrite(data, 1, size, f);
    fclose(f);
    candle_weights *w = NULL;
    if (candle_weights_open(&w, dir, NULL) == CANDLE_OK) {
        char buf[256];
        for (int64_t i = 0; i < candle_weights_n_kv(w); i++) candle_weights_kv_str(w, i, buf, sizeof buf);
        candle_weights_close(w);
    } else if (!candle_last_errmsg()[0]) {
        __builtin_trap(); /* a refusal says why */
    }
    candle_model *m = NULL;
    if (candle_model_load(&m, dir, NULL) == CANDLE_OK) {
        candle_session_params sp = candle_session_default_params();
        sp.n_ctx = 8;
        candle_session *s = NULL;
        int32_t tok[2] = {1, 2};
        if (candle_session_init(&s, m, &sp) == CANDLE_OK) candle_session_eval(s, tok, 2, NULL, false);
        candle_session_free(s);
        candle_model_free(m);
    }
    return 0;
}
