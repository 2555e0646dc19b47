/* whisper.cpp ggml reader: a file built here (f32, f16, q8_0 and q4_k
 * tensors, a vocabulary with an empty token, unaligned data), one malformed
 * file per validation rule (format error naming the file, the field or
 * tensor and the reason), every truncation of the valid file, the mmap and
 * no_mmap paths, and whisper.cpp's own for-tests-ggml-tiny.en.bin (a real
 * header, filters and vocabulary, no tensors) when the peer checkout is
 * there. */
#include <stdint.h>
#include <stdio.h>

#include "test.h"

typedef struct buf {
    uint8_t b[8192];
    size_t n;
} buf;

static void put(buf *f, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) f->b[f->n++] = (uint8_t)(v >> (8 * i));
}
static void put_bytes(buf *f, const void *p, size_t n) {
    if (n) memcpy(f->b + f->n, p, n);
    f->n += n;
}
static void put_tok(buf *f, const char *s) {
    put(f, strlen(s), 4);
    put_bytes(f, s, strlen(s));
}
/* ne innermost-first; data n bytes (zeros when NULL) */
static void put_tensor(buf *f, const char *name, int n_dims, const int32_t *ne, int type, size_t n) {
    put(f, (uint64_t)n_dims, 4);
    put(f, strlen(name), 4);
    put(f, (uint64_t)type, 4);
    for (int i = 0; i < n_dims; i++) put(f, (uint32_t)ne[i], 4);
    put_bytes(f, name, strlen(name));
    for (size_t i = 0; i < n; i++) f->b[f->n++] = (uint8_t)(i * 7 + 1);
}

/* hparams of a small model (n_vocab 5 ... ftype 1), 2x3 filters, 3 tokens */
static void head(buf *f, int n_tok) {
    f->n = 0;
    put(f, 0x67676d6c, 4);
    static const int32_t hp[11] = {5, 6, 8, 2, 1, 4, 8, 2, 1, 2, 1};
    for (int i = 0; i < 11; i++) put(f, (uint32_t)hp[i], 4);
    put(f, 2, 4), put(f, 3, 4);
    for (int i = 0; i < 6; i++) {
        float x = (float)i * 0.5f;
        put_bytes(f, &x, 4);
    }
    put(f, (uint32_t)n_tok, 4);
    if (n_tok >= 3) put_tok(f, "a"), put_tok(f, ""), put_tok(f, " the");
}

static void valid(buf *f) {
    head(f, 3);
    put_tensor(f, "encoder.conv1.bias", 2, (int32_t[]){1, 8}, 0, 32);
    put_tensor(f, "encoder.conv1.weight", 3, (int32_t[]){3, 2, 8}, 1, 96);
    put_tensor(f, "decoder.token_embedding.weight", 2, (int32_t[]){32, 5}, 8, 5 * 34);
    put_tensor(f, "x.k", 1, (int32_t[]){256}, 12, 144);
}

static candle_ggml_whisper *open_buf(const buf *f, const char *name) {
    candle_ggml_whisper *m = NULL;
    candle_status s = candle_ggml_whisper_open_memory(&m, f->b, f->n, name);
    CHECK_MSG(s == CANDLE_OK, "%s", candle_last_errmsg());
    return m;
}

static void expect_err(const buf *f, const char *sub) {
    candle_ggml_whisper *m = (candle_ggml_whisper *)1;
    candle_status s = candle_ggml_whisper_open_memory(&m, f->b, f->n, "ggml-x.bin");
    CHECK_MSG(s == CANDLE_ERR_FORMAT, "%s: got %s", sub, candle_status_name(s));
    CHECK(m == NULL);
    CHECK_CONTAINS(candle_last_errmsg(), "ggml-x.bin: ");
    CHECK_CONTAINS(candle_last_errmsg(), sub);
}

