/* GGUF reader and writer: round trip, real files, and malformed inputs
 * (every truncation, patched fields) that must give a format error naming
 * the field and an offset.
 *
 * `test_gguf --write PATH` only writes the sample file (for the Python
 * cross-check in test_gguf_python.sh). */
#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#define SAMPLE_ALIGN 64

static const float t_f32[2 * 3] = {1.5f, -2.0f, 3.25f, 0.0f, -0.5f, 1e-3f};
static uint16_t t_f16[4];
static uint8_t t_q8[2 * 34]; /* two q8_0 blocks: [2, 32] */
static const int32_t t_i32[5] = {7, -8, 9, 2147483647, -2147483647 - 1};

static const char *const strs_sample[3] = {"<unk>", "", "h\xc3\xa9llo \"q\""};

static void fill_data(void) {
    for (int i = 0; i < 4; i++) t_f16[i] = candle_f32_to_f16((float)i - 1.5f);
    for (size_t i = 0; i < sizeof t_q8; i++) t_q8[i] = (uint8_t)(i * 7 + 1);
}

/* A small file with every scalar type the writer sets, arrays, and tensors
 * of several dtypes; the alignment is not the default. */
static candle_status write_sample(const char *path) {
    fill_data();
    candle_gguf_writer *w = NULL;
    candle_status s = candle_gguf_writer_init(&w);
    if (s) return s;
    static const int32_t ints[3] = {-1, 0, 65536};
    static const float floats[2] = {0.25f, -8.0f};
    static const uint8_t bytes[5] = {1, 2, 3, 250, 255};
    const char *const *strs = strs_sample;
    if (!s) s = candle_gguf_writer_set_str(w, "general.architecture", "llama");
    if (!s) s = candle_gguf_writer_set_str(w, "general.name", "sample");
    if (!s) s = candle_gguf_writer_set_alignment(w, SAMPLE_ALIGN);
    if (!s) s = candle_gguf_writer_set_u32(w, "test.u32", 4000000000u);
    if (!s) s = candle_gguf_writer_set_i32(w, "test.i32", -42);
    if (!s) s = candle_gguf_writer_set_f32(w, "test.f32", 1e-5f);
    if (!s) s = candle_gguf_writer_set_bool(w, "test.bool", true);
    if (!s) s = candle_gguf_writer_set_str(w, "test.str", "placeholder");
    if (!s) s = candle_gguf_writer_set_str(w, "test.str", "replaced"); /* replaces */
    if (!s) s = candle_gguf_writer_set_arr(w, "test.arr_i32", CANDLE_GGUF_INT32, ints, 3);
    if (!s) s = candle_gguf_writer_set_arr(w, "test.arr_f32", CANDLE_GGUF_FLOAT32, floats, 2);
    if (!s) s = candle_gguf_writer_set_arr(w, "test.arr_u8", CANDLE_GGUF_UINT8, bytes, 5);
    if (!s) s = candle_gguf_writer_set_arr(w, "test.arr_str", CANDLE_GGUF_STRING, strs, 3);
    if (!s) s = candle_gguf_writer_add_tensor(w, "w.f32", CANDLE_DTYPE_F32, 2,
                                              (int64_t[]){2, 3}, t_f32);
    if (!s) s = candle_gguf_writer_add_tensor(w, "w.f16", CANDLE_DTYPE_F16, 1,
                                              (int64_t[]){4}, t_f16);
    if (!s) s = candle_gguf_writer_add_tensor(w, "w.q8_0", CANDLE_DTYPE_Q8_0, 2,
                                              (int64_t[]){2, 32}, t_q8);
    if (!s) s = candle_gguf_writer_add_tensor(w, "w.i32", CANDLE_DTYPE_I32, 3,
                                              (int64_t[]){1, 5, 1}, t_i32);
    if (!s) s = candle_gguf_writer_write(w, path);
    candle_gguf_writer_free(w);
    return s;
}

static unsigned char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(len > 0 ? (size_t)len : 1);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

