/* Weight sources over Hugging Face directories built here: names and
 * config.json fields in GGUF's vocabulary, the adapters' conventions (f32
 * norms, Gemma's 1 + w), sharded checkpoints, and every refusal naming the
 * file and the field. A GGUF source is checked through the model tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candle/candle.h"
#include "test.h"

typedef struct st_tensor {
    const char *name;
    const char *dtype; /* "F32" or "BF16" */
    int rank;
    int64_t shape[2];
} st_tensor;

static char dir[256];

static void write_file(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void remove_file(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

/* A safetensors file of the tensors, element k of each = 0.5 * (k + 1). */
static void write_safetensors(const char *name, const st_tensor *t, int n) {
    char header[8192];
    size_t off = 0, hl = 0;
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "{");
    for (int i = 0; i < n; i++) {
        int64_t el = t[i].rank == 2 ? t[i].shape[0] * t[i].shape[1] : t[i].shape[0];
        size_t nb = (size_t)el * (strcmp(t[i].dtype, "F32") ? 2 : 4);
        char shape[64];
        if (t[i].rank == 2)
            snprintf(shape, sizeof shape, "%lld,%lld", (long long)t[i].shape[0], (long long)t[i].shape[1]);
        else
            snprintf(shape, sizeof shape, "%lld", (long long)t[i].shape[0]);
        hl += (size_t)snprintf(header + hl, sizeof header - hl,
                               "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                               i ? "," : "", t[i].name, t[i].dtype, shape, off, off + nb);
        off += nb;
    }
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "}");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    uint64_t len = hl;
    fwrite(&len, 8, 1, f);
    fwrite(header, 1, hl, f);
    for (int i = 0; i < n; i++) {
        int64_t el = t[i].rank == 2 ? t[i].shape[0] * t[i].shape[1] : t[i].shape[0];
        for (int64_t k = 0; k < el; k++) {
            float v = 0.5f * (float)(k + 1);
            if (!strcmp(t[i].dtype, "F32")) {
                fwrite(&v, 4, 1, f);
            } else {
                uint16_t h = candle_f32_to_bf16(v);
                fwrite(&h, 2, 1, f);
            }
        }
    }
    fclose(f);
}

#define LLAMA_CONFIG                                                                         \
    "{\"model_type\": \"llama\", \"num_hidden_layers\": 1, \"hidden_size\": 4, "          \
    "\"intermediate_size\": 8, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "  \
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 500000.0, \"max_position_embeddings\": 64, " \
    "\"hidden_act\": \"silu\", \"head_dim\": 2, \"tie_word_embeddings\": true%s}"

/* A whole one-layer llama: embeddings [10, 4], 2 heads of 2, 1 kv head. */
static const st_tensor llama_tensors[] = {
    {"model.embed_tokens.weight", "BF16", 2, {10, 4}},
    {"model.norm.weight", "BF16", 1, {4, 0}},
    {"model.layers.0.input_layernorm.weight", "BF16", 1, {4, 0}},
    {"model.layers.0.self_attn.q_proj.weight", "BF16", 2, {4, 4}},
    {"model.layers.0.self_attn.k_proj.weight", "BF16", 2, {2, 4}},
    {"model.layers.0.self_attn.v_proj.weight", "BF16", 2, {2, 4}},
    {"model.layers.0.self_attn.o_proj.weight", "BF16", 2, {4, 4}},
    {"model.layers.0.post_attention_layernorm.weight", "F32", 1, {4, 0}},
    {"model.layers.0.mlp.gate_proj.weight", "BF16", 2, {8, 4}},
    {"model.layers.0.mlp.up_proj.weight", "BF16", 2, {8, 4}},
    {"model.layers.0.mlp.down_proj.weight", "BF16", 2, {4, 8}},
    {"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", 1, {1, 0}},
};
#define N_LLAMA ((int)(sizeof llama_tensors / sizeof llama_tensors[0]))

static void llama_dir(const char *config_extra) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg, LLAMA_CONFIG, config_extra);
    write_file("config.json", cfg);
    write_safetensors("model.safetensors", llama_tensors, N_LLAMA);
}