static void test_valid(candle_ctx *ctx) {
    buf f;
    valid(&f);
    CHECK(candle_ggml_whisper_probe(f.b, f.n));
    candle_ggml_whisper *m = open_buf(&f, "mem.bin");
    if (!m) return;
    const candle_ggml_whisper_hparams *hp = candle_ggml_whisper_get_hparams(m);
    CHECK(hp->n_vocab == 5 && hp->n_audio_state == 8 && hp->n_mels == 2 && hp->ftype == 1);
    int32_t nm, nf;
    const void *mel = candle_ggml_whisper_mel_filters(m, &nm, &nf);
    float x;
    CHECK(mel && nm == 2 && nf == 3);
    if (mel) {
        memcpy(&x, (const uint8_t *)mel + 20, 4);
        CHECK(x == 2.5f);
    }
    CHECK(candle_ggml_whisper_n_tokens(m) == 3);
    const char *tb;
    size_t tl;
    CHECK(candle_ggml_whisper_token(m, 2, &tb, &tl) && tl == 4 && !memcmp(tb, " the", 4));
    CHECK(candle_ggml_whisper_token(m, 1, &tb, &tl) && tl == 0);
    CHECK(!candle_ggml_whisper_token(m, 3, &tb, &tl) && !candle_ggml_whisper_token(m, -1, &tb, &tl));
    CHECK(candle_ggml_whisper_n_tensors(m) == 4);
    const candle_ggml_whisper_tensor_info *t = candle_ggml_whisper_tensor(m, 1);
    CHECK(!strcmp(t->name, "encoder.conv1.weight") && t->dtype == CANDLE_DTYPE_F16 && t->rank == 3 &&
          t->shape[0] == 8 && t->shape[1] == 2 && t->shape[2] == 3 && t->size == 96);
    CHECK((const uint8_t *)t->data == f.b + t->offset);
    t = candle_ggml_whisper_tensor(m, 2);
    CHECK(t->dtype == CANDLE_DTYPE_Q8_0 && t->ggml_type == 8 && t->shape[0] == 5 && t->shape[1] == 32);
    CHECK(candle_ggml_whisper_tensor(m, 3)->dtype == CANDLE_DTYPE_Q4_K);
    CHECK(candle_ggml_whisper_tensor(m, 4) == NULL);
    CHECK(candle_ggml_whisper_find_tensor(m, "x.k") == 3);
    CHECK(candle_ggml_whisper_find_tensor(m, "encoder.conv1.bias") == 0);
    CHECK(candle_ggml_whisper_find_tensor(m, "x") == -1);
    candle_tensor *lt = candle_ggml_whisper_load_tensor(m, ctx, "decoder.token_embedding.weight");
    CHECK(lt && candle_tensor_dtype(lt) == CANDLE_DTYPE_Q8_0 && candle_tensor_numel(lt) == 160);
    if (lt) CHECK(candle_tensor_nbytes(lt) == 170 && !memcmp(candle_tensor_data(lt), t->data, 170));
    CHECK(candle_ggml_whisper_load_tensor(m, ctx, "nothing") == NULL);
    CHECK_CONTAINS(candle_errmsg(ctx), "mem.bin: tensor 'nothing': not found");
    candle_ctx_clear_error(ctx);
    candle_ggml_whisper_close(m);
}

static void test_malformed(void) {
    buf f;
    valid(&f);
    f.b[0] ^= 1;
    expect_err(&f, "magic: not a whisper.cpp ggml file");
    CHECK(!candle_ggml_whisper_probe(f.b, f.n));
    valid(&f);
    memset(f.b + 4 + 4 * 4, 0, 4); /* n_audio_layer 0 */
    expect_err(&f, "hparams.n_audio_layer: must be positive (at byte 20)");
    valid(&f);
    memset(f.b + 44, 0xff, 4); /* ftype -1 */
    expect_err(&f, "hparams.ftype: negative");
    head(&f, 0);
    f.n -= 4 + 24 + 8;
    put(&f, 0x7fffffff, 4), put(&f, 0x7fffffff, 4);
    expect_err(&f, "mel filters: n_mel x n_fft floats run past the end of the file");
    head(&f, 0);
    f.n -= 4;
    put(&f, 0x7fffffff, 4);
    expect_err(&f, "vocabulary count: more tokens than the file can hold");
    head(&f, 0);
    f.n -= 4;
    put(&f, 0x80000000u, 4);
    expect_err(&f, "vocabulary count: negative");
    head(&f, 0);
    f.n -= 4;
    put(&f, 1, 4), put(&f, 0xffffffffu, 4);
    expect_err(&f, "vocabulary token: token bytes run past the end of the file");
    head(&f, 3);
    put_tensor(&f, "w", 5, (int32_t[]){1, 1, 1, 1, 1}, 0, 4);
    expect_err(&f, "tensor header: n_dims not in 1..4");
    head(&f, 3);
    put_tensor(&f, "", 1, (int32_t[]){1}, 0, 4);
    expect_err(&f, "empty tensor name");
    head(&f, 3);
    put_tensor(&f, "w", 2, (int32_t[]){4, 0}, 0, 0);
    expect_err(&f, "tensor dims: dimension not positive");
    head(&f, 3);
    put_tensor(&f, "w", 2, (int32_t[]){4, -3}, 0, 0);
    expect_err(&f, "tensor dims: dimension not positive");
    head(&f, 3);
    put_tensor(&f, "w", 1, (int32_t[]){4}, 16, 4);
    expect_err(&f, "w: ggml type 16 (iq2_xxs) is not one Candle reads");
    head(&f, 3);
    put_tensor(&f, "w", 1, (int32_t[]){4}, 26, 16);
    expect_err(&f, "ggml type 26 (i32)");
    head(&f, 3);
    put_tensor(&f, "w", 1, (int32_t[]){4}, 99, 16);
    expect_err(&f, "ggml type 99 (?)");
    head(&f, 3);
    put_tensor(&f, "w", 2, (int32_t[]){48, 2}, 2, 36);
    expect_err(&f, "w: row of 48 elements is not a whole number of q4_0 blocks (32)");
    head(&f, 3);
    put_tensor(&f, "w", 4, (int32_t[]){0x40000000, 0x7fffffff, 0x7fffffff, 0x7fffffff}, 0, 0);
    expect_err(&f, "w: data runs past the end of the file");
    head(&f, 3);
    put_tensor(&f, "w", 1, (int32_t[]){3}, 0, 11);
    expect_err(&f, "w: data runs past the end of the file");
    head(&f, 3);
    put_tensor(&f, "b", 1, (int32_t[]){1}, 0, 4);
    put_tensor(&f, "a", 1, (int32_t[]){1}, 0, 4);
    put_tensor(&f, "b", 1, (int32_t[]){2}, 1, 4);
    expect_err(&f, "b: tensor name appears twice");
    head(&f, 3);
    put(&f, 1, 4), put(&f, 3, 4), put(&f, 0, 4), put(&f, 1, 4), put_bytes(&f, "a\0b", 3);
    put(&f, 0, 4);
    expect_err(&f, "tensor name: name holds a NUL");
    head(&f, 3);
    put(&f, 1, 4), put(&f, 1000, 4), put(&f, 0, 4), put(&f, 1, 4), put_bytes(&f, "abc", 3);
    expect_err(&f, "tensor name: name runs past the end of the file");
    head(&f, 3);
    put(&f, 2, 4), put(&f, 1, 4); /* a partial header at the end */
    expect_err(&f, "tensor header: truncated");

    /* every truncation of the valid file fails cleanly, except right after
     * a tensor (a shorter valid file) */
    buf v;
    valid(&v);
    int ok = 0;
    for (size_t n = 0; n < v.n; n++) {
        candle_ggml_whisper *m = NULL;
        candle_status s = candle_ggml_whisper_open_memory(&m, v.b, n, "t.bin");
        CHECK(s == CANDLE_OK || (s == CANDLE_ERR_FORMAT && !m));
        if (!s) ok++;
        candle_ggml_whisper_close(m);
    }
    CHECK_MSG(ok == 4, "%d truncations opened (want the end of the vocabulary and 3 tensors)", ok);
}

