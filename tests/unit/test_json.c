/* The strict JSON reader: values, escapes, limits and every rejection. */
#include <string.h>

#include "core/json-impl.h"
#include "test.h"

static json_doc *parse(const char *s) {
    json_doc *d = NULL;
    if (json_parse(&d, s, strlen(s), "t.json", NULL)) return NULL;
    return d;
}

/* Parsing s fails with a message containing `why`. */
static void rejects(const char *s, const char *why) {
    json_doc *d = NULL;
    candle_status st = json_parse(&d, s, strlen(s), "t.json", NULL);
    CHECK_MSG(st == CANDLE_ERR_FORMAT && !d, "accepted '%s'", s);
    if (st) {
        CHECK_CONTAINS(candle_last_errmsg(), "t.json: byte ");
        CHECK_CONTAINS(candle_last_errmsg(), why);
    }
    json_free(d);
}

static void test_values(void) {
    json_doc *d = parse(" {\"a\": [1, -2.5e1, true, false, null, \"x\"], \"b\": {\"c\": -0},"
                        " \"big\": 9223372036854775808, \"min\": -9223372036854775808} ");
    CHECK(d != NULL);
    if (!d) return;
    const json_value *r = json_root(d), *a = json_get(r, "a");
    CHECK(r->type == JSON_OBJECT && r->n == 4);
    CHECK(a && a->type == JSON_ARRAY && a->n == 6);
    int64_t i = 0;
    double f = 0;
    bool b = false;
    const char *s;
    size_t n;
    CHECK(json_as_i64(json_at(a, 0), &i) && i == 1);
    CHECK(!json_as_i64(json_at(a, 1), &i) && json_as_f64(json_at(a, 1), &f) && f == -25.0);
    CHECK(json_as_bool(json_at(a, 2), &b) && b);
    CHECK(json_as_bool(json_at(a, 3), &b) && !b);
    CHECK(json_at(a, 4)->type == JSON_NULL && json_at(a, 6) == NULL);
    CHECK(json_as_str(json_at(a, 5), &s, &n) && n == 1 && !strcmp(s, "x"));
    CHECK(json_as_i64(json_get(json_get(r, "b"), "c"), &i) && i == 0);
    CHECK(!json_as_i64(json_get(r, "big"), &i) && json_as_f64(json_get(r, "big"), &f) &&
          f == 9223372036854775808.0);
    CHECK(json_as_i64(json_get(r, "min"), &i) && i == INT64_MIN);
    CHECK(json_get(r, "zz") == NULL && json_get(a, "a") == NULL && json_get(NULL, "a") == NULL);
    CHECK(json_str_eq(json_obj_key(r, 1), "b") && json_obj_val(r, 1) == json_get(r, "b"));
    CHECK(json_get(r, "b")->offset == 49);
    json_free(d);
}

static void test_strings(void) {
    json_doc *d = parse("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\\u20ac\\ud83d\\ude00\", \"h\xc3\xa9\", "
                        "\"a\\u0000b\"]");
    CHECK(d != NULL);
    if (!d) return;
    const json_value *r = json_root(d);
    CHECK(json_str_eq(json_at(r, 0), "\"\\/\b\f\n\r\t"));
    CHECK(json_str_eq(json_at(r, 1), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
    CHECK(json_str_eq(json_at(r, 2), "h\xc3\xa9"));
    CHECK(json_at(r, 3)->n == 3 && !memcmp(json_at(r, 3)->u.str, "a\0b", 3));
    json_free(d);
}

static void test_rejects(void) {
    rejects("", "value expected");
    rejects("[1,]", "value expected");
    rejects("{\"a\":1,}", "object key expected");
    rejects("[1 2]", "',' or ']' expected");
    rejects("{\"a\" 1}", "':' expected");
    rejects("{1:2}", "object key expected");
    rejects("[01]", "leading zero");
    rejects("[1.]", "digits expected after '.'");
    rejects("[1e]", "digits expected in exponent");
    rejects("[-]", "invalid number");
    rejects("[tru]", "invalid literal");
    rejects("\"abc", "unterminated string");
    rejects("\"a\\", "unterminated string");
    rejects("\"a\tb\"", "control character");
    rejects("\"\\x\"", "invalid escape");
    rejects("\"\\u12g4\"", "invalid \\u escape");
    rejects("\"\\ud800\"", "high surrogate");
    rejects("\"\\udc00\"", "lone low surrogate");
    rejects("\"\xc3\"", "invalid UTF-8");
    rejects("\"\xc0\xaf\"", "invalid UTF-8");         /* overlong */
    rejects("\"\xed\xa0\x80\"", "invalid UTF-8");     /* encoded surrogate */
    rejects("\"\xf4\x90\x80\x80\"", "invalid UTF-8"); /* > U+10FFFF */
    rejects("[1] x", "trailing bytes");
    rejects("[[1]", "unterminated array");
    rejects("{\"a\":1", "unterminated object");
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    json_doc *d = NULL;
    CHECK(json_parse(&d, deep, 200, "t.json", NULL) == CANDLE_ERR_FORMAT);
    CHECK_CONTAINS(candle_last_errmsg(), "nesting too deep");
    json_parse_params p = {.max_depth = 128};
    CHECK(json_parse(&d, deep, 200, "t.json", &p) == CANDLE_OK && d);
    json_free(d);
    /* text need not be NUL-terminated: nothing past len is read */
    CHECK(json_parse(&d, "[1]]", 3, "t.json", NULL) == CANDLE_OK);
    json_free(d);
}

int main(void) {
    test_values();
    test_strings();
    test_rejects();
    return test_done("test_json");
}
