/* CTranslate2 model.bin reader: files built here (every dtype, scalars,
 * aliases as CTranslate2 resolves them, the older binary versions), one
 * malformed file per validation rule (format error naming the file, the
 * variable or field and the reason), every truncation of a valid file, the
 * mmap and no_mmap paths, and the real Whisper tiny.en when
 * scripts/fetch-whisper.sh has fetched it (its variables, shapes, dtype and
 * alias as the reference converter wrote them). */
#include <stdint.h>

#include "test.h"

/* ---- a growing byte buffer for building files ---- */
typedef struct buf {
    uint8_t b[4096];
    size_t n;
} buf;

static void put(buf *f, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) f->b[f->n++] = (uint8_t)(v >> (8 * i));
}
static void put_str(buf *f, const char *s) {
    size_t len = strlen(s) + 1;
    put(f, len, 2);
    memcpy(f->b + f->n, s, len);
    f->n += len;
}
static void put_bytes(buf *f, const void *p, size_t n) {
    if (n) memcpy(f->b + f->n, p, n);
    f->n += n;
}
/* A version 6 variable: name, dims, dtype id, nbytes, data (n bytes). */
static void put_var(buf *f, const char *name, int rank, const uint32_t *dims, int dt,
                    uint32_t nbytes, const void *data, size_t n) {
    put_str(f, name);
    put(f, (uint64_t)rank, 1);
    for (int i = 0; i < rank; i++) put(f, dims[i], 4);
    put(f, (uint64_t)dt, 1);
    put(f, nbytes, 4);
    put_bytes(f, data, n);
}
static void header(buf *f, uint32_t version, uint32_t n_vars) {
    f->n = 0;
    put(f, version, 4);
    put_str(f, "WhisperSpec");
    put(f, 3, 4);
    put(f, n_vars, 4);
}

static const uint8_t DATA[64] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                 0xff, 0x7f, 0x00, 0x80, 0x01, 0x00};

/* The valid file the malformed cases start from: f16 [2,3], i16 scalar,
 * f32 [1], i8 [0,5]; aliases (see test_aliases). */
static void valid(buf *f) {
    header(f, 6, 4);
    put_var(f, "enc/w", 2, (uint32_t[]){2, 3}, 4, 12, DATA, 12);
    put_var(f, "enc/num_heads", 0, NULL, 2, 2, DATA + 16, 2);
    put_var(f, "dec/b", 1, (uint32_t[]){1}, 0, 4, DATA, 4);
    put_var(f, "dec/empty", 2, (uint32_t[]){0, 5}, 1, 0, NULL, 0);
    put(f, 7, 4);
    put_str(f, "dec/proj"); /* -> a variable */
    put_str(f, "enc/w");
    put_str(f, "dec/proj2"); /* -> an earlier alias */
    put_str(f, "dec/proj");
    put_str(f, "dec/b"); /* name taken by a variable: ignored */
    put_str(f, "enc/w");
    put_str(f, "dec/dangling"); /* target missing: ignored */
    put_str(f, "nothing");
    put_str(f, "dec/proj"); /* second alias of a name: the first wins */
    put_str(f, "dec/b");
    put_str(f, "dec/late"); /* ignored (no target), so the name stays free */
    put_str(f, "missing");
    put_str(f, "dec/late"); /* ... for this one */
    put_str(f, "dec/b");
}

static candle_ct2 *open_buf(const buf *f, const char *name) {
    candle_ct2 *m = NULL;
    candle_status s = candle_ct2_open_memory(&m, f->b, f->n, name);
    CHECK_MSG(s == CANDLE_OK, "%s", candle_last_errmsg());
    return m;
}

static void expect_err(const buf *f, const char *sub) {
    candle_ct2 *m = (candle_ct2 *)1;
    candle_status s = candle_ct2_open_memory(&m, f->b, f->n, "model.bin");
    CHECK_MSG(s == CANDLE_ERR_FORMAT, "%s: got %s", sub, candle_status_name(s));
    CHECK(m == NULL);
    CHECK_CONTAINS(candle_last_errmsg(), "model.bin: ");
    CHECK_CONTAINS(candle_last_errmsg(), sub);
}