static void check_sample(const candle_gguf *g) {
    CHECK(candle_gguf_version(g) == 3);
    CHECK(candle_gguf_alignment(g) == SAMPLE_ALIGN);
    uint32_t u32 = 0;
    int64_t i64 = 0;
    float f32 = 0;
    bool b = false;
    const char *s;
    size_t len;
    CHECK(candle_gguf_get_u32(g, "test.u32", &u32) && u32 == 4000000000u);
    CHECK(candle_gguf_get_i64(g, "test.u32", &i64) && i64 == 4000000000);
    CHECK(candle_gguf_get_i64(g, "test.i32", &i64) && i64 == -42);
    CHECK(!candle_gguf_get_u32(g, "test.i32", &u32)); /* negative: not lossless */
    CHECK(candle_gguf_get_f32(g, "test.f32", &f32) && f32 == 1e-5f);
    CHECK(candle_gguf_get_f32(g, "test.i32", &f32) && f32 == -42.0f);
    CHECK(!candle_gguf_get_f32(g, "test.str", &f32));
    CHECK(candle_gguf_get_bool(g, "test.bool", &b) && b);
    CHECK(candle_gguf_get_str(g, "test.str", &s, &len) && len == 8 && !memcmp(s, "replaced", 8));
    CHECK(!candle_gguf_get_str(g, "missing.key", &s, &len));
    CHECK(candle_gguf_find_key(g, "missing.key") == -1);
    candle_gguf_type et;
    int64_t n;
    CHECK(candle_gguf_get_arr(g, "test.arr_i32", &et, &n) && et == CANDLE_GGUF_INT32 && n == 3);
    const int32_t *ai = candle_gguf_arr_data(g, "test.arr_i32");
    CHECK(ai && ai[0] == -1 && ai[1] == 0 && ai[2] == 65536);
    CHECK(((uintptr_t)ai % 4) == 0);
    const float *af = candle_gguf_arr_data(g, "test.arr_f32");
    CHECK(af && af[0] == 0.25f && af[1] == -8.0f && ((uintptr_t)af % 4) == 0);
    const uint8_t *au = candle_gguf_arr_data(g, "test.arr_u8");
    CHECK(au && au[3] == 250 && au[4] == 255);
    CHECK(candle_gguf_get_arr(g, "test.arr_str", &et, &n) && et == CANDLE_GGUF_STRING && n == 3);
    CHECK(candle_gguf_arr_str(g, "test.arr_str", 0, &s, &len) && len == 5 &&
          !memcmp(s, "<unk>", 5));
    CHECK(candle_gguf_arr_str(g, "test.arr_str", 1, &s, &len) && len == 0);
    CHECK(candle_gguf_arr_str(g, "test.arr_str", 2, &s, &len) && len == 10 &&
          !memcmp(s, strs_sample[2], 10));
    CHECK(!candle_gguf_arr_str(g, "test.arr_str", 3, &s, &len));
    CHECK(!candle_gguf_arr_str(g, "test.arr_str", -1, &s, &len));
    CHECK(candle_gguf_arr_data(g, "test.arr_str") == NULL);

    char buf[256];
    int64_t k = candle_gguf_find_key(g, "test.arr_str");
    CHECK(k >= 0 && candle_gguf_kv_type(g, k) == CANDLE_GGUF_ARRAY);
    CHECK_CONTAINS(candle_gguf_kv_str(g, k, buf, sizeof buf), "[str x 3]");
    CHECK_CONTAINS(buf, "\\\"q\\\"");
    k = candle_gguf_find_key(g, "test.f32");
    CHECK(!strcmp(candle_gguf_kv_str(g, k, buf, sizeof buf), "1e-05"));
    CHECK(strlen(candle_gguf_kv_str(g, k, buf, 4)) == 3); /* truncated, terminated */

    CHECK(candle_gguf_n_tensors(g) == 4);
    static const struct {
        const char *name;
        candle_dtype dtype;
        int rank;
        int64_t shape[3];
        size_t size;
        const void *data;
    } want[] = {
        {"w.f32", CANDLE_DTYPE_F32, 2, {2, 3}, 24, t_f32},
        {"w.f16", CANDLE_DTYPE_F16, 1, {4}, 8, t_f16},
        {"w.q8_0", CANDLE_DTYPE_Q8_0, 2, {2, 32}, 68, t_q8},
        {"w.i32", CANDLE_DTYPE_I32, 3, {1, 5, 1}, 20, t_i32},
    };
    const unsigned char *base = candle_gguf_storage(g)->data;
    for (int i = 0; i < 4; i++) {
        int64_t j = candle_gguf_find_tensor(g, want[i].name);
        const candle_gguf_tensor_info *ti = candle_gguf_tensor(g, j);
        CHECK_MSG(j == i && ti, "%s", want[i].name);
        if (!ti) continue;
        CHECK(!strcmp(ti->name, want[i].name));
        CHECK(ti->dtype == want[i].dtype && ti->rank == want[i].rank);
        for (int d = 0; d < ti->rank; d++) CHECK(ti->shape[d] == want[i].shape[d]);
        CHECK(ti->size == want[i].size);
        CHECK(ti->offset % SAMPLE_ALIGN == 0);
        CHECK(!memcmp(base + ti->offset, want[i].data, ti->size));
    }
    CHECK(candle_gguf_find_tensor(g, "nope") == -1);
    CHECK(candle_gguf_tensor(g, 4) == NULL && candle_gguf_tensor(g, -1) == NULL);
}