/* Opening the directory fails with code and a message holding each of subs. */
static void refused(candle_status code, const char *sub1, const char *sub2) {
    candle_weights *w = NULL;
    candle_status s = candle_weights_open(&w, dir, NULL);
    CHECK_MSG(s == code && !w, "status %d, want %d", (int)s, (int)code);
    if (s) {
        CHECK_CONTAINS(candle_last_errmsg(), sub1);
        if (sub2) CHECK_CONTAINS(candle_last_errmsg(), sub2);
    }
    candle_weights_close(w);
}

static void test_llama_dir(void) {
    llama_dir(", \"torch_dtype\": \"bfloat16\"");
    write_file("tokenizer_config.json", "{\"chat_template\": \"{{ messages }}\"}");
    candle_weights *w = NULL;
    CHECK(candle_weights_open(&w, dir, NULL) == CANDLE_OK);
    if (!w) {
        fprintf(stderr, "%s\n", candle_last_errmsg());
        return;
    }
    CHECK(candle_weights_get_format(w) == CANDLE_WEIGHTS_HF_DIR && !candle_weights_gguf(w));
    CHECK(!strcmp(candle_weights_format_name(w), "safetensors"));
    CHECK(candle_weights_n_tensors(w) == N_LLAMA - 1); /* inv_freq is not a weight */
    int64_t v = 0;
    double f = 0;
    bool b = true;
    const char *s;
    size_t len;
    CHECK(candle_weights_get_str(w, "general.architecture", &s, &len) && len == 5 && !memcmp(s, "llama", 5));
    CHECK(candle_weights_get_i64(w, "llama.block_count", &v) && v == 1);
    CHECK(candle_weights_get_i64(w, "llama.attention.head_count_kv", &v) && v == 1);
    CHECK(candle_weights_get_i64(w, "llama.attention.key_length", &v) && v == 2);
    CHECK(candle_weights_get_f64(w, "llama.rope.freq_base", &f) && f == 500000.0);
    CHECK(candle_weights_get_f64(w, "llama.attention.layer_norm_rms_epsilon", &f) && f == 1e-6);
    CHECK(candle_weights_get_bool(w, "candle.rope.interleaved", &b) && !b);
    CHECK(candle_weights_get_str(w, "tokenizer.chat_template", &s, &len) && len == 14);
    CHECK(!candle_weights_get_i64(w, "llama.rope.freq_base", &v) || v == 500000);
    CHECK(!candle_weights_get_str(w, "llama.block_count", &s, &len));

    int64_t i = candle_weights_find_tensor(w, "blk.0.attn_q.weight");
    CHECK(i >= 0);
    const candle_weights_tensor_info *ti = candle_weights_tensor(w, i);
    CHECK(ti && !strcmp(ti->src_name, "model.layers.0.self_attn.q_proj.weight"));
    CHECK(ti && !strcmp(ti->file, "model.safetensors") && ti->dtype == CANDLE_DTYPE_BF16);
    CHECK(ti && ti->rank == 2 && ti->shape[0] == 4 && ti->shape[1] == 4 && ti->size == 32);
    ti = candle_weights_tensor(w, candle_weights_find_tensor(w, "output_norm.weight"));
    CHECK(ti && ti->dtype == CANDLE_DTYPE_F32 && ti->size == 8); /* bf16 as stored, f32 as loaded */
    char buf[160];
    CHECK(!strcmp(candle_weights_src_name(w, "blk.3.ffn_down.weight", buf, sizeof buf),
                  "model.layers.3.mlp.down_proj.weight"));
    CHECK(!strcmp(candle_weights_src_name(w, "token_embd.weight", buf, sizeof buf),
                  "model.embed_tokens.weight"));

    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, NULL) == CANDLE_OK);
    candle_tensor *norm = candle_weights_load_tensor(w, ctx, "output_norm.weight");
    CHECK(norm && norm->dtype == CANDLE_DTYPE_F32);
    if (norm) {
        const float *d = candle_tensor_data(norm);
        CHECK(d[0] == 0.5f && d[3] == 2.0f);
    }
    candle_tensor *emb = candle_weights_load_tensor(w, ctx, "token_embd.weight");
    CHECK(emb && emb->dtype == CANDLE_DTYPE_BF16 && emb->shape[0] == 10);
    CHECK(candle_weights_load_tensor(w, ctx, "blk.0.attn_q.bias") == NULL);
    CHECK_CONTAINS(candle_errmsg(ctx), "missing tensor 'model.layers.0.self_attn.q_proj.bias'");
    candle_ctx_free(ctx);
    candle_weights_close(w);
    remove_file("tokenizer_config.json");
}