static void test_valid(candle_ctx *ctx) {
    buf f;
    valid(&f);
    candle_ct2 *m = open_buf(&f, "mem.bin");
    if (!m) return;
    CHECK(candle_ct2_version(m) == 6 && candle_ct2_revision(m) == 3);
    CHECK(!strcmp(candle_ct2_spec(m), "WhisperSpec"));
    CHECK(candle_ct2_n_vars(m) == 4 && candle_ct2_n_aliases(m) == 7);
    const candle_ct2_var_info *w = candle_ct2_var(m, 0);
    CHECK(!strcmp(w->name, "enc/w") && w->ct2_dtype == CANDLE_CT2_F16 &&
          w->dtype == CANDLE_DTYPE_F16 && w->rank == 2 && w->shape[0] == 2 && w->shape[1] == 3);
    CHECK(w->size == 12 && !memcmp(w->data, DATA, 12));
    CHECK((const uint8_t *)w->data == f.b + w->offset);
    const candle_ct2_var_info *h = candle_ct2_var(m, 1);
    CHECK(h->rank == 0 && h->ct2_dtype == CANDLE_CT2_I16 && h->dtype == CANDLE_DTYPE_I32);
    CHECK(candle_ct2_var(m, 3)->size == 0 && candle_ct2_var(m, 3)->shape[0] == 0);
    CHECK(candle_ct2_var(m, 4) == NULL && candle_ct2_var(m, -1) == NULL);
    CHECK(candle_ct2_find_var(m, "dec/b") == 2 && candle_ct2_find_var(m, "dec/x") == -1);

    /* loads: i16 widened, f16 bytes as stored (view or copy) */
    candle_tensor *t = candle_ct2_load_tensor(m, ctx, "enc/num_heads");
    CHECK(t && candle_tensor_dtype(t) == CANDLE_DTYPE_I32);
    if (t) CHECK(((int32_t *)candle_tensor_data(t))[0] == 0x7fff);
    t = candle_ct2_load_tensor(m, ctx, "dec/proj2");
    CHECK(t && candle_tensor_dtype(t) == CANDLE_DTYPE_F16 && candle_tensor_numel(t) == 6);
    if (t) CHECK(!memcmp(candle_tensor_data(t), DATA, 12));
    CHECK(candle_ct2_load_tensor(m, ctx, "nothing") == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_errmsg(ctx), "mem.bin: variable 'nothing': not found");
    candle_ctx_clear_error(ctx);
    candle_ct2_close(m);
}

/* Resolution as ctranslate2's register_variable_alias does it. */
static void test_aliases(void) {
    buf f;
    valid(&f);
    candle_ct2 *m = open_buf(&f, "mem.bin");
    if (!m) return;
    static const struct {
        const char *alias;
        int64_t var;
    } want[] = {{"dec/proj", 0},  {"dec/proj2", 0}, {"dec/b", -1},   {"dec/dangling", -1},
                {"dec/proj", -1}, {"dec/late", -1}, {"dec/late", 2}};
    for (int i = 0; i < 7; i++) {
        const char *a, *t;
        int64_t v;
        CHECK(candle_ct2_alias(m, i, &a, &t, &v));
        CHECK_MSG(!strcmp(a, want[i].alias) && v == want[i].var, "alias %d: %s -> %lld", i, a,
                  (long long)v);
    }
    CHECK(!candle_ct2_alias(m, 7, NULL, NULL, NULL));
    CHECK(candle_ct2_find_var(m, "dec/late") == 2);
    CHECK(candle_ct2_find_var(m, "dec/proj") == 0 && candle_ct2_find_var(m, "dec/proj2") == 0);
    CHECK(candle_ct2_find_var(m, "dec/b") == 2 && candle_ct2_find_var(m, "dec/dangling") == -1);
    candle_ct2_close(m);
}

/* Versions 1-3: no spec (1), item sizes and element counts (< 4), no
 * aliases (< 3). */
static void test_old_versions(void) {
    buf f = {.n = 0};
    put(&f, 1, 4);
    put(&f, 1, 4);
    put_str(&f, "x");
    put(&f, 1, 1), put(&f, 3, 4), put(&f, 2, 1), put(&f, 3, 4); /* i16 [3]: 3 elements */
    put_bytes(&f, DATA, 6);
    candle_ct2 *m = open_buf(&f, "v1.bin");
    if (m) {
        CHECK(candle_ct2_version(m) == 1 && !strcmp(candle_ct2_spec(m), ""));
        CHECK(candle_ct2_revision(m) == 1 && candle_ct2_n_aliases(m) == 0);
        CHECK(candle_ct2_var(m, 0)->ct2_dtype == CANDLE_CT2_I16 && candle_ct2_var(m, 0)->size == 6);
        candle_ct2_close(m);
    }
    header(&f, 3, 1);
    put_str(&f, "y");
    put(&f, 0, 1), put(&f, 4, 1), put(&f, 1, 4); /* f32 scalar */
    put_bytes(&f, DATA, 4);
    put(&f, 0, 4); /* no aliases */
    m = open_buf(&f, "v3.bin");
    if (m) {
        CHECK(candle_ct2_var(m, 0)->ct2_dtype == CANDLE_CT2_F32 && candle_ct2_var(m, 0)->size == 4);
        candle_ct2_close(m);
    }
    header(&f, 3, 1);
    put_str(&f, "y");
    put(&f, 0, 1), put(&f, 3, 1), put(&f, 1, 4);
    put_bytes(&f, DATA, 3);
    put(&f, 0, 4);
    expect_err(&f, "y: unknown item size");
}