/* Tensors loaded from the file stay valid after the handle is closed. */
static void check_load(const char *path, bool no_mmap) {
    candle_gguf *g = NULL;
    candle_gguf_open_params p = {.no_mmap = no_mmap};
    CHECK_OK(NULL, candle_gguf_open(&g, path, &p));
    if (!g) return;
    check_sample(g);
    CHECK(candle_gguf_storage(g)->kind == (no_mmap ? CANDLE_STORAGE_HEAP : CANDLE_STORAGE_MMAP));
    candle_ctx *ctx = NULL;
    CHECK_OK(NULL, candle_ctx_init(&ctx, NULL));
    candle_tensor *t = candle_gguf_load_tensor(g, ctx, "w.f32");
    candle_tensor *q = candle_gguf_load_tensor(g, ctx, "w.q8_0");
    CHECK(candle_gguf_load_tensor(g, ctx, "absent") == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_errmsg(ctx), "'absent'");
    candle_gguf_close(g);
    CHECK(t && q);
    if (t && q) {
        CHECK(t->rank == 2 && t->shape[0] == 2 && t->shape[1] == 3 && !strcmp(t->name, "w.f32"));
        CHECK(q->shape[0] == 2 && q->shape[1] == 32 && q->stride[1] == 34 && q->stride[0] == 34);
        for (int i = 0; i < 6; i++) {
            double v = 0;
            CHECK_OK(NULL, candle_tensor_get_f64(t, (int64_t[]){i / 3, i % 3}, &v));
            CHECK(v == (double)t_f32[i]);
        }
        CHECK(!memcmp(candle_tensor_data(q), t_q8, sizeof t_q8));
    }
    candle_ctx_free(ctx);
}

/* Files (not memory images) that are malformed, in both loading modes. */
static void check_open_errors(const unsigned char *file, size_t n, const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/test_gguf_cut.gguf", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(file, 1, n / 2, f);
    fclose(f);
    for (int no_mmap = 0; no_mmap < 2; no_mmap++) {
        candle_gguf *g = NULL;
        candle_gguf_open_params p = {.no_mmap = no_mmap};
        CHECK(candle_gguf_open(&g, path, &p) == CANDLE_ERR_FORMAT && g == NULL);
        CHECK_CONTAINS(candle_last_errmsg(), " at offset ");
        CHECK(candle_gguf_open(&g, dir, &p) == CANDLE_ERR_IO && g == NULL);
        CHECK_CONTAINS(candle_last_errmsg(), "not a regular file");
    }
    remove(path);
}

/* ---- malformed inputs ---- */