/* The directory loads as a model and evaluates: finite logits, 10 of them. */
static void test_llama_model(void) {
    llama_dir("");
    candle_model *m = NULL;
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_OK);
    if (!m) {
        fprintf(stderr, "%s\n", candle_last_errmsg());
        return;
    }
    const candle_model_config *c = candle_model_get_config(m);
    CHECK(c->n_vocab == 10 && c->n_layer == 1 && c->head_dim == 2 && c->rope_mode == CANDLE_ROPE_HALF);
    candle_session *s = NULL;
    CHECK(candle_session_init(&s, m, NULL) == CANDLE_OK);
    float logits[10];
    int32_t toks[3] = {1, 2, 3};
    CHECK(s && candle_session_eval(s, toks, 3, logits, false) == CANDLE_OK);
    bool finite = true;
    for (int k = 0; k < 10; k++) finite = finite && logits[k] == logits[k];
    CHECK(finite);
    candle_session_free(s);
    candle_model_free(m);

    /* a scaling type the architectures do not implement is refused by name */
    llama_dir(", \"rope_scaling\": {\"rope_type\": \"xdrope\", \"factor\": 4.0}");
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_ERR_UNSUPPORTED && !m);
    CHECK_CONTAINS(candle_last_errmsg(), "RoPE scaling type 'xdrope'");
    /* dynamic NTK's exponent d / (d - 2) needs more than 2 rotated dims */
    llama_dir(", \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 4.0}");
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_ERR_FORMAT && !m);
    CHECK_CONTAINS(candle_last_errmsg(), "dynamic NTK RoPE scaling needs");
    /* YaRN: the original context defaults to max_position_embeddings, the
     * magnitude to 0.1 ln(factor) + 1 (of which the op adds all itself) */
    llama_dir(", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"beta_fast\": 16}");
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_OK);
    if (m) {
        const candle_model_config *yc = candle_model_get_config(m);
        CHECK(yc->rope_scale == 0.25 && yc->rope_ext_factor == 1 && yc->rope_n_ctx_orig == 64);
        CHECK(yc->rope_beta_fast == 16 && yc->rope_beta_slow == 0);
        CHECK_NEAR(yc->rope_attn_factor, 1.0, 1e-15);
    }
    candle_model_free(m);
    /* long-rope lists must have one factor per rotated pair */
    llama_dir(", \"rope_scaling\": {\"rope_type\": \"longrope\", \"short_factor\": [1], "
              "\"long_factor\": [2]}");
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_OK);
    candle_model_free(m);
    llama_dir(", \"rope_scaling\": {\"rope_type\": \"longrope\", \"short_factor\": [1, 1], "
              "\"long_factor\": [2]}");
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_ERR_FORMAT && !m);
    CHECK_CONTAINS(candle_last_errmsg(), "rope_scaling.short_factor must be 1 positive numbers");
    llama_dir(", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 4.0}");
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_OK);
    if (m) CHECK(candle_model_get_config(m)->rope_scale == 0.25);
    candle_model_free(m);

    /* shapes that disagree with config.json: named with the file's tensor name */
    write_file("config.json", "{\"model_type\": \"llama\", \"num_hidden_layers\": 1, \"hidden_size\": 4, "
                              "\"intermediate_size\": 6, \"num_attention_heads\": 2, "
                              "\"num_key_value_heads\": 1, \"head_dim\": 2}");
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_ERR_FORMAT && !m);
    CHECK_CONTAINS(candle_last_errmsg(), "model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape [8, 4], want [6, 4]");
}