static void test_malformed(void) {
    buf f;
    header(&f, 7, 0);
    expect_err(&f, "version: binary version newer than 6");
    header(&f, 0, 0);
    expect_err(&f, "version: not a CTranslate2 model.bin");
    f.n = 0;
    put(&f, 6, 4);
    put(&f, 0, 2); /* zero-length string */
    expect_err(&f, "spec name: empty string");
    f.n = 0;
    put(&f, 6, 4);
    put(&f, 200, 2);
    put_bytes(&f, "Whisper", 7);
    expect_err(&f, "spec name: string runs past the end");
    f.n = 0;
    put(&f, 6, 4);
    put(&f, 4, 2);
    put_bytes(&f, "abcd", 4);
    expect_err(&f, "spec name: string does not end in NUL");
    f.n = 0;
    put(&f, 6, 4);
    put(&f, 4, 2);
    put_bytes(&f, "a\0c\0", 4);
    expect_err(&f, "spec name: string holds a NUL");
    header(&f, 6, 0xffffffffu);
    expect_err(&f, "variable count: more variables than the file can hold");

    header(&f, 6, 1);
    put_var(&f, "w", 7, (uint32_t[]){1, 1, 1, 1, 1, 1, 1}, 0, 4, DATA, 4);
    expect_err(&f, "w: rank above Candle's limit");
    header(&f, 6, 1);
    put_var(&f, "w", 1, (uint32_t[]){1}, 6, 4, DATA, 4);
    expect_err(&f, "w: unknown dtype id");
    header(&f, 6, 1);
    put_var(&f, "w", 1, (uint32_t[]){2}, 0, 4, DATA, 4);
    expect_err(&f, "w: byte count does not match the shape and dtype");
    header(&f, 6, 1); /* 2^16 x 2^16 x 1 passes 2^32 elements: refused before the byte count */
    put_var(&f, "w", 3, (uint32_t[]){65536, 65536, 1}, 0, 0, NULL, 0);
    expect_err(&f, "w: dimensions multiply past 2^32 elements");
    header(&f, 6, 1);
    put_var(&f, "w", 1, (uint32_t[]){4}, 0, 16, DATA, 8);
    put(&f, 0, 4); /* 12 bytes after the header, fewer than 16 */
    expect_err(&f, "w: data runs past the end of the file");
    header(&f, 6, 2);
    put_var(&f, "w", 0, NULL, 1, 1, DATA, 1);
    put_var(&f, "w", 0, NULL, 1, 1, DATA, 1);
    put(&f, 0, 4);
    expect_err(&f, "w: variable name appears twice");

    header(&f, 6, 0);
    put(&f, 1000, 4);
    expect_err(&f, "alias count: more aliases than the file can hold");
    header(&f, 6, 0);
    put(&f, 1, 4);
    put_str(&f, "a");
    put(&f, 200, 2);
    put(&f, 0, 2);
    expect_err(&f, "a: string runs past the end");
    valid(&f);
    put(&f, 0, 1);
    expect_err(&f, "end: trailing bytes after the aliases");

    /* every truncation of the valid file is an error, never a read past it */
    buf full;
    valid(&full);
    for (size_t n = 0; n < full.n; n++) {
        candle_ct2 *m = (candle_ct2 *)1;
        uint8_t *cut = malloc(n ? n : 1); /* exactly n bytes, for ASan */
        memcpy(cut, full.b, n);
        candle_status s = candle_ct2_open_memory(&m, cut, n, "cut.bin");
        CHECK_MSG(s == CANDLE_ERR_FORMAT && !m, "truncated to %zu: %s", n, candle_status_name(s));
        free(cut);
    }
}