static void expect_format(const unsigned char *data, size_t n, const char *field,
                          const char *what) {
    /* an exact-size heap copy, so ASan sees any read past the end */
    unsigned char *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, data, n);
    candle_gguf *g = (candle_gguf *)1;
    candle_clear_last_error();
    candle_status s = candle_gguf_open_memory(&g, copy, n);
    CHECK_MSG(s == CANDLE_ERR_FORMAT, "%s: status %s", what, candle_status_name(s));
    CHECK_MSG(g == NULL, "%s: handle not NULL", what);
    const char *msg = candle_last_errmsg();
    CHECK_MSG(!strncmp(msg, "gguf: ", 6), "%s: '%s'", what, msg);
    CHECK_MSG(strstr(msg, field) != NULL, "%s: '%s' lacks '%s'", what, msg, field);
    CHECK_MSG(strstr(msg, " at offset ") != NULL, "%s: '%s' lacks offset", what, msg);
    if (s == CANDLE_OK) candle_gguf_close(g);
    free(copy);
}

/* End of the last tensor's data: any shorter prefix must be rejected. */
static size_t data_end(const unsigned char *data, size_t n) {
    candle_gguf *g = NULL;
    size_t end = 0;
    if (candle_gguf_open_memory(&g, data, n) != CANDLE_OK) return n;
    for (int64_t i = 0; i < candle_gguf_n_tensors(g); i++) {
        const candle_gguf_tensor_info *ti = candle_gguf_tensor(g, i);
        if (ti->offset + ti->size > end) end = ti->offset + ti->size;
    }
    candle_gguf_close(g);
    return end;
}

static void check_truncations(const unsigned char *file, size_t n) {
    size_t end = data_end(file, n);
    CHECK(end > 0 && end <= n);
    int failures = test_failures;
    for (size_t len = 0; len < end && test_failures == failures; len++) {
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu bytes", len);
        expect_format(file, len, "", what);
    }
    for (size_t len = end; len <= n; len++) {
        unsigned char *copy = malloc(len);
        memcpy(copy, file, len);
        candle_gguf *g = NULL;
        CHECK_MSG(candle_gguf_open_memory(&g, copy, len) == CANDLE_OK, "prefix %zu: %s", len,
                  candle_last_errmsg());
        candle_gguf_close(g);
        free(copy);
    }
}

static size_t find(const unsigned char *buf, size_t n, const char *s) {
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(buf + i, s, k)) return i;
    fprintf(stderr, "sample lacks '%s'\n", s);
    abort();
}

static void put_u32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

typedef struct patch_case {
    const char *what;
    const char *anchor; /* first occurrence in the sample file */
    bool from_end;      /* delta counts from the anchor's end, else its start */
    int delta;
    int width; /* 1, 4 or 8 bytes */
    uint64_t value;
    const char *field; /* expected in the message */
} patch_case;

/* A key is [u64 len][bytes] then [u32 type][value]; an array value is
 * [u32 elem type][u64 count][elems]. A tensor info is [u64 len][name]
 * [u32 n_dims][u64 dims, innermost first][u32 type][u64 offset]. */