static void test_gemma_norms(void) {
    write_file("config.json", "{\"model_type\": \"gemma2\", \"num_hidden_layers\": 1, \"hidden_size\": 4, "
                              "\"hidden_activation\": \"gelu_pytorch_tanh\", \"sliding_window\": 8, "
                              "\"query_pre_attn_scalar\": 16, \"final_logit_softcapping\": 30.0}");
    st_tensor t[] = {
        {"model.norm.weight", "BF16", 1, {4, 0}},
        {"model.layers.0.pre_feedforward_layernorm.weight", "F32", 1, {4, 0}},
        {"model.layers.0.post_attention_layernorm.weight", "F32", 1, {4, 0}},
        {"model.layers.0.self_attn.q_proj.weight", "F32", 2, {4, 4}},
    };
    write_safetensors("model.safetensors", t, 4);
    candle_weights *w = NULL;
    CHECK(candle_weights_open(&w, dir, NULL) == CANDLE_OK);
    if (!w) return;
    int64_t v;
    double f;
    CHECK(candle_weights_get_i64(w, "gemma2.attention.sliding_window", &v) && v == 8);
    CHECK(candle_weights_get_f64(w, "gemma2.attention.query_pre_attn_scalar", &f) && f == 16);
    CHECK(candle_weights_find_tensor(w, "blk.0.ffn_norm.weight") >= 0);
    CHECK(candle_weights_find_tensor(w, "blk.0.post_attention_norm.weight") >= 0);
    candle_ctx *ctx = NULL;
    CHECK(candle_ctx_init(&ctx, NULL) == CANDLE_OK);
    candle_tensor *n = candle_weights_load_tensor(w, ctx, "output_norm.weight");
    candle_tensor *q = candle_weights_load_tensor(w, ctx, "blk.0.attn_q.weight");
    CHECK(n && q);
    if (n && q) {
        const float *d = candle_tensor_data(n), *e = candle_tensor_data(q);
        CHECK(d[0] == 1.5f && d[3] == 3.0f); /* 1 + w */
        CHECK(e[0] == 0.5f);                 /* projections as stored */
    }
    candle_ctx_free(ctx);
    candle_weights_close(w);
}

static void test_shards(void) {
    llama_dir("");
    remove_file("model.safetensors");
    write_safetensors("model-00001-of-00002.safetensors", llama_tensors, 6);
    write_safetensors("model-00002-of-00002.safetensors", llama_tensors + 6, N_LLAMA - 6);
    char index[4096];
    size_t n = (size_t)snprintf(index, sizeof index, "{\"metadata\": {}, \"weight_map\": {");
    for (int i = 0; i < N_LLAMA; i++)
        n += (size_t)snprintf(index + n, sizeof index - n, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                              i ? ", " : "", llama_tensors[i].name, i < 6 ? 1 : 2);
    snprintf(index + n, sizeof index - n, "}}");
    write_file("model.safetensors.index.json", index);
    candle_weights *w = NULL;
    CHECK(candle_weights_open(&w, dir, NULL) == CANDLE_OK);
    if (w) {
        CHECK(candle_weights_n_files(w) == 2 && candle_weights_n_tensors(w) == N_LLAMA - 1);
        const candle_weights_tensor_info *ti =
            candle_weights_tensor(w, candle_weights_find_tensor(w, "blk.0.ffn_down.weight"));
        CHECK(ti && !strcmp(ti->file, "model-00002-of-00002.safetensors"));
    }
    candle_weights_close(w);
    candle_model *m = NULL;
    CHECK(candle_model_load(&m, dir, NULL) == CANDLE_OK);
    candle_model_free(m);

    /* a tensor the index promises but its shard lacks */
    write_safetensors("model-00002-of-00002.safetensors", llama_tensors + 6, N_LLAMA - 7);
    refused(CANDLE_ERR_FORMAT, "model.safetensors.index.json: tensor 'model.layers.0.self_attn.rotary_emb.inv_freq'",
            "does not hold it");
    /* a missing shard */
    remove_file("model-00002-of-00002.safetensors");
    refused(CANDLE_ERR_IO, "model-00002-of-00002.safetensors", NULL);
    /* a shard outside the directory */
    write_file("model.safetensors.index.json", "{\"weight_map\": {\"a\": \"../x.safetensors\"}}");
    refused(CANDLE_ERR_FORMAT, "weight_map['a'] is not a file name", NULL);
    remove_file("model.safetensors.index.json");
    remove_file("model-00001-of-00002.safetensors");
}

