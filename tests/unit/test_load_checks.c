/* What loading refuses instead of running a model wrong (issue 22, finding
 * 7): a vocabulary larger than token_embd's rows, a block_count below the
 * layers in the file, attention.value_length != key_length, tensors whose
 * data overlap; special token ids outside the vocabulary are dropped with a
 * warning through the log callback. Each a committed tiny model rewritten
 * with one defect (tests/common/tiny_variant.h). */
#include <unistd.h>

#include "common/tiny_variant.h"
#include "test.h"

static char base[1024], out[1024];

static candle_status set_u32(candle_gguf_writer *w, void *user) {
    const char **kv = user; /* key, value as text */
    return candle_gguf_writer_set_u32(w, kv[0], (uint32_t)strtoul(kv[1], NULL, 10));
}

/* Model and tokenizer loaded from v: the first failing status. */
static candle_status load(const tiny_variant *v) {
    candle_status s = tiny_variant_write(base, out, v);
    CHECK_MSG(s == CANDLE_OK, "variant: %s", candle_last_errmsg());
    if (s) return CANDLE_OK;
    candle_model *m = NULL;
    candle_tokenizer *t = NULL;
    s = candle_model_load(&m, out, NULL);
    if (!s) s = candle_tokenizer_from_weights(&t, candle_model_weights(m));
    candle_tokenizer_free(t);
    candle_model_free(m);
    return s;
}

static candle_status load_with(const char *key, const char *value) {
    const char *kv[2] = {key, value};
    return load(&(tiny_variant){.edit = set_u32, .user = kv});
}

static void check_vocab_rows(void) {
    /* 512 tokens, 500 embedding (and output) rows */
    candle_status s = load(&(tiny_variant){.rows_of = {"token_embd.weight", "output.weight"},
                                           .rows = 500});
    CHECK(s == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "512 tokens");
    CHECK_CONTAINS(candle_last_errmsg(), "500 rows");
}

static void check_block_count(void) {
    CHECK(load_with("qwen2.block_count", "1") == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "block_count is 1");
    CHECK_CONTAINS(candle_last_errmsg(), "blk.1");
    CHECK_OK(NULL, load_with("qwen2.block_count", "2"));
}

static void check_value_length(void) {
    CHECK(load_with("qwen2.attention.value_length", "16") == CANDLE_ERR_UNSUPPORTED);
    CHECK_CONTAINS(candle_last_errmsg(), "qwen2.attention.value_length 16");
    CHECK_CONTAINS(candle_last_errmsg(), "key length 8");
    CHECK_OK(NULL, load_with("qwen2.attention.value_length", "8"));
}

static char warned[512];

static void on_log(candle_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == CANDLE_LOG_WARN && strstr(msg, "token id")) snprintf(warned, sizeof warned, "%s", msg);
}

static void check_special_ids(void) {
    candle_log_set_callback(on_log, NULL);
    CHECK_OK(NULL, load_with("tokenizer.ggml.bos_token_id", "99999"));
    CHECK_CONTAINS(warned, "BOS token id 99999 is outside the vocabulary of 512 tokens");
    warned[0] = 0;
    CHECK_OK(NULL, load_with("tokenizer.ggml.eos_token_id", "512"));
    CHECK_CONTAINS(warned, "EOS token id 512");
    candle_log_set_callback(NULL, NULL);
}

/* Two tensors, the second's offset patched to the first's. */
static void check_overlap(void) {
    candle_gguf_writer *w = NULL;
    float a[8] = {0}, b[8] = {0};
    CHECK_OK(NULL, candle_gguf_writer_init(&w));
    CHECK_OK(NULL, candle_gguf_writer_add_tensor(w, "first", CANDLE_DTYPE_F32, 1, (int64_t[]){8}, a));
    CHECK_OK(NULL, candle_gguf_writer_add_tensor(w, "second", CANDLE_DTYPE_F32, 1, (int64_t[]){8}, b));
    void *img = NULL;
    size_t n = 0;
    CHECK_OK(NULL, candle_gguf_writer_write_memory(w, &img, &n));
    candle_gguf_writer_free(w);
    unsigned char *p = img;
    /* name "second", u32 n_dims, u64 dim, u32 type, then the u64 offset */
    unsigned char *name = p ? memmem(p, n, "second", 6) : NULL;
    CHECK(name != NULL);
    if (name) {
        memset(name + 6 + 4 + 8 + 4, 0, 8);
        candle_gguf *g = NULL;
        CHECK(candle_gguf_open_memory(&g, img, n) == CANDLE_ERR_FORMAT);
        CHECK_CONTAINS(candle_last_errmsg(), "tensor 'second'");
        CHECK_CONTAINS(candle_last_errmsg(), "overlaps tensor 'first'");
        candle_gguf_close(g);
    }
    candle_free(img);
}

int main(void) {
    test_path("tests/data/tiny/qwen2.gguf", base, sizeof base);
    if (access(base, R_OK)) {
        test_skip("test_load_checks", "%s absent", base);
        return test_done("test_load_checks");
    }
    snprintf(out, sizeof out, "%s/test_load_checks.gguf",
             getenv("CANDLE_BINARY_DIR") ? getenv("CANDLE_BINARY_DIR") : ".");
    CHECK_OK(NULL, load(&(tiny_variant){0})); /* the base itself loads */
    check_vocab_rows();
    check_block_count();
    check_value_length();
    check_special_ids();
    check_overlap();
    remove(out);
    return test_done("test_load_checks");
}