static const patch_case patches[] = {
    {"bad magic", "GGUF", false, 0, 1, 'X', "magic"},
    {"version 1", "GGUF", false, 4, 4, 1, "version"},
    {"version 4", "GGUF", false, 4, 4, 4, "version"},
    {"big-endian version", "GGUF", false, 4, 4, 0x03000000u, "version"},
    {"huge tensor count", "GGUF", false, 8, 8, UINT64_MAX / 2, "tensor_count"},
    {"huge kv count", "GGUF", false, 16, 8, 1ull << 40, "kv_count"},
    {"key length past EOF", "general.name", false, -8, 8, 1ull << 50, "kv[1] key"},
    {"key with NUL", "general.name", false, 3, 1, 0, "kv[1] key"},
    {"empty key", "general.name", false, -8, 8, 0, "kv[1] key"},
    {"unknown value type", "test.u32", true, 0, 4, 13, "kv 'test.u32' value"},
    {"bool not 0/1", "test.bool", true, 4, 1, 2, "kv 'test.bool' value"},
    {"string length past EOF", "test.str", true, 4, 8, 1ull << 40, "kv 'test.str' value"},
    {"array count past EOF", "test.arr_i32", true, 8, 8, 1ull << 61, "kv 'test.arr_i32' value"},
    {"string array count", "test.arr_str", true, 8, 8, 1ull << 40, "kv 'test.arr_str' value"},
    {"unknown element type", "test.arr_u8", true, 4, 4, 77, "kv 'test.arr_u8' value"},
    {"duplicate key", "test.i32", false, 5, 1, 'u', "kv 'test.u32' key"},
    {"alignment not power of two", "general.alignment", true, 4, 4, 48, "general.alignment"},
    {"alignment zero", "general.alignment", true, 4, 4, 0, "general.alignment"},
    {"alignment wrong type", "general.alignment", true, 0, 4, CANDLE_GGUF_INT32,
     "general.alignment"},
    {"tensor name length past EOF", "w.f16", false, -8, 8, 1ull << 45, "tensor[1] name"},
    {"tensor name too long", "w.f16", false, -8, 8, 300, "tensor[1] name"},
    {"duplicate tensor name", "w.i32", false, 2, 1, 'f', "tensor 'w.f32' name"},
    {"too many dims", "w.f16", true, 0, 4, 7, "tensor 'w.f16' n_dims"},
    {"dims overflow", "w.i32", true, 4, 8, 1ull << 62, "tensor 'w.i32' dims"},
    {"dim beyond int64", "w.f16", true, 4, 8, UINT64_MAX, "tensor 'w.f16' dims"},
    {"q8_0 dim not whole blocks", "w.q8_0", true, 4, 8, 33, "tensor 'w.q8_0' dims"},
    {"unknown dtype id", "w.f16", true, 12, 4, 99, "tensor 'w.f16' type"},
    {"dtype id with no candle type", "w.f16", true, 12, 4, 4, "tensor 'w.f16' type"},
    {"huge dtype id", "w.f16", true, 12, 4, 0xffffffffu, "tensor 'w.f16' type"},
    {"misaligned offset", "w.f16", true, 16, 8, 65, "tensor 'w.f16' offset"},
    {"offset past EOF", "w.f16", true, 16, 8, 1ull << 20, "tensor 'w.f16' offset"},
    {"offset overflows", "w.f16", true, 16, 8, UINT64_MAX - 63, "tensor 'w.f16' offset"},
    {"size past EOF", "w.f32", true, 12, 8, 100000, "tensor 'w.f32' offset"},
};

static void check_patches(const unsigned char *file, size_t n) {
    unsigned char *buf = malloc(n);
    for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++) {
        const patch_case *c = &patches[i];
        memcpy(buf, file, n);
        size_t at = find(buf, n, c->anchor) + (c->from_end ? strlen(c->anchor) : 0);
        at = (size_t)((long)at + c->delta);
        if (c->width == 1) buf[at] = (unsigned char)c->value;
        else if (c->width == 4) put_u32(buf + at, (uint32_t)c->value);
        else put_u64(buf + at, c->value);
        expect_format(buf, n, c->field, c->what);
    }
    free(buf);
}