static void test_refusals(void) {
    refused(CANDLE_ERR_IO, "no config.json", NULL);
    write_file("config.json", "{\"model_type\": \"llama\"");
    refused(CANDLE_ERR_FORMAT, "config.json: byte ", "unterminated object");
    write_file("config.json", "{\"model_type\": \"bart\"}");
    refused(CANDLE_ERR_UNSUPPORTED, "config.json: model_type 'bart' is not supported", "qwen2");
    write_file("config.json", "{\"hidden_size\": 4}");
    refused(CANDLE_ERR_FORMAT, "config.json: no string field 'model_type'", NULL);
    write_file("config.json", "{\"model_type\": \"llama\", \"hidden_size\": \"4\"}");
    refused(CANDLE_ERR_FORMAT, "config.json: field 'hidden_size' is string, want a non-negative integer", NULL);
    write_file("config.json", "{\"model_type\": \"llama\", \"hidden_act\": \"relu\"}");
    refused(CANDLE_ERR_UNSUPPORTED, "hidden_act 'relu' is not supported for llama", NULL);
    write_file("config.json", "{\"model_type\": \"gemma3_text\", \"layer_types\": [\"sliding_attention\", "
                              "\"full_attention\", \"full_attention\"]}");
    refused(CANDLE_ERR_UNSUPPORTED, "layer_types is not one full-attention layer every 2 layers", NULL);
    write_file("config.json", "{\"model_type\": \"llama\"}");
    refused(CANDLE_ERR_IO, "no model.safetensors or model.safetensors.index.json", NULL);
    st_tensor odd[] = {{"model.layers.0.mlp.experts.0.w1.weight", "F32", 1, {4, 0}}};
    write_safetensors("model.safetensors", odd, 1);
    refused(CANDLE_ERR_FORMAT, "model.safetensors: tensor 'model.layers.0.mlp.experts.0.w1.weight' is not part of a llama model", NULL);
    st_tensor both[] = {{"model.layers.0.mlp.up_proj.weight", "F32", 1, {4, 0}},
                        {"model.layers.0.mlp.gate_up_proj.weight", "F32", 1, {4, 0}}};
    write_safetensors("model.safetensors", both, 2);
    refused(CANDLE_ERR_FORMAT, "are both blk.0.ffn_up.weight", NULL);
    llama_dir("");
    write_file("config.json", "{\"model_type\": \"llama\", \"tie_word_embeddings\": false}");
    refused(CANDLE_ERR_FORMAT, "tie_word_embeddings false but no file holds lm_head.weight", NULL);
    remove_file("model.safetensors");
    remove_file("config.json");
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/candle-weights-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        test_skip("test_weights", "cannot make a temporary directory");
        return test_done("test_weights");
    }
    test_refusals();
    test_llama_dir();
    test_llama_model();
    test_gemma_norms();
    test_shards();
    remove_file("config.json");
    remove_file("model.safetensors");
    rmdir(dir);
    return test_done("test_weights");
}