static void test_probe(void) {
    buf f;
    valid(&f);
    CHECK(candle_ct2_probe(f.b, f.n));
    CHECK(candle_ct2_probe(f.b, 18)); /* version, length, "WhisperSpec\0" */
    CHECK(!candle_ct2_probe(f.b, 17));
    CHECK(!candle_ct2_probe("GGUF\3\0\0\0\0\0\0\0\0\0\0\0", 16));
    CHECK(!candle_ct2_probe(NULL, 0));
}

static void test_file(candle_ctx *ctx) {
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char path[600];
    snprintf(path, sizeof path, "%s/candle_ct2_%d.bin", tmp, (int)getpid());
    buf f;
    valid(&f);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        test_skip("file", "cannot write %s", path);
        return;
    }
    fwrite(f.b, 1, f.n, fp);
    fclose(fp);
    for (int no_mmap = 0; no_mmap < 2; no_mmap++) {
        candle_ct2 *m = NULL;
        candle_ct2_open_params p = {.no_mmap = no_mmap};
        CHECK_OK(NULL, candle_ct2_open(&m, path, &p));
        if (!m) continue;
        CHECK(candle_ct2_file_size(m) == f.n);
        CHECK(!strcmp(candle_ct2_var(m, 2)->name, "dec/b"));
        candle_tensor *t = candle_ct2_load_tensor(m, ctx, "dec/b");
        candle_ct2_close(m); /* the tensor keeps the image */
        CHECK(t && !memcmp(candle_tensor_data(t), DATA, 4));
    }
    fp = fopen(path, "wb");
    if (fp) fclose(fp); /* empty */
    candle_ct2 *m = NULL;
    CHECK(candle_ct2_open(&m, path, NULL) == CANDLE_ERR_FORMAT && !m);
    CHECK_CONTAINS(candle_last_errmsg(), path);
    unlink(path);
    CHECK(candle_ct2_open(&m, path, NULL) == CANDLE_ERR_IO && !m);
}

/* The real tiny.en: 148 variables, float16 weights, one alias. */
static void test_whisper_tiny(candle_ctx *ctx) {
    const char *cache = getenv("CANDLE_DATA_CACHE");
    char path[700];
    snprintf(path, sizeof path, "%s/models/whisper-tiny-en/model.bin", cache ? cache : "build-data");
    if (access(path, R_OK)) {
        test_skip("whisper tiny.en", "%s missing (scripts/fetch-whisper.sh)", path);
        return;
    }
    candle_ct2 *m = NULL;
    CHECK_OK(NULL, candle_ct2_open(&m, path, NULL));
    if (!m) return;
    CHECK(candle_ct2_version(m) == 6 && !strcmp(candle_ct2_spec(m), "WhisperSpec"));
    CHECK(candle_ct2_revision(m) == 3);
    CHECK(candle_ct2_n_vars(m) == 148 && candle_ct2_n_aliases(m) == 1);
    int64_t e = candle_ct2_find_var(m, "decoder/embeddings/weight");
    CHECK(e >= 0 && candle_ct2_find_var(m, "decoder/projection/weight") == e);
    const candle_ct2_var_info *v = candle_ct2_var(m, e);
    CHECK(v && v->ct2_dtype == CANDLE_CT2_F16 && v->shape[0] == 51864 && v->shape[1] == 384);
    v = candle_ct2_var(m, candle_ct2_find_var(m, "encoder/conv1/weight"));
    CHECK(v && v->rank == 3 && v->shape[0] == 384 && v->shape[1] == 80 && v->shape[2] == 3);
    v = candle_ct2_var(m, candle_ct2_find_var(m, "encoder/position_encodings/encodings"));
    CHECK(v && v->shape[0] == 1500 && v->shape[1] == 384);
    candle_tensor *t = candle_ct2_load_tensor(m, ctx, "encoder/num_heads");
    CHECK(t && ((int32_t *)candle_tensor_data(t))[0] == 6);
    t = candle_ct2_load_tensor(m, ctx, "decoder/num_heads");
    CHECK(t && ((int32_t *)candle_tensor_data(t))[0] == 6);
    size_t total = 0;
    for (int64_t i = 0; i < candle_ct2_n_vars(m); i++) total += candle_ct2_var(m, i)->size;
    CHECK(total < candle_ct2_file_size(m) && total > candle_ct2_file_size(m) - 16384);
    candle_ct2_close(m);
}

int main(void) {
    candle_ctx *ctx = NULL;
    CHECK_OK(NULL, candle_ctx_init(&ctx, NULL));
    test_valid(ctx);
    test_aliases();
    test_old_versions();
    test_malformed();
    test_probe();
    test_file(ctx);
    test_whisper_tiny(ctx);
    candle_ctx_free(ctx);
    return test_done("test_ct2");
}