/* Hand-built files for what the writer never produces. */
static void check_built(void) {
    /* arrays nested deeper than the limit: each level is [arr x 1] */
    unsigned char b[512];
    size_t n = 0;
    memcpy(b, "GGUF", 4);
    put_u32(b + 4, 3);
    put_u64(b + 8, 0);
    put_u64(b + 16, 1);
    n = 24;
    put_u64(b + n, 1);
    b[n + 8] = 'k';
    n += 9;
    put_u32(b + n, CANDLE_GGUF_ARRAY);
    n += 4;
    for (int i = 0; i < 20; i++) {
        put_u32(b + n, CANDLE_GGUF_ARRAY);
        put_u64(b + n + 4, 1);
        n += 12;
    }
    put_u32(b + n, CANDLE_GGUF_UINT8);
    put_u64(b + n + 4, 0);
    n += 12;
    expect_format(b, n, "kv 'k' value", "deep nesting");
    /* two levels of nesting are fine and readable */
    n = 24 + 9 + 4;
    put_u32(b + n, CANDLE_GGUF_ARRAY);
    put_u64(b + n + 4, 2);
    n += 12;
    for (int i = 0; i < 2; i++) {
        put_u32(b + n, CANDLE_GGUF_UINT16);
        put_u64(b + n + 4, 1);
        b[n + 12] = (unsigned char)(i + 1);
        b[n + 13] = 0;
        n += 14;
    }
    candle_gguf *g = NULL;
    CHECK_OK(NULL, candle_gguf_open_memory(&g, b, n));
    candle_gguf_type et;
    int64_t cnt;
    CHECK(candle_gguf_get_arr(g, "k", &et, &cnt) && et == CANDLE_GGUF_ARRAY && cnt == 2);
    CHECK(candle_gguf_arr_data(g, "k") == NULL);
    char buf[64];
    CHECK_CONTAINS(candle_gguf_kv_str(g, 0, buf, sizeof buf), "[arr x 2]");
    candle_gguf_close(g);
    /* version 2 with no kv and no tensors */
    put_u32(b + 4, 2);
    put_u64(b + 16, 0);
    CHECK_OK(NULL, candle_gguf_open_memory(&g, b, 24));
    CHECK(g && candle_gguf_version(g) == 2 && candle_gguf_n_kv(g) == 0);
    candle_gguf_close(g);
    expect_format(b, 0, "magic", "empty");
}

/* The writer replaces a file through a new temporary of a unique name
 * (O_EXCL|O_NOFOLLOW): a symlink planted at the old PATH.tmp is never written
 * through, and an existing PATH that is not a regular file (a FIFO here,
 * standing for a device node) is refused and kept. */
static void check_writer_paths(void) {
    char dir[] = "/tmp/test_gguf_XXXXXX", out[128], link_[128], victim[128], fifo[128];
    if (!mkdtemp(dir)) {
        CHECK(false);
        return;
    }
    snprintf(out, sizeof out, "%s/o.gguf", dir);
    snprintf(link_, sizeof link_, "%s/o.gguf.tmp", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    FILE *f = fopen(victim, "w");
    CHECK(f && fputs("victim", f) >= 0);
    if (f) fclose(f);
    CHECK(symlink(victim, link_) == 0);
    CHECK(mkfifo(fifo, 0600) == 0);
    candle_gguf_writer *w = NULL;
    CHECK_OK(NULL, candle_gguf_writer_init(&w));
    CHECK_OK(NULL, candle_gguf_writer_set_u32(w, "x", 1));
    CHECK_OK(NULL, candle_gguf_writer_write(w, out));
    struct stat st;
    CHECK(stat(victim, &st) == 0 && st.st_size == 6);
    CHECK(candle_gguf_writer_write(w, fifo) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "not a regular file");
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    candle_gguf_writer_free(w);
    int left = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) left++;
        char p[400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' || left) remove(p);
    }
    if (d) closedir(d);
    CHECK(left == 0); /* no temporary left */
    rmdir(dir);
}

static void check_writer_errors(void) {
    candle_gguf_writer *w = NULL;
    CHECK_OK(NULL, candle_gguf_writer_init(&w));
    float x[32] = {0};
    CHECK(candle_gguf_writer_set_alignment(w, 48) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_gguf_writer_set_i32(w, "general.alignment", 64) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_gguf_writer_set_u32(w, "", 1) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_gguf_writer_add_tensor(w, "a", CANDLE_DTYPE_F32, 1, (int64_t[]){32}, x) == 0);
    CHECK(candle_gguf_writer_add_tensor(w, "a", CANDLE_DTYPE_F32, 1, (int64_t[]){32}, x) ==
          CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "duplicate tensor 'a'");
    CHECK(candle_gguf_writer_add_tensor(w, "b", CANDLE_DTYPE_Q4_0, 1, (int64_t[]){31}, x) ==
          CANDLE_ERR_SHAPE);
    CHECK(candle_gguf_writer_add_tensor(w, "c", CANDLE_DTYPE_BOOL, 1, (int64_t[]){2}, x) ==
          CANDLE_ERR_UNSUPPORTED);
    CHECK(candle_gguf_writer_write(w, "/nonexistent-dir/x.gguf") == CANDLE_ERR_IO);
    CHECK_CONTAINS(candle_last_errmsg(), "/nonexistent-dir/x.gguf");
    candle_gguf_writer_free(w);
    /* no tensors: no data section to pad, whatever the alignment */
    CHECK_OK(NULL, candle_gguf_writer_init(&w));
    CHECK_OK(NULL, candle_gguf_writer_set_alignment(w, (size_t)1 << 30));
    void *img = NULL;
    size_t n = 0;
    CHECK_OK(NULL, candle_gguf_writer_write_memory(w, &img, &n));
    CHECK(img && n < 100);
    candle_gguf *g = NULL;
    CHECK_OK(NULL, candle_gguf_open_memory(&g, img, n));
    CHECK(candle_gguf_alignment(g) == ((size_t)1 << 30));
    candle_gguf_close(g);
    free(img);
    candle_gguf_writer_free(w);
    g = NULL;
    CHECK(candle_gguf_open(&g, "/nonexistent-dir/x.gguf", NULL) == CANDLE_ERR_IO);
    CHECK(g == NULL);
}