static void test_files(void) {
    buf f;
    valid(&f);
    char path[256];
    snprintf(path, sizeof path, "/tmp/candle_test_ggml_whisper_%d.bin", (int)getpid());
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(f.b, 1, f.n, fp) == f.n);
    if (fp) fclose(fp);
    for (int no_mmap = 0; no_mmap < 2; no_mmap++) {
        candle_ggml_whisper_open_params p = {.no_mmap = no_mmap};
        candle_ggml_whisper *m = NULL;
        CHECK_MSG(candle_ggml_whisper_open(&m, path, &p) == CANDLE_OK, "%s", candle_last_errmsg());
        if (!m) continue;
        const candle_ggml_whisper_tensor_info *t = candle_ggml_whisper_tensor(m, 3);
        CHECK(!strcmp(t->name, "x.k") && !memcmp(t->data, f.b + t->offset, t->size));
        const char *tb;
        size_t tl;
        CHECK(candle_ggml_whisper_token(m, 2, &tb, &tl) && !memcmp(tb, " the", 4));
        CHECK(candle_ggml_whisper_file_size(m) == f.n);
        candle_ggml_whisper_close(m);
    }
    unlink(path);
    candle_ggml_whisper *m = NULL;
    CHECK(candle_ggml_whisper_open(&m, "/nonexistent/ggml.bin", NULL) != CANDLE_OK && !m);
}

/* whisper.cpp's own file: written by its converter, read by its tests. */
static void test_peer(void) {
    const char *path = "/work/peers/whisper.cpp/models/for-tests-ggml-tiny.en.bin";
    if (access(path, R_OK)) {
        printf("skip: %s absent\n", path);
        return;
    }
    candle_ggml_whisper *m = NULL;
    CHECK_MSG(candle_ggml_whisper_open(&m, path, NULL) == CANDLE_OK, "%s", candle_last_errmsg());
    if (!m) return;
    const candle_ggml_whisper_hparams *hp = candle_ggml_whisper_get_hparams(m);
    CHECK(hp->n_vocab == 51864 && hp->n_audio_layer == 4 && hp->n_audio_state == 384 && hp->n_mels == 80);
    int32_t nm, nf;
    CHECK(candle_ggml_whisper_mel_filters(m, &nm, &nf) && nm == 80 && nf == 201);
    const char *tb;
    size_t tl;
    CHECK(candle_ggml_whisper_n_tokens(m) == 50257);
    CHECK(candle_ggml_whisper_token(m, 50256, &tb, &tl) && tl == 13 && !memcmp(tb, "<|endoftext|>", 13));
    CHECK(candle_ggml_whisper_n_tensors(m) == 0);
    candle_ggml_whisper_close(m);
}

int main(void) {
    candle_ctx *ctx = NULL;
    if (candle_ctx_init(&ctx, NULL) != CANDLE_OK) return 1;
    test_valid(ctx);
    test_malformed();
    test_files();
    test_peer();
    candle_ctx_free(ctx);
    return test_done("test_ggml_whisper");
}
