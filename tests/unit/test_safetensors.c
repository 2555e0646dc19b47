/* safetensors reader: every dtype, zero-copy views, F64/FP8 conversions
 * against hand-computed values, the mmap and no_mmap file paths, and one
 * malformed header per validation rule (format error, message naming the
 * file, the tensor or field and the reason). Files are built by hand here:
 * 8-byte little-endian header length, the JSON, the data.
 *
 * `test_safetensors --dump PATH` prints a file's metadata and tensors (for
 * the cross-check with the reference package, test_safetensors_python.sh). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

static char dir[512];

/* header + data as a file image (malloc'ed, so 16-byte aligned). The header
 * is padded with spaces to pad_to bytes when that is larger, to place the
 * data section at a chosen offset. */
static uint8_t *image(const char *header, size_t pad_to, const void *data, size_t dlen, size_t *n) {
    size_t hl = strlen(header) > pad_to ? strlen(header) : pad_to;
    *n = 8 + hl + dlen;
    uint8_t *img = malloc(*n);
    for (int i = 0; i < 8; i++) img[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memset(img + 8, ' ', hl);
    memcpy(img + 8, header, strlen(header));
    if (dlen) memcpy(img + 8 + hl, data, dlen);
    return img;
}

/* The header padded so the data starts at offset 8 + pad (a multiple of 8). */
static candle_safetensors *open_img(const char *header, size_t pad, const void *data,
                                    size_t dlen, uint8_t **img) {
    size_t n;
    *img = image(header, pad, data, dlen, &n);
    candle_safetensors *st = NULL;
    candle_status s = candle_safetensors_open_memory(&st, *img, n, "mem.safetensors");
    CHECK_MSG(s == CANDLE_OK, "%s", candle_last_errmsg());
    return st;
}

static void expect_err(const char *header, const void *data, size_t dlen, const char *sub) {
    size_t n;
    uint8_t *img = image(header, 0, data, dlen, &n);
    candle_safetensors *st = (candle_safetensors *)1;
    candle_status s = candle_safetensors_open_memory(&st, img, n, "model.safetensors");
    CHECK_MSG(s == CANDLE_ERR_FORMAT, "%s: got %s for %s", sub, candle_status_name(s), header);
    CHECK(st == NULL);
    CHECK_CONTAINS(candle_last_errmsg(), "model.safetensors: ");
    CHECK_CONTAINS(candle_last_errmsg(), sub);
    free(img);
}

static bool inside(const void *p, const void *base, size_t n) {
    return (const uint8_t *)p >= (const uint8_t *)base && (const uint8_t *)p < (const uint8_t *)base + n;
}

#define E(dt, shape, b, e) "{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

/* Every dtype loaded as stored: a zero-copy view with the bytes as written. */
static void test_stored_dtypes(candle_ctx *ctx) {
    uint8_t data[64];
    for (int i = 0; i < 64; i++) data[i] = (uint8_t)(i * 37 + 5);
    data[56] = 0, data[57] = 1; /* BOOL */
    const char *h = "{\"f32\":" E("F32", "[2,2]", 0, 16) ",\"f16\":" E("F16", "[4]", 16, 24)
                    ",\"bf16\":" E("BF16", "[2,1]", 24, 28) ",\"i8\":" E("I8", "[4]", 28, 32)
                    ",\"i64\":" E("I64", "[1]", 32, 40) ",\"i32\":" E("I32", "[2]", 40, 48)
                    ",\"u8\":" E("U8", "[8]", 48, 56) ",\"bool\":" E("BOOL", "[2]", 56, 58) "}";
    static const struct {
        const char *name;
        candle_dtype dt;
        size_t off, size;
    } want[] = {{"f32", CANDLE_DTYPE_F32, 0, 16},   {"f16", CANDLE_DTYPE_F16, 16, 8},
                {"bf16", CANDLE_DTYPE_BF16, 24, 4}, {"i8", CANDLE_DTYPE_I8, 28, 4},
                {"i64", CANDLE_DTYPE_I64, 32, 8},   {"i32", CANDLE_DTYPE_I32, 40, 8},
                {"u8", CANDLE_DTYPE_U8, 48, 8},     {"bool", CANDLE_DTYPE_BOOL, 56, 2}};
    uint8_t *img;
    candle_safetensors *st = open_img(h, 504, data, 64, &img);
    if (!st) return free(img);
    CHECK(candle_safetensors_data_offset(st) == 512);
    CHECK(candle_safetensors_file_size(st) == 512 + 64);
    CHECK(candle_safetensors_storage(st)->kind == CANDLE_STORAGE_EXTERNAL);
    CHECK(candle_safetensors_n_tensors(st) == 8);
    CHECK(candle_safetensors_n_metadata(st) == 0);
    for (int i = 0; i < 8; i++) {
        const candle_safetensors_tensor_info *ti = candle_safetensors_tensor(st, i);
        CHECK(!strcmp(ti->name, want[i].name));
        CHECK(ti->dtype == want[i].dt && ti->load_dtype == want[i].dt);
        CHECK(ti->offset == 512 + want[i].off && ti->size == want[i].size);
        CHECK(candle_safetensors_find_tensor(st, want[i].name) == i);
        candle_tensor *t = candle_safetensors_load_tensor(st, ctx, want[i].name);
        CHECK_MSG(t != NULL, "%s", candle_errmsg(ctx));
        if (!t) continue;
        CHECK(candle_tensor_dtype(t) == want[i].dt && candle_tensor_nbytes(t) == want[i].size);
        CHECK(candle_tensor_data(t) == img + 512 + want[i].off); /* zero copy */
        CHECK(!strcmp(t->name, want[i].name));
    }
    const candle_safetensors_tensor_info *f32 = candle_safetensors_tensor(st, 0);
    CHECK(!strcmp(f32->st_dtype, "F32") && f32->rank == 2 && f32->shape[0] == 2 && f32->shape[1] == 2);
    CHECK(candle_safetensors_tensor(st, 8) == NULL && candle_safetensors_tensor(st, -1) == NULL);
    CHECK(candle_safetensors_find_tensor(st, "nope") == -1);
    CHECK(candle_safetensors_load_tensor(st, ctx, "nope") == NULL);
    CHECK(candle_errcode(ctx) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_errmsg(ctx), "mem.safetensors: tensor 'nope': not found");
    candle_ctx_clear_error(ctx);
    candle_safetensors_close(st);
    free(img);
}

static float load_f32(candle_safetensors *st, candle_ctx *ctx, const char *name, float *out, int n) {
    candle_tensor *t = candle_safetensors_load_tensor(st, ctx, name);
    CHECK_MSG(t != NULL, "%s", candle_errmsg(ctx));
    if (!t) return 0;
    CHECK(candle_tensor_dtype(t) == CANDLE_DTYPE_F32 && candle_tensor_numel(t) == n);
    CHECK(!inside(candle_tensor_data(t), candle_safetensors_storage(st)->data,
                  candle_safetensors_file_size(st))); /* a copy */
    CHECK_OK(ctx, candle_tensor_to_f32(t, out));
    return out[0];
}

/* Equal as floats, NaN equal to NaN, and the signs of zeros equal. */
static bool same(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

static void test_conversions(candle_ctx *ctx) {
    static const double f64[7] = {1.5, -2.25, 1e40, 0.1, 1e-50, -0.0, 65504.0};
    uint8_t data[56 + 11 + 11];
    memcpy(data, f64, 56);
    double nan = NAN;
    memcpy(data, &nan, 8); /* replace 1.5 by NaN: f64[0] below is NaN */
    static const uint8_t e4m3[11] = {0x00, 0x80, 0x01, 0x07, 0x08, 0x38, 0x3C, 0x7E, 0xFE, 0x7F, 0xFF};
    static const float e4m3_f[11] = {0.0f, -0.0f, 0x1p-9f, 7 * 0x1p-9f, 0x1p-6f, 1.0f, 1.5f,
                                     448.0f, -448.0f, NAN, NAN};
    static const uint8_t e5m2[11] = {0x00, 0x01, 0x03, 0x04, 0x3C, 0xBE, 0x7B, 0x7C, 0xFC, 0x7D, 0x7F};
    static const float e5m2_f[11] = {0.0f, 0x1p-16f, 3 * 0x1p-16f, 0x1p-14f, 1.0f, -1.5f,
                                     57344.0f, INFINITY, -INFINITY, NAN, NAN};
    memcpy(data + 56, e4m3, 11);
    memcpy(data + 67, e5m2, 11);
    const char *h = "{\"d\":" E("F64", "[7]", 0, 56) ",\"a\":" E("F8_E4M3", "[11]", 56, 67)
                    ",\"b\":" E("F8_E5M2", "[1,11]", 67, 78) "}";
    uint8_t *img;
    candle_safetensors *st = open_img(h, 0, data, sizeof data, &img);
    if (!st) return free(img);
    const candle_safetensors_tensor_info *d = candle_safetensors_tensor(st, 0);
    CHECK(d->dtype == CANDLE_DTYPE_COUNT && d->load_dtype == CANDLE_DTYPE_F32);
    float out[11];
    static const float f64_f[7] = {NAN, -2.25f, INFINITY, 0.1f, 0.0f, -0.0f, 65504.0f};
    load_f32(st, ctx, "d", out, 7);
    for (int i = 0; i < 7; i++) CHECK_MSG(same(out[i], f64_f[i]), "F64[%d] %g", i, out[i]);
    load_f32(st, ctx, "a", out, 11);
    for (int i = 0; i < 11; i++) CHECK_MSG(same(out[i], e4m3_f[i]), "E4M3 0x%02x: %g", e4m3[i], out[i]);
    load_f32(st, ctx, "b", out, 11);
    for (int i = 0; i < 11; i++) CHECK_MSG(same(out[i], e5m2_f[i]), "E5M2 0x%02x: %g", e5m2[i], out[i]);
    /* The header is not padded: F64 data at an odd offset, read unaligned. */
    CHECK(candle_safetensors_data_offset(st) % 8 != 0);
    candle_safetensors_close(st);
    free(img);
}

/* Known dtypes Candle has no type for are listed, and refused at load. */
static void test_unsupported(candle_ctx *ctx) {
    uint8_t data[64] = {0};
    const char *h = "{\"i16\":" E("I16", "[2]", 0, 4) ",\"u16\":" E("U16", "[2]", 4, 8)
                    ",\"u32\":" E("U32", "[1]", 8, 12) ",\"u64\":" E("U64", "[1]", 16, 24)
                    ",\"e8m0\":" E("F8_E8M0", "[2]", 24, 26) ",\"f4\":" E("F4", "[4]", 26, 28)
                    ",\"f6\":" E("F6_E3M2", "[4]", 28, 31) ",\"c64\":" E("C64", "[1]", 32, 40) "}";
    uint8_t *img;
    candle_safetensors *st = open_img(h, 0, data, sizeof data, &img);
    if (!st) return free(img);
    CHECK(candle_safetensors_n_tensors(st) == 8);
    for (int64_t i = 0; i < candle_safetensors_n_tensors(st); i++) {
        const candle_safetensors_tensor_info *ti = candle_safetensors_tensor(st, i);
        CHECK(ti->dtype == CANDLE_DTYPE_COUNT && ti->load_dtype == CANDLE_DTYPE_COUNT);
        CHECK(candle_safetensors_load_tensor(st, ctx, ti->name) == NULL);
        CHECK(candle_errcode(ctx) == CANDLE_ERR_UNSUPPORTED);
        char want[64];
        snprintf(want, sizeof want, "tensor '%s': dtype %s", ti->name, ti->st_dtype);
        CHECK_CONTAINS(candle_errmsg(ctx), want);
        candle_ctx_clear_error(ctx);
    }
    candle_safetensors_close(st);
    free(img);
}

/* Rank 0, zero elements (begin == end, anywhere, even inside another
 * tensor's bytes: an empty range shares none), metadata, and a tensor whose
 * data is misaligned for its type, which loads as a copy. */
static void test_shapes_and_metadata(candle_ctx *ctx) {
    float vals[3] = {2.5f, -1.0f, 7.0f};
    uint8_t data[1 + 12];
    data[0] = 9;
    memcpy(data + 1, vals, 12);
    const char *h = "{\"__metadata__\":{\"format\":\"pt\",\"empty\":\"\",\"nul\":\"a\\u0000b\"},"
                    "\"s\":" E("U8", "[]", 0, 1) ",\"z\":" E("F32", "[0,3]", 5, 5)
                    ",\"z2\":" E("F32", "[3,0,2]", 5, 5) ",\"m\":" E("F32", "[3]", 1, 13) "}";
    uint8_t *img;
    candle_safetensors *st = open_img(h, 248, data, sizeof data, &img);
    if (!st) return free(img);
    const char *v = NULL, *k = NULL;
    size_t len = 0;
    CHECK(candle_safetensors_n_metadata(st) == 3);
    CHECK(candle_safetensors_metadata(st, "format", &v, &len) && !strcmp(v, "pt") && len == 2);
    CHECK(candle_safetensors_metadata(st, "empty", &v, NULL) && !strcmp(v, ""));
    CHECK(candle_safetensors_metadata(st, "nul", &v, &len) && len == 3 && !memcmp(v, "a\0b", 3));
    CHECK(!candle_safetensors_metadata(st, "absent", &v, &len));
    CHECK(candle_safetensors_metadata_at(st, 1, &k, &v, &len) && !strcmp(k, "empty"));
    CHECK(!candle_safetensors_metadata_at(st, 3, &k, &v, &len));
    CHECK(candle_safetensors_n_tensors(st) == 4);
    candle_tensor *s = candle_safetensors_load_tensor(st, ctx, "s");
    CHECK(s && candle_tensor_rank(s) == 0 && candle_tensor_numel(s) == 1);
    if (s) CHECK(*(uint8_t *)candle_tensor_data(s) == 9);
    candle_tensor *z = candle_safetensors_load_tensor(st, ctx, "z");
    CHECK(z && candle_tensor_numel(z) == 0 && candle_tensor_dim(z, 1) == 3);
    CHECK(candle_safetensors_tensor(st, 2)->size == 0);
    candle_tensor *m = candle_safetensors_load_tensor(st, ctx, "m");
    CHECK_MSG(m != NULL, "%s", candle_errmsg(ctx));
    float out[3] = {0};
    if (m) {
        CHECK(!inside(candle_tensor_data(m), img, 8 + 248 + sizeof data)); /* misaligned: copied */
        CHECK((uintptr_t)candle_tensor_data(m) % 4 == 0);
        CHECK_OK(ctx, candle_tensor_to_f32(m, out));
        CHECK(!memcmp(out, vals, 12));
    }
    candle_safetensors_close(st);
    free(img);
}

/* One case per rule: each must be a format error naming the place. */
static void test_malformed(void) {
    uint8_t d[64] = {0};
    expect_err("", d, 0, "header: byte");
    expect_err("{\"a\":", d, 0, "header: byte");
    expect_err("[1, 2]", d, 0, "header: a JSON array, not an object");
    expect_err("{\"a\": 1}", d, 0, "tensor 'a': entry is a JSON number, not an object");
    expect_err("{\"a\":{\"dtype\":5,\"shape\":[],\"data_offsets\":[0,4]}}", d, 4,
               "tensor 'a': dtype is a JSON number, not a string");
    expect_err("{\"a\":" E("F7", "[1]", 0, 4) "}", d, 4, "tensor 'a': unknown dtype 'F7'");
    expect_err("{\"a\":" E("F32", "{}", 0, 4) "}", d, 4,
               "tensor 'a': shape is a JSON object, not an array");
    expect_err("{\"a\":" E("U8", "[1,1,1,1,1,1,1]", 0, 1) "}", d, 1,
               "tensor 'a': shape has 7 dimensions, more than 6");
    expect_err("{\"a\":" E("U8", "[1,-1]", 0, 1) "}", d, 1,
               "tensor 'a': shape[1] is not a non-negative integer");
    expect_err("{\"a\":" E("U8", "[1.5]", 0, 1) "}", d, 1,
               "tensor 'a': shape[0] is not a non-negative integer");
    expect_err("{\"a\":" E("F32", "[4294967296,4294967296]", 0, 4) "}", d, 4,
               "tensor 'a': shape [4294967296, 4294967296] of F32 is too large");
    expect_err("{\"a\":" E("F32", "[0,4611686018427387904]", 0, 0) "}", d, 0,
               "tensor 'a': shape [0, 4611686018427387904] of F32 is too large");
    expect_err("{\"a\":" E("F4", "[3]", 0, 1) "}", d, 1,
               "tensor 'a': shape [3] of F4 is not a whole number of bytes");
    expect_err("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", d, 2,
               "tensor 'a': data_offsets is not an array of two non-negative integers");
    expect_err("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", d, 2,
               "tensor 'a': data_offsets is not an array of two non-negative integers");
    expect_err("{\"a\":" E("U8", "[0]", 3, 2) "}", d, 4, "tensor 'a': data_offsets [3, 2]: begin after end");
    expect_err("{\"a\":" E("U8", "[4]", 1, 5) "}", d, 4,
               "tensor 'a': data_offsets [1, 5] exceed the data section of 4 bytes");
    expect_err("{\"x.weight\":" E("F32", "[2,2]", 0, 12) "}", d, 16,
               "model.safetensors: tensor 'x.weight': data_offsets [0, 12] hold 12 bytes but "
               "shape [2, 2] of F32 needs 16");
    expect_err("{\"a\":" E("F32", "[2]", 0, 8) ",\"b\":" E("F32", "[2]", 4, 12) "}", d, 12,
               "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
    expect_err("{\"b\":" E("F32", "[4]", 0, 16) ",\"a\":" E("F32", "[1]", 8, 12) "}", d, 16,
               "tensor 'a': data_offsets [8, 12] overlap tensor 'b' [0, 16]");
    expect_err("{\"a\":" E("U8", "[1]", 0, 1) ",\"a\":" E("U8", "[1]", 1, 2) "}", d, 2,
               "tensor 'a': given twice");
    expect_err("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", d, 1,
               "tensor 'a': unknown field 'x'");
    expect_err("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", d, 1,
               "tensor 'a': missing field 'data_offsets'");
    expect_err("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
               d, 1, "tensor 'a': field 'dtype' given twice");
    expect_err("{\"a\\u0000b\":" E("U8", "[1]", 0, 1) "}", d, 1, "name contains a NUL byte");
    expect_err("{\"__metadata__\":[]}", d, 0, "__metadata__: a JSON array, not an object");
    expect_err("{\"__metadata__\":{\"k\":1}}", d, 0, "__metadata__: 'k' is a JSON number, not a string");
    expect_err("{\"__metadata__\":{},\"__metadata__\":{}}", d, 0, "__metadata__: given twice");
    expect_err("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", d, 0, "__metadata__: key 'k': given twice");
    expect_err("{\"__metadata__\":{\"k\\u0000\":\"a\"}}", d, 0, "__metadata__: key 'k' contains a NUL byte");

    /* The header length itself. */
    uint8_t small[7] = {0};
    candle_safetensors *st = NULL;
    CHECK(candle_safetensors_open_memory(&st, small, 7, "model.safetensors") == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "model.safetensors: header length: file is 7 bytes");
    CHECK(candle_safetensors_open_memory(&st, NULL, 0, NULL) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "safetensors: header length: file is 0 bytes");
    uint8_t big[16] = {9, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    CHECK(candle_safetensors_open_memory(&st, big, 16, "model.safetensors") == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "model.safetensors: header length: 9 exceeds the 8 bytes after it");
    memset(big, 0xff, 8);
    CHECK(candle_safetensors_open_memory(&st, big, 16, "model.safetensors") == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "header length: 18446744073709551615 exceeds");
    CHECK(st == NULL);
    CHECK(candle_safetensors_open_memory(NULL, big, 16, NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK(candle_safetensors_open_memory(&st, NULL, 16, NULL) == CANDLE_ERR_INVALID_ARG);
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* Through a file: mapped (zero-copy into the mapping, alive after close)
 * and read into memory; I/O errors; the 100 MB header limit (a sparse
 * file, so nothing of that size is written). */
static void test_files(candle_ctx *ctx) {
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    float vals[4] = {1, 2, 3, 4};
    size_t n;
    uint8_t *img = image("{\"__metadata__\":{\"format\":\"pt\"},\"w\":" E("F32", "[4]", 0, 16) "}",
                         120, vals, 16, &n);
    write_file(path, img, n);
    free(img);
    for (int no_mmap = 0; no_mmap < 2; no_mmap++) {
        candle_safetensors_open_params p = {.no_mmap = no_mmap};
        candle_safetensors *st = NULL;
        candle_status s = candle_safetensors_open(&st, path, no_mmap ? &p : NULL);
        CHECK_MSG(s == CANDLE_OK, "%s", candle_last_errmsg());
        if (s) continue;
        candle_storage *sto = candle_safetensors_storage(st);
        CHECK(sto->kind == (no_mmap ? CANDLE_STORAGE_HEAP : CANDLE_STORAGE_MMAP));
        const char *v;
        CHECK(candle_safetensors_metadata(st, "format", &v, NULL) && !strcmp(v, "pt"));
        candle_tensor *t = candle_safetensors_load_tensor(st, ctx, "w");
        CHECK(t && candle_tensor_data(t) == (uint8_t *)sto->data + 128);
        candle_safetensors_close(st); /* the tensor keeps the image */
        float out[4] = {0};
        if (t) CHECK_OK(ctx, candle_tensor_to_f32(t, out));
        CHECK(!memcmp(out, vals, 16));
    }
    candle_safetensors *st = NULL;
    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing.safetensors", dir);
    CHECK(candle_safetensors_open(&st, missing, NULL) == CANDLE_ERR_IO);
    CHECK_CONTAINS(candle_last_errmsg(), "missing.safetensors: open");
    CHECK(candle_safetensors_open(&st, dir, NULL) == CANDLE_ERR_IO);
    CHECK_CONTAINS(candle_last_errmsg(), "not a regular file");
    write_file(path, "", 0);
    CHECK(candle_safetensors_open(&st, path, NULL) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "model.safetensors: header length: file is 0 bytes");
    /* A bad header through the no_mmap path costs no copy and reports the same. */
    img = image("{\"a\":" E("F32", "[2]", 0, 4) "}", 0, vals, 4, &n);
    write_file(path, img, n);
    free(img);
    candle_safetensors_open_params p = {.no_mmap = true};
    CHECK(candle_safetensors_open(&st, path, &p) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "hold 4 bytes but shape [2] of F32 needs 8");
    uint8_t len[8];
    uint64_t hl = CANDLE_SAFETENSORS_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(hl >> (8 * i));
    write_file(path, len, 8);
    CHECK(truncate(path, (off_t)(8 + hl + 16)) == 0);
    CHECK(candle_safetensors_open(&st, path, NULL) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "header length: 100000001 exceeds the limit of 100000000 bytes");
    CHECK(st == NULL);
    remove(path);
}

/* "meta KEY VALUE" lines, then "tensor NAME DTYPE [SHAPE] v0 v1 ..." (the
 * values as loaded, %.9g) or "... unsupported". */
static int dump(const char *path) {
    candle_safetensors *st = NULL;
    candle_ctx *ctx = NULL;
    if (candle_safetensors_open(&st, path, NULL) || candle_ctx_init(&ctx, NULL)) {
        fprintf(stderr, "%s\n", candle_last_errmsg());
        candle_safetensors_close(st);
        return 1;
    }
    const char *k, *v;
    for (int64_t i = 0; candle_safetensors_metadata_at(st, i, &k, &v, NULL); i++)
        printf("meta %s %s\n", k, v);
    for (int64_t i = 0; i < candle_safetensors_n_tensors(st); i++) {
        const candle_safetensors_tensor_info *ti = candle_safetensors_tensor(st, i);
        char sh[128];
        printf("tensor %s %s %s", ti->name, ti->st_dtype, candle_shape_str(ti->rank, ti->shape, sh, sizeof sh));
        candle_tensor *t = candle_safetensors_load_tensor(st, ctx, ti->name);
        int64_t n = t ? candle_tensor_numel(t) : 0;
        float *f = malloc(((size_t)n + 1) * sizeof *f);
        if (!t) printf(" unsupported");
        else if (candle_tensor_to_f32(t, f) == CANDLE_OK)
            for (int64_t j = 0; j < n; j++) printf(" %.9g", f[j]);
        free(f);
        candle_ctx_clear_error(ctx);
        putchar('\n');
    }
    candle_ctx_free(ctx);
    candle_safetensors_close(st);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--dump")) return dump(argv[2]);
    snprintf(dir, sizeof dir, "%s/candle_safetensors_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    candle_ctx *ctx = NULL;
    CHECK_OK(NULL, candle_ctx_init(&ctx, NULL));
    test_stored_dtypes(ctx);
    test_conversions(ctx);
    test_unsupported(ctx);
    test_shapes_and_metadata(ctx);
    test_malformed();
    test_files(ctx);
    candle_ctx_free(ctx);
    rmdir(dir);
    return test_done("test_safetensors");
}