/* copy_kv keeps every value and the alignment. */
static void check_copy(const candle_gguf *src, const char *path) {
    candle_gguf_writer *w = NULL;
    CHECK_OK(NULL, candle_gguf_writer_init(&w));
    CHECK_OK(NULL, candle_gguf_writer_copy_kv(w, src));
    CHECK_OK(NULL, candle_gguf_writer_set_str(w, "general.name", "copy"));
    CHECK_OK(NULL, candle_gguf_writer_write(w, path));
    candle_gguf_writer_free(w);
    candle_gguf *g = NULL;
    CHECK_OK(NULL, candle_gguf_open(&g, path, NULL));
    if (!g) return;
    CHECK(candle_gguf_n_kv(g) == candle_gguf_n_kv(src));
    CHECK(candle_gguf_alignment(g) == candle_gguf_alignment(src));
    const char *s;
    size_t len;
    CHECK(candle_gguf_get_str(g, "general.name", &s, &len) && len == 4);
    char a[256], b[256];
    for (int64_t i = 0; i < candle_gguf_n_kv(src); i++) {
        const char *key = candle_gguf_key(src, i);
        if (!strcmp(key, "general.name")) continue;
        int64_t j = candle_gguf_find_key(g, key);
        CHECK_MSG(j >= 0 && !strcmp(candle_gguf_kv_str(src, i, a, sizeof a),
                                    candle_gguf_kv_str(g, j, b, sizeof b)), "%s", key);
    }
    candle_gguf_close(g);
}

static void check_stories(void) {
    char path[1024];
    test_path("../shared/data/models/stories260K.gguf", path, sizeof path);
    if (!test_need_file("test_gguf stories260K", path)) return;
    for (int no_mmap = 0; no_mmap < 2; no_mmap++) {
        candle_gguf *g = NULL;
        candle_gguf_open_params p = {.no_mmap = no_mmap};
        CHECK_OK(NULL, candle_gguf_open(&g, path, &p));
        if (!g) return;
        const char *s;
        size_t len;
        uint32_t u;
        float eps;
        CHECK(candle_gguf_get_str(g, "general.architecture", &s, &len) && len == 5 &&
              !memcmp(s, "llama", 5));
        CHECK(candle_gguf_get_u32(g, "llama.embedding_length", &u) && u == 64);
        CHECK(candle_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps) && eps > 0);
        CHECK(candle_gguf_n_kv(g) == 19 && candle_gguf_n_tensors(g) == 48);
        int64_t n;
        candle_gguf_type et;
        CHECK(candle_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) && n == 512);
        CHECK(candle_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &n) &&
              et == CANDLE_GGUF_FLOAT32 && candle_gguf_arr_data(g, "tokenizer.ggml.scores"));
        const candle_gguf_tensor_info *ti =
            candle_gguf_tensor(g, candle_gguf_find_tensor(g, "token_embd.weight"));
        CHECK(ti && ti->rank == 2 && ti->shape[0] == 512 && ti->shape[1] == 64 &&
              ti->dtype == CANDLE_DTYPE_F32 && ti->offset == 14176 && ti->size == 131072);
        ti = candle_gguf_tensor(g, candle_gguf_find_tensor(g, "blk.0.ffn_down.weight"));
        CHECK(ti && ti->shape[0] == 64 && ti->shape[1] == 172);
        candle_ctx *ctx = NULL;
        CHECK_OK(NULL, candle_ctx_init(&ctx, NULL));
        candle_tensor *t = candle_gguf_load_tensor(g, ctx, "output_norm.weight");
        CHECK(t && t->rank == 1 && t->shape[0] == 64);
        candle_ctx_free(ctx);
        if (!no_mmap) {
            char out[1024];
            snprintf(out, sizeof out, "%s/test_gguf_copy.gguf",
                     getenv("CANDLE_BINARY_DIR") ? getenv("CANDLE_BINARY_DIR") : ".");
            check_copy(g, out);
            remove(out);
        }
        candle_gguf_close(g);
    }
}

static void check_vocabs(void) {
    static const char *names[] = {"llama-spm", "gpt-2", "bert-bge", "phi-3", "deepseek-coder",
                                  "falcon"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[256], path[1024];
        snprintf(rel, sizeof rel, "../shared/data/tokenizers/ggml-vocab-%s.gguf", names[i]);
        test_path(rel, path, sizeof path);
        if (!test_need_file("test_gguf vocabulary", path)) continue;
        candle_gguf *g = NULL;
        CHECK_OK(NULL, candle_gguf_open(&g, path, NULL));
        if (!g) continue;
        int64_t n = 0;
        candle_gguf_type et;
        CHECK_MSG(candle_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) &&
                  et == CANDLE_GGUF_STRING && n > 1000, "%s", names[i]);
        size_t total = 0, len;
        const char *s;
        for (int64_t j = 0; j < n; j++)
            if (candle_gguf_arr_str(g, "tokenizer.ggml.tokens", j, &s, &len)) total += len;
        CHECK(total > (size_t)n);
        char buf[512];
        for (int64_t k = 0; k < candle_gguf_n_kv(g); k++)
            CHECK(candle_gguf_kv_str(g, k, buf, sizeof buf)[0] != 0);
        candle_gguf_close(g);
    }
}

/* The fuzz seeds also run here, so gcc builds replay them: bad_* and
 * truncated* must be rejected, the rest accepted. */
static void check_fuzz_corpus(void) {
    char dir[1024];
    test_path("tests/fuzz/corpus/gguf", dir, sizeof dir);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "%s", dir);
    if (!d) return;
    int n_files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n = 0;
        unsigned char *data = read_file(path, &n);
        if (!data) continue;
        n_files++;
        bool bad = !strncmp(e->d_name, "bad_", 4) || !strncmp(e->d_name, "truncated", 9);
        if (bad) {
            expect_format(data, n, "", e->d_name);
        } else {
            candle_gguf *g = NULL;
            CHECK_MSG(candle_gguf_open_memory(&g, data, n) == CANDLE_OK, "%s: %s", e->d_name,
                      candle_last_errmsg());
            candle_gguf_close(g);
        }
        free(data);
    }
    closedir(d);
    CHECK(n_files >= 5);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        candle_status s = write_sample(argv[2]);
        if (s) fprintf(stderr, "test_gguf: %s\n", candle_last_errmsg());
        return s ? 1 : 0;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/test_gguf_sample.gguf",
             getenv("CANDLE_BINARY_DIR") ? getenv("CANDLE_BINARY_DIR") : ".");
    CHECK_OK(NULL, write_sample(path));
    check_load(path, false);
    check_load(path, true);
    size_t n = 0;
    unsigned char *file = read_file(path, &n);
    CHECK(file && n > 0);
    if (file) {
        check_truncations(file, n);
        check_open_errors(file, n, getenv("CANDLE_BINARY_DIR") ? getenv("CANDLE_BINARY_DIR") : ".");
        check_patches(file, n);
    }
    free(file);
    remove(path);
    check_built();
    check_writer_errors();
    check_writer_paths();
    check_fuzz_corpus();
    check_stories();
    check_vocabs();
    return test_done("test_gguf");
}
