/* GBNF grammars: the parser (good grammars and each error), the matcher on
 * byte strings, the token mask over a small vocabulary and the sampler hook. */
#include <limits.h>
#include <math.h>

#include "candle/grammar.h"
#include "candle/sampler.h"
#include "test.h"

static candle_grammar *parse(const char *text) {
    candle_grammar *g = NULL;
    if (candle_grammar_parse(&g, text, strlen(text))) {
        printf("  parse failed: %s\n  grammar: %s\n", candle_last_errmsg(), text);
        return NULL;
    }
    return g;
}

static bool match(const candle_grammar *g, const char *s) { return candle_grammar_match(g, s, strlen(s)); }

/* Refused, with each of the wanted fragments in the message. */
static void bad(const char *text, const char *want1, const char *want2) {
    candle_grammar *g = NULL;
    candle_status st = candle_grammar_parse(&g, text, strlen(text));
    CHECK(st == CANDLE_ERR_INVALID_ARG && g == NULL);
    const char *m = candle_last_errmsg();
    bool ok = strstr(m, want1) && (!want2 || strstr(m, want2));
    if (!ok) printf("  grammar %s\n  message '%s' lacks '%s' / '%s'\n", text, m, want1, want2 ? want2 : "");
    CHECK(ok);
    candle_grammar_free(g);
}

static char *read_file(const char *name, size_t *len) {
    char path[1024];
    const char *src = getenv("CANDLE_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/data/grammars/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 16);
    *len = fread(buf, 1, (1 << 16) - 1, f);
    buf[*len] = 0;
    fclose(f);
    return buf;
}

static candle_grammar *parse_file(const char *name) {
    size_t len;
    char *text = read_file(name, &len);
    CHECK(text != NULL);
    if (!text) return NULL;
    candle_grammar *g = parse(text);
    free(text);
    CHECK(g != NULL);
    return g;
}

static void test_features(void) {
    candle_grammar *g = parse("root ::= \"a\" b* c+ d? (\"x\" | \"y\"){2,3} [0-9]{2} e{1,}\n"
                              "b ::= \"b\"\nc ::= \"c\"\nd ::= \"d\"   # a comment\ne ::= \"e\"");
    CHECK(g);
    if (g) {
        CHECK(match(g, "acxy12e"));
        CHECK(match(g, "abbbccdxyx00eee"));
        CHECK(!match(g, "axy12e"));      /* c+ needs one */
        CHECK(!match(g, "acx12e"));      /* {2,3} needs two */
        CHECK(!match(g, "acxyxy12e"));   /* at most three */
        CHECK(!match(g, "acxy1e"));      /* [0-9]{2} */
        CHECK(!match(g, "acxy12"));      /* e{1,} */
        CHECK(!match(g, "acdxy12e "));   /* nothing after */
    }
    candle_grammar_free(g);

    g = parse("root ::= \"\\n\\t\\\\\\\"\\x41\\u00e9\\U0001F600\" [^a-z\\]] . [\\x00-\\x1f]");
    CHECK(g);
    if (g) {
        CHECK(match(g, "\n\t\\\"A\xC3\xA9\xF0\x9F\x98\x80" "B\xE2\x82\xAC\x01"));
        CHECK(!match(g, "\n\t\\\"A\xC3\xA9\xF0\x9F\x98\x80" "b\xE2\x82\xAC\x01")); /* [^a-z] */
        CHECK(!match(g, "\n\t\\\"A\xC3\xA9\xF0\x9F\x98\x80" "]xx"));
        CHECK(!match(g, "\n\t\\\"A\xC3\xA9\xF0\x9F\x98\x80" "BB "));               /* [\x00-\x1f] */
    }
    candle_grammar_free(g);

    /* multi-line rules inside parentheses and after '|', empty alternatives */
    g = parse("root ::= (\n  \"a\"\n  | \"b\" ) x\nx ::= | \"z\"\n");
    CHECK(g);
    if (g) {
        CHECK(match(g, "a") && match(g, "bz") && !match(g, "c") && !match(g, "az z"));
    }
    candle_grammar_free(g);

    /* fuzz_grammar: an empty root (only the empty stack) read a NULL stack buffer (UBSan) */
    g = parse("root ::=");
    CHECK(g);
    if (g) CHECK(match(g, "") && !match(g, "a"));
    candle_grammar_free(g);

    /* right recursion does not deepen the stack: a long text matches */
    g = parse("root ::= \"x\" root | \"\"");
    CHECK(g);
    if (g) {
        char *s = malloc(20001);
        memset(s, 'x', 20000);
        s[20000] = 0;
        CHECK(match(g, s));
        free(s);
    }
    candle_grammar_free(g);

    /* deep nesting is refused at the matcher's depth limit, not a crash */
    g = parse("root ::= \"(\" root \")\" | \"x\"");
    CHECK(g);
    if (g) {
        CHECK(match(g, "((x))"));
        char *s = malloc(6001);
        memset(s, '(', 3000);
        s[3000] = 'x';
        memset(s + 3001, ')', 3000);
        s[6001 - 1] = 0;
        CHECK(!match(g, s));
        free(s);
    }
    candle_grammar_free(g);

    /* ambiguity: equal stacks are merged, so this stays small */
    g = parse("root ::= (\"a\" | \"a\" | [a])*");
    CHECK(g);
    if (g) {
        char s[3001];
        memset(s, 'a', 3000);
        s[3000] = 0;
        CHECK(match(g, s) && !match(g, "ab"));
    }
    candle_grammar_free(g);
}

static void test_errors(void) {
    bad("root ::= foo", "1:10", "undefined rule 'foo'");
    bad("root ::= \"abc", "1:10", "unterminated string");
    bad("root ::= [a-", "in rule 'root'", "unterminated");
    bad("root ::= (\"a\"", "1:10", "unclosed '('");
    bad("root ::= x\nx ::= x \"a\"", "left recursion", "'x'");
    bad("root ::= y\ny ::= z? root \"a\"\nz ::= \"z\"", "left recursion", NULL);
    bad("a ::= \"x\"", "no rule 'root'", NULL);
    bad("root ::= \"\\q\"", "1:11", "unknown escape");
    bad("root ::= \"\\x4\"", "hex digits", NULL);
    bad("root ::= \"a\"{5,2}", "max below min", NULL);
    bad("root ::= \"a\"{99999}", "repetition count", NULL);
    bad("root ::= *", "'*' needs something", NULL);
    bad("root ::= \"a\"\nroot ::= \"b\"", "2:1", "defined twice");
    bad("root ::= [z-a]", "range", NULL);
    bad("root ::= \"a\" )", "1:14", "unexpected ')'");
    bad("root ::= \"a\"\nx ::= \"b\" | ( \"c\"", "2:13", "in rule 'x'");
    bad("root ::= \"\xC3(\"", "invalid UTF-8", NULL);
    bad("root = \"a\"", "expected '::='", NULL);
    char deep[2000] = "root ::= ";
    for (int i = 0; i < 300; i++) strcat(deep, "(");
    bad(deep, "nested deeper", NULL);
}

static void test_files(void) {
    candle_grammar *g = parse_file("json.gbnf");
    if (g) {
        CHECK(match(g, "{}"));
        CHECK(match(g, "{\"a\": 1, \"b\": [true, false, null, \"x\\n\\u00e9\"], \"c\": {\"d\": -1.5e3}}"));
        CHECK(match(g, "{\"k\": \"caf\xC3\xA9\"}"));
        CHECK(!match(g, "{\"a\": 01}"));  /* leading zero: 0 then 1 is not allowed */
        CHECK(!match(g, "{\"a\" 1}"));
        CHECK(!match(g, "[1]"));          /* root is an object */
        CHECK(!match(g, "{\"a\": tru}"));
        CHECK(!match(g, "{\"a\": \"x\ty\"}")); /* control characters must be escaped */
        CHECK(!match(g, "{\"a\": 1,}"));
    }
    candle_grammar_free(g);
    g = parse_file("arithmetic.gbnf");
    if (g) {
        CHECK(match(g, "a+2= 3\n"));
        CHECK(match(g, "(x1 )*y/4=z\nb=1\n"));
        CHECK(!match(g, "a + 2 = 3\n")); /* no space before an operand after an operator */
        CHECK(!match(g, "a+2=3"));
        CHECK(!match(g, "=3\n"));
    }
    candle_grammar_free(g);
    g = parse_file("list.gbnf");
    if (g) {
        CHECK(match(g, "- one\n- two \xE2\x82\xAC\n"));
        CHECK(!match(g, "- one"));
        CHECK(!match(g, "- \n"));
        CHECK(!match(g, "- a\xE2\x80\xA8" "b\n")); /* U+2028 */
        CHECK(!match(g, "* one\n"));
    }
    candle_grammar_free(g);
}

static void test_incremental(void) {
    candle_grammar *g = parse("root ::= \"\xC3\xA9\"+ \"!\"");
    candle_grammar_state *s = NULL;
    CHECK(g && !candle_grammar_state_init(&s, g));
    if (!s) {
        candle_grammar_free(g);
        return;
    }
    CHECK(candle_grammar_state_accept_bytes(s, "\xC3", 1)); /* half of é */
    CHECK(!candle_grammar_state_can_end(s));
    CHECK(!candle_grammar_state_accept_bytes(s, "!", 1));   /* refused, state kept */
    CHECK(candle_grammar_state_accept_bytes(s, "\xA9\xC3", 2));
    CHECK(!candle_grammar_state_accept_bytes(s, "\xA8", 1)); /* è is not é */
    CHECK(candle_grammar_state_accept_bytes(s, "\xA9!", 2));
    CHECK(candle_grammar_state_can_end(s) && candle_grammar_state_done(s));
    CHECK(!candle_grammar_state_accept_bytes(s, "!", 1));
    candle_grammar_state_reset(s);
    CHECK(!candle_grammar_state_accept_bytes(s, "\xC3\x28", 2)); /* invalid UTF-8 */
    CHECK(!candle_grammar_state_accept_bytes(s, "\xC0\x80", 2)); /* overlong */
    CHECK(!candle_grammar_state_accept_bytes(s, "\xE9", 1));     /* a lead byte no é starts with */
    candle_grammar_state_free(s);
    candle_grammar_free(g);
}

enum { T_YES, T_NO, T_DOT, T_Y, T_ES, T_YE, T_S, T_N, T_O, T_X, T_C3, T_A9, T_E_ACUTE, T_BYTE_Y, T_EOS, T_SPECIAL, N_TOK };

static void test_mask(void) {
    const char *pieces[N_TOK] = {"yes", "no", ".", "y", "es", "ye", "s", "n", "o", "x", "\xC3", "\xA9",
                                 "\xC3\xA9", "y", "", NULL};
    size_t lens[N_TOK];
    for (int i = 0; i < N_TOK; i++) lens[i] = pieces[i] ? strlen(pieces[i]) : 0;
    candle_grammar_vocab *v = NULL;
    CHECK(!candle_grammar_vocab_from_pieces(&v, pieces, lens, N_TOK, T_EOS));
    candle_grammar *g = parse("root ::= (\"yes\" | \"no\" | \"\xC3\xA9\") \".\"");
    candle_grammar_state *s = NULL;
    CHECK(g && v && !candle_grammar_state_init(&s, g));
    if (!s) goto out;
    float logits[N_TOK];
    int32_t n_ok = 0;
    for (int i = 0; i < N_TOK; i++) logits[i] = (float)i;
    CHECK(!candle_grammar_mask(s, v, logits, &n_ok));
    bool want0[N_TOK] = {[T_YES] = 1, [T_NO] = 1, [T_Y] = 1, [T_YE] = 1, [T_N] = 1, [T_C3] = 1,
                         [T_E_ACUTE] = 1, [T_BYTE_Y] = 1};
    int n_want = 0;
    for (int i = 0; i < N_TOK; i++) {
        n_want += want0[i];
        CHECK(want0[i] ? logits[i] == (float)i : logits[i] == -INFINITY);
        CHECK(candle_grammar_token_ok(s, v, i) == want0[i]);
    }
    CHECK(n_ok == n_want);
    /* after the first byte of é only its second byte */
    CHECK(!candle_grammar_accept_token(s, v, T_C3));
    for (int i = 0; i < N_TOK; i++) logits[i] = 0;
    CHECK(!candle_grammar_mask(s, v, logits, &n_ok));
    CHECK(n_ok == 1 && logits[T_A9] == 0 && logits[T_DOT] == -INFINITY);
    CHECK(!candle_grammar_accept_token(s, v, T_A9));
    CHECK(candle_grammar_accept_token(s, v, T_EOS) == CANDLE_ERR_INVALID_ARG); /* not yet */
    CHECK(!candle_grammar_accept_token(s, v, T_DOT));
    for (int i = 0; i < N_TOK; i++) logits[i] = 0;
    CHECK(!candle_grammar_mask(s, v, logits, &n_ok));
    CHECK(n_ok == 1 && logits[T_EOS] == 0); /* only the end remains */
    CHECK(!candle_grammar_accept_token(s, v, T_EOS));

    /* the sampler never leaves the grammar, greedy or not */
    for (int temp = 0; temp < 2; temp++) {
        candle_sampler_params p = candle_sampler_default_params();
        p.temp = temp ? 1.5f : 0.0f;
        p.top_k = 0;
        p.min_p = 0;
        p.top_p = 1;
        for (uint64_t seed = 0; seed < 20; seed++) {
            p.seed = seed;
            candle_sampler *smp = NULL;
            CHECK(!candle_sampler_init(&smp, N_TOK, &p));
            if (!smp) break;
            candle_grammar_state_reset(s);
            candle_sampler_set_grammar(smp, s, v);
            char text[64] = "";
            size_t tl = 0;
            bool ok = true;
            for (int step = 0; step < 10; step++) {
                float lg[N_TOK];
                for (int i = 0; i < N_TOK; i++) lg[i] = (float)((i * 7 + (int)seed * 3 + step) % 11);
                lg[T_X] = 100; /* the model "wants" x, never allowed */
                int32_t id = candle_sampler_sample(smp, lg);
                if (id < 0 || candle_grammar_accept_token(s, v, id)) {
                    ok = false;
                    break;
                }
                if (id == T_EOS) break;
                memcpy(text + tl, pieces[id], lens[id]);
                tl += lens[id];
                text[tl] = 0;
            }
            CHECK(ok);
            CHECK(match(g, text));
            candle_sampler_free(smp);
        }
    }
out:
    candle_grammar_state_free(s);
    candle_grammar_free(g);
    candle_grammar_vocab_free(v);
}

/* A grammar the vocabulary cannot spell: the mask says so instead of
 * removing every token. */
static void test_mask_none(void) {
    const char *pieces[2] = {"a", ""};
    size_t lens[2] = {1, 0};
    candle_grammar_vocab *v = NULL;
    candle_grammar *g = parse("root ::= \"b\"");
    candle_grammar_state *s = NULL;
    CHECK(!candle_grammar_vocab_from_pieces(&v, pieces, lens, 2, 1) && g &&
          !candle_grammar_state_init(&s, g));
    float logits[2] = {1, 2};
    CHECK(candle_grammar_mask(s, v, logits, NULL) == CANDLE_ERR_INVALID_ARG);
    CHECK(strstr(candle_last_errmsg(), "no token can continue") != NULL);
    CHECK(logits[0] == 1 && logits[1] == 2);
    candle_grammar_state_free(s);
    candle_grammar_free(g);
    candle_grammar_vocab_free(v);
}

/* The mask (a trie walk that reuses siblings' steps) agrees with checking
 * each token alone, at several points of the JSON grammar, on every piece of
 * one to three characters of an alphabet with JSON's delimiters and a
 * two-byte character split across pieces. */
static void test_mask_vs_token_ok(void) {
    static const char alpha[] = "a\"\\{}: 1,u\xC3\xA9-.e";
    int na = (int)strlen(alpha);
    int n = na + na * na + na * na * na + 1;
    char **pieces = malloc((size_t)n * sizeof *pieces);
    size_t *lens = malloc((size_t)n * sizeof *lens);
    int k = 0;
    for (int len = 1; len <= 3; len++) {
        int count = len == 1 ? na : len == 2 ? na * na : na * na * na;
        for (int c = 0; c < count; c++, k++) {
            pieces[k] = malloc(4);
            int x = c;
            for (int i = 0; i < len; i++, x /= na) pieces[k][i] = alpha[x % na];
            lens[k] = (size_t)len;
        }
    }
    pieces[k] = NULL; /* the end of generation */
    lens[k] = 0;
    candle_grammar_vocab *v = NULL;
    CHECK(!candle_grammar_vocab_from_pieces(&v, (const char *const *)pieces, lens, n, n - 1));
    candle_grammar *g = parse_file("json.gbnf");
    candle_grammar_state *s = NULL;
    CHECK(g && v && !candle_grammar_state_init(&s, g));
    static const char *const at[] = {"", "{", "{\"a", "{\"a\\", "{\"a\": ", "{\"a\": 1",
                                     "{\"a\": \"\xC3", "{\"a\": -1.5e", "{\"a\": {}}"};
    float *logits = malloc((size_t)n * sizeof *logits);
    for (size_t i = 0; s && i < sizeof at / sizeof at[0]; i++) {
        candle_grammar_state_reset(s);
        CHECK(candle_grammar_state_accept_bytes(s, at[i], strlen(at[i])));
        for (int t = 0; t < n; t++) logits[t] = 0;
        int32_t n_ok = 0;
        CHECK(!candle_grammar_mask(s, v, logits, &n_ok) && n_ok > 0);
        int agree = 0;
        for (int t = 0; t < n; t++) agree += (logits[t] == 0) == candle_grammar_token_ok(s, v, t);
        if (agree != n) printf("  at '%s': %d of %d tokens disagree\n", at[i], n - agree, n);
        CHECK(agree == n);
    }
    /* top-k sampling checks only the best tokens when that settles it: the
     * draws equal those of a plain sampler on fully masked logits */
    candle_grammar_state *s2 = NULL, *s3 = NULL;
    CHECK(g && !candle_grammar_state_init(&s2, g) && !candle_grammar_state_init(&s3, g));
    double worst = 0;
    for (int round = 0; s && s2 && s3 && round < 2; round++) {
        candle_sampler_params p = candle_sampler_default_params();
        p.top_k = round ? 3 : 40;
        p.temp = 1.0f;
        p.seed = 5 + (uint64_t)round;
        candle_sampler *a = NULL, *b = NULL, *c = NULL;
        CHECK(!candle_sampler_init(&a, n, &p) && !candle_sampler_init(&b, n, &p) &&
              !candle_sampler_init(&c, n, &p));
        candle_sampler_set_grammar(a, s, v);
        /* c also reports logprobs: the full mask (no top-k shortcut), the same draws */
        candle_sampler_set_grammar(c, s3, v);
        candle_grammar_state_reset(s);
        candle_grammar_state_reset(s2);
        candle_grammar_state_reset(s3);
        uint64_t x = 12345;
        int same = 0, differ = 0, steps = 60;
        for (int step = 0; step < steps; step++) {
            for (int t = 0; t < n; t++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                logits[t] = (float)(x >> 40) / (float)(1 << 24) * 8.0f;
            }
            int32_t ta = candle_sampler_sample(a, logits);
            candle_token_logprob ch, top[5];
            int32_t n_top = 0;
            int32_t tc = candle_sampler_sample_logprobs(c, logits, 5, &ch, top, &n_top);
            CHECK(!candle_grammar_mask(s2, v, logits, NULL));
            int32_t tb = candle_sampler_sample(b, logits);
            /* the reference: log-softmax of the masked logits in double, top 5 by scans */
            double m = -INFINITY, z = 0;
            for (int t = 0; t < n; t++) m = logits[t] > m ? logits[t] : m;
            for (int t = 0; t < n; t++) z += exp((double)logits[t] - m);
            int n_allowed = 0;
            for (int t = 0; t < n; t++) n_allowed += logits[t] > -INFINITY;
            CHECK(tc == ta && ch.token == tc && n_top == (n_allowed < 5 ? n_allowed : 5));
            if (tc >= 0) worst = fmax(worst, fabs(ch.logprob - ((double)logits[tc] - m - log(z))));
            for (int k = 0, prev = -1; k < n_top && k < 5; k++) {
                int best = -1;
                for (int t = 0; t < n; t++)
                    if ((prev < 0 || logits[t] < logits[prev] || (logits[t] == logits[prev] && t > prev)) &&
                        (best < 0 || logits[t] > logits[best]))
                        best = t;
                CHECK(top[k].token == best);
                if (best >= 0) worst = fmax(worst, fabs(top[k].logprob - ((double)logits[best] - m - log(z))));
                prev = best;
            }
            same += ta == tb;
            differ += ta != tb;
            if (ta != tb || ta < 0 || ta == n - 1) break;
            CHECK(!candle_grammar_accept_token(s, v, ta) && !candle_grammar_accept_token(s2, v, tb) &&
                  !candle_grammar_accept_token(s3, v, tc));
        }
        if (differ) printf("  top_k %d: draws differ after %d equal ones\n", (int)p.top_k, same);
        CHECK(differ == 0 && same > 3); /* until the text ends */
        candle_sampler_free(a);
        candle_sampler_free(b);
        candle_sampler_free(c);
    }
    CHECK(worst < 1e-5); /* the logprobs are the masked distribution's */
    if (worst >= 1e-5) printf("  logprobs under the grammar: worst difference %g\n", worst);
    candle_grammar_state_free(s2);
    candle_grammar_state_free(s3);
    free(logits);
    candle_grammar_state_free(s);
    candle_grammar_free(g);
    candle_grammar_vocab_free(v);
    for (int i = 0; i < n - 1; i++) free(pieces[i]);
    free(pieces);
    free(lens);
}

/* JSON Schema to GBNF: generated grammars accept what the schema allows
 * (in the generated property order) and refuse the rest; unsupported
 * keywords are refused by name. */
static candle_grammar *schema(const char *json) {
    char *gbnf = NULL;
    if (candle_json_schema_to_gbnf(json, strlen(json), &gbnf)) {
        printf("  schema refused: %s\n  %s\n", candle_last_errmsg(), json);
        return NULL;
    }
    candle_grammar *g = parse(gbnf);
    candle_free(gbnf);
    return g;
}

static void schema_bad(const char *json, const char *want) {
    char *gbnf = NULL;
    CHECK(candle_json_schema_to_gbnf(json, strlen(json), &gbnf) == CANDLE_ERR_INVALID_ARG && !gbnf);
    bool ok = strstr(candle_last_errmsg(), want) != NULL;
    if (!ok) printf("  schema %s: message '%s' lacks '%s'\n", json, candle_last_errmsg(), want);
    CHECK(ok);
}

static void test_json_schema(void) {
    candle_grammar *g = schema(
        "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 4},"
        " \"n\": {\"type\": \"integer\"}, \"e\": {\"enum\": [\"a\", 2, null]},"
        " \"t\": {\"type\": \"array\", \"items\": {\"type\": [\"number\", \"boolean\"]}, \"minItems\": 1, \"maxItems\": 2},"
        " \"c\": {\"const\": \"q\\\"\"}}, \"required\": [\"n\", \"name\"], \"title\": \"x\"}");
    CHECK(g);
    if (g) {
        CHECK(match(g, "{\"name\": \"ab\", \"n\": 3}"));
        CHECK(match(g, "{\"name\":\"\", \"n\":-7, \"e\": null, \"t\": [1.5, true], \"c\": \"q\\\"\"}"));
        CHECK(match(g, "{\"name\": \"ab\", \"n\": 3, \"t\": [false]}"));
        CHECK(!match(g, "{\"n\": 3}"));                               /* name is required */
        CHECK(!match(g, "{\"name\": \"abcde\", \"n\": 3}"));       /* maxLength */
        CHECK(!match(g, "{\"name\": \"ab\", \"n\": 3.5}"));        /* integer */
        CHECK(!match(g, "{\"name\": \"ab\", \"n\": 3, \"e\": \"b\"}"));
        CHECK(!match(g, "{\"name\": \"ab\", \"n\": 3, \"t\": []}"));  /* minItems */
        CHECK(!match(g, "{\"name\": \"ab\", \"n\": 3, \"t\": [1, 2, 3]}"));
        CHECK(!match(g, "{\"name\": \"ab\", \"n\": 3, \"z\": 1}"));  /* undeclared */
    }
    candle_grammar_free(g);
    /* only optional properties: any subset in order, commas right */
    g = schema("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"null\"}, \"b\": {\"type\": \"null\"},"
               " \"c\": {\"type\": \"null\"}}}");
    CHECK(g);
    if (g) {
        CHECK(match(g, "{}") && match(g, "{\"b\": null}") && match(g, "{\"a\": null, \"c\": null}"));
        CHECK(match(g, "{\"a\": null, \"b\": null, \"c\": null}"));
        CHECK(!match(g, "{, \"b\": null}") && !match(g, "{\"a\": null \"b\": null}"));
    }
    candle_grammar_free(g);
    g = schema("{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"array\", \"items\": true}]}");
    CHECK(g);
    if (g) CHECK(match(g, "\"x\"") && match(g, "[1, {\"a\": []}]") && !match(g, "1"));
    candle_grammar_free(g);
    /* $ref into $defs, recursive; string formats */
    g = schema("{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"},"
               " \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}}, \"required\": [\"v\"]}},"
               " \"$ref\": \"#/$defs/node\"}");
    CHECK(g);
    if (g) {
        CHECK(match(g, "{\"v\": 1, \"kids\": [{\"v\": 2}, {\"v\": 3, \"kids\": []}]}"));
        CHECK(!match(g, "{\"v\": 1, \"kids\": [{\"w\": 2}]}"));
    }
    candle_grammar_free(g);
    g = schema("{\"type\": \"array\", \"items\": {\"anyOf\": [{\"type\": \"string\", \"format\": \"date\"},"
               " {\"type\": \"string\", \"format\": \"date-time\"}, {\"type\": \"string\", \"format\": \"uuid\"}]}}");
    CHECK(g);
    if (g) {
        CHECK(match(g, "[\"2024-02-29\", \"2024-12-31T23:59:60Z\", \"123e4567-e89b-12d3-a456-426614174000\"]") == false);
        CHECK(match(g, "[\"2024-02-29\", \"2024-12-31T23:59:59.5+01:00\", \"123e4567-e89b-12d3-a456-426614174000\"]"));
        CHECK(!match(g, "[\"2024-13-01\"]") && !match(g, "[\"123e4567-e89b-12d3-a456\"]"));
    }
    candle_grammar_free(g);
    schema_bad("{\"$ref\": \"#/$defs/x\"}", "no such definition");
    schema_bad("{\"$ref\": \"other.json#/a\"}", "only #");
    schema_bad("{\"type\": \"string\", \"format\": \"email\"}", "'format'");
    schema_bad("{\"type\": \"number\", \"multipleOf\": 2}", "'multipleOf'");
    schema_bad("{\"type\": \"object\", \"properties\": {}, \"required\": [\"a\"]}", "required");
    schema_bad("{\"type\": \"decimal\"}", "unknown type 'decimal'");
    schema_bad("{\"type\": ", "json schema");
}

/* {"type": "string", "pattern": P} (P raw, escaped into the JSON here). */
static candle_grammar *pattern_schema(const char *pat) {
    char json[512];
    size_t n = (size_t)snprintf(json, sizeof json, "{\"type\": \"string\", \"pattern\": \"");
    for (const char *p = pat; *p && n + 8 < sizeof json; p++) {
        if (*p == '"' || *p == '\\') json[n++] = '\\';
        json[n++] = *p;
    }
    snprintf(json + n, sizeof json - n, "\"}");
    return schema(json);
}

/* The pattern's grammar accepts each JSON text of yes and none of no. */
static void pattern_case(const char *pat, const char *const *yes, const char *const *no) {
    candle_grammar *g = pattern_schema(pat);
    CHECK_MSG(g != NULL, "pattern %s refused", pat);
    for (int i = 0; g && yes[i]; i++) CHECK_MSG(match(g, yes[i]), "pattern %s: %s refused", pat, yes[i]);
    for (int i = 0; g && no[i]; i++) CHECK_MSG(!match(g, no[i]), "pattern %s: %s accepted", pat, no[i]);
    candle_grammar_free(g);
}

/* "pattern": the regular subset of ECMA-262 as JSON string text. */
static void test_json_schema_pattern(void) {
    pattern_case("^[a-z]{2,3}-\\d+$", (const char *[]){"\"ab-12\"", "\"abc-0\"", NULL},
                 (const char *[]){"\"abcd-1\"", "\"ab-\"", "\"1ab-1\"", "\"AB-1\"", NULL});
    pattern_case("abc", (const char *[]){"\"abc\"", "\"xxabcyy\"", "\"a\\\"abc\"", NULL},
                 (const char *[]){"\"abd\"", "\"ab\"", NULL});
    pattern_case("^(foo|ba[rz])$", (const char *[]){"\"foo\"", "\"baz\"", "\"bar\"", NULL},
                 (const char *[]){"\"bar2\"", "\"ba\"", "\"foobar\"", NULL});
    /* a quote and a backslash in the pattern come out as JSON escapes */
    pattern_case("^a\"b\\\\c$", (const char *[]){"\"a\\\"b\\\\c\"", NULL},
                 (const char *[]){"\"a\"b\\\\c\"", "\"a\\\"bc\"", NULL});
    /* a negated class: no raw quote, backslash or control character, the quote escaped */
    pattern_case("^[^0-9]+$", (const char *[]){"\"ab\"", "\"a\\\"\"", "\"\\\\\"", NULL},
                 (const char *[]){"\"a1\"", "\"\"", "\"a\nb\"", NULL});
    pattern_case("^\\s?x.$", (const char *[]){"\"\\tx!\"", "\"xz\"", "\" x\\\"\"", NULL},
                 (const char *[]){"\"x\"", "\"\\nx\"", "\"  xy\"", NULL});
    pattern_case("^(?:ab)*$|^z$", (const char *[]){"\"\"", "\"abab\"", "\"z\"", NULL},
                 (const char *[]){"\"aba\"", "\"zz\"", NULL});
    pattern_case("^a+?b{2,}$", (const char *[]){"\"abb\"", "\"aabbb\"", NULL}, (const char *[]){"\"ab\"", NULL});
    pattern_case("^[\\w.-]+@[a-z]+\\.(com|org)$", (const char *[]){"\"j.doe-1@ex.org\"", NULL},
                 (const char *[]){"\"j doe@ex.org\"", "\"j@ex.net\"", NULL});
    pattern_case("^\xc3\xa9+\\u0041$", (const char *[]){"\"\xc3\xa9\xc3\xa9" "A\"", NULL}, (const char *[]){"\"A\"", NULL});
    /* not regular or not translated: refused by name */
    schema_bad("{\"type\": \"string\", \"pattern\": \"(a)\\\\1\"}", "backreferences");
    schema_bad("{\"type\": \"string\", \"pattern\": \"(?=a)b\"}", "lookaround");
    schema_bad("{\"type\": \"string\", \"pattern\": \"a^b\"}", "^ and $");
    schema_bad("{\"type\": \"string\", \"pattern\": \"a{2\"}", "{m,n}");
    /* signed or spaced counts are no quantifier (the fuzzer's 3{-1} made a grammar that did not parse) */
    schema_bad("{\"type\": \"string\", \"pattern\": \"a3{-1}b\"}", "not a quantifier");
    schema_bad("{\"type\": \"string\", \"pattern\": \"a{ 2}\"}", "not a quantifier");
    schema_bad("{\"type\": \"string\", \"pattern\": \"a{1,-2}\"}", "{m,n}");
    schema_bad("{\"type\": \"string\", \"pattern\": \"a{1, 2}\"}", "{m,n}");
    schema_bad("{\"type\": \"string\", \"pattern\": \"\\\\bfoo\"}", "word boundaries");
    schema_bad("{\"type\": \"string\", \"pattern\": \"(ab\"}", "unclosed group");
    schema_bad("{\"type\": \"string\", \"pattern\": \"[ab\"}", "unterminated class");
    schema_bad("{\"type\": \"string\", \"pattern\": \"a**\"}", "a quantifier after a quantifier");
    schema_bad("{\"type\": \"string\", \"pattern\": \"(|a)*\"}", "can match the empty string");
    schema_bad("{\"type\": \"string\", \"pattern\": \"x((b?)*c)+\"}", "can match the empty string");
    pattern_case("^(a?){2,3}(b|)?c$", (const char *[]){"\"c\"", "\"aac\"", "\"aaabc\"", NULL},
                 (const char *[]){"\"aaaac\"", NULL});
    schema_bad("{\"pattern\": \"a\"}", "needs \"type\": \"string\"");
    schema_bad("{\"type\": \"string\", \"pattern\": \"a\", \"maxLength\": 3}", "minLength/maxLength");
    schema_bad("{\"type\": \"string\", \"pattern\": 3}", "must be a string");
}

/* minimum/maximum (and the exclusive forms) on integers: every integer in
 * [-1300, 1300] (and around large bounds) is accepted exactly when the
 * bounds allow it. */
static void test_json_schema_bounds(void) {
    static const struct {
        const char *kw;
        long long lo, hi; /* what the keywords allow; LLONG_MIN / MAX: open */
    } cases[] = {
        {"\"minimum\": 0, \"maximum\": 0", 0, 0},
        {"\"minimum\": 1, \"maximum\": 9", 1, 9},
        {"\"minimum\": -5, \"maximum\": 5", -5, 5},
        {"\"minimum\": 7, \"maximum\": 123", 7, 123},
        {"\"minimum\": -123, \"maximum\": -7", -123, -7},
        {"\"minimum\": 0", 0, LLONG_MAX},
        {"\"minimum\": 15", 15, LLONG_MAX},
        {"\"maximum\": -3", LLONG_MIN, -3},
        {"\"maximum\": 250", LLONG_MIN, 250},
        {"\"exclusiveMinimum\": 0.5, \"exclusiveMaximum\": 1000", 1, 999},
        {"\"minimum\": -1000.5, \"exclusiveMaximum\": -999", -1000, -1000},
        {"\"minimum\": 100, \"exclusiveMinimum\": 200, \"maximum\": 1201", 201, 1201},
        {"\"minimum\": 99990, \"maximum\": 100010", 99990, 100010},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[256], v[32];
        snprintf(json, sizeof json, "{\"type\": \"integer\", %s}", cases[i].kw);
        candle_grammar *g = schema(json);
        CHECK_MSG(g != NULL, "%s refused", json);
        if (!g) continue;
        int bad = 0;
        long long probes[] = {99989, 99990, 99991, 100009, 100010, 100011, 1000000, -1000000, 10000000000LL};
        for (long long x = -1300; x <= 1300 + (long long)(sizeof probes / sizeof probes[0]); x++) {
            long long y = x <= 1300 ? x : probes[x - 1301];
            snprintf(v, sizeof v, "%lld", y);
            bool want = y >= cases[i].lo && y <= cases[i].hi;
            if (match(g, v) != want && bad++ < 3) printf("  %s: %s %s\n", json, v, want ? "refused" : "accepted");
        }
        CHECK_MSG(!bad, "%s: %d integers misjudged", json, bad);
        CHECK(!match(g, "01") && !match(g, "1.0") && !match(g, "-0"));
        candle_grammar_free(g);
    }
    schema_bad("{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4.5}", "no integer between");
    schema_bad("{\"type\": \"number\", \"minimum\": 0.5}", "on type 'number' must be a whole number");
    schema_bad("{\"minimum\": 0}", "need \"type\": \"integer\" or \"number\"");
    schema_bad("{\"type\": \"integer\", \"maximum\": \"7\"}", "must be a number");
    schema_bad("{\"type\": \"integer\", \"exclusiveMinimum\": true}", "must be a number");
}

/* Bounds on numbers (whole bounds): every quarter from -30 to 30, written
 * plainly and with trailing zeros, is judged by the bounds; exponents are
 * not written. */
static void test_json_schema_number_bounds(void) {
    static const struct {
        const char *kw;
        double lo, hi;
        bool lo_x, hi_x;
    } cases[] = {
        {"\"minimum\": 0, \"maximum\": 1", 0, 1, false, false},
        {"\"exclusiveMinimum\": 0, \"exclusiveMaximum\": 1", 0, 1, true, true},
        {"\"minimum\": -5, \"exclusiveMaximum\": 12", -5, 12, false, true},
        {"\"exclusiveMinimum\": -20, \"maximum\": -3", -20, -3, true, false},
        {"\"exclusiveMaximum\": 0", -1e9, 0, false, true},
        {"\"minimum\": 7", 7, 1e9, false, false},
        {"\"minimum\": -2, \"exclusiveMinimum\": -2, \"maximum\": 3, \"exclusiveMaximum\": 5", -2, 3, true, false},
        {"\"minimum\": 4, \"maximum\": 4", 4, 4, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[256], v[48];
        snprintf(json, sizeof json, "{\"type\": \"number\", %s}", cases[i].kw);
        candle_grammar *g = schema(json);
        CHECK_MSG(g != NULL, "%s refused", json);
        if (!g) continue;
        int bad = 0, in = 0;
        for (int q = -120; q <= 120; q++) {
            double x = q / 4.0;
            bool want = (cases[i].lo_x ? x > cases[i].lo : x >= cases[i].lo) &&
                        (cases[i].hi_x ? x < cases[i].hi : x <= cases[i].hi);
            in += want;
            for (int form = 0; form < 3; form++) {
                if (form == 0) snprintf(v, sizeof v, "%g", x);
                else snprintf(v, sizeof v, form == 1 ? "%.2f" : "%.5f", x);
                if (!strcmp(v, "-0") || !strncmp(v, "-0.00", 5)) continue; /* -0 is 0; not probed */
                if (match(g, v) != want && bad++ < 3) printf("  %s: %s %s\n", json, v, want ? "refused" : "accepted");
            }
        }
        CHECK_MSG(!bad && in > 0, "%s: %d numbers misjudged", json, bad);
        CHECK(!match(g, "1e0") && !match(g, "01") && !match(g, "1."));
        candle_grammar_free(g);
    }
    schema_bad("{\"type\": \"number\", \"exclusiveMinimum\": 3, \"maximum\": 3}", "no number between");
    schema_bad("{\"type\": \"number\", \"maximum\": 1.5}", "must be a whole number");
}

/* multipleOf on integers: every integer from -1300 to 1300 judged by its
 * remainder; what cannot be enforced is refused by name. */
static void test_json_schema_multiple_of(void) {
    static const int ks[] = {2, 3, 7, 10, 25, 1000};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        char json[128], v[32];
        snprintf(json, sizeof json, "{\"type\": \"integer\", \"multipleOf\": %d}", ks[i]);
        candle_grammar *g = schema(json);
        CHECK_MSG(g != NULL, "%s refused", json);
        if (!g) continue;
        int bad = 0;
        for (long long x = -1300; x <= 1300; x++) {
            snprintf(v, sizeof v, "%lld", x);
            if (match(g, v) != (x % ks[i] == 0) && bad++ < 3) printf("  %s: %s misjudged\n", json, v);
        }
        CHECK_MSG(!bad, "%s: %d integers misjudged", json, bad);
        CHECK(!match(g, "-0") && !match(g, "00") && !match(g, "1.0") && match(g, "1050000000000000000000"));
        candle_grammar_free(g);
    }
    /* 1/n: every integer is a multiple */
    candle_grammar *g = schema("{\"type\": \"integer\", \"multipleOf\": 0.25, \"minimum\": 1, \"maximum\": 3}");
    CHECK(g && match(g, "2") && !match(g, "4"));
    candle_grammar_free(g);
    schema_bad("{\"type\": \"number\", \"multipleOf\": 2}", "'multipleOf' on type 'number'");
    schema_bad("{\"type\": \"integer\", \"multipleOf\": 2.5}", "must be a whole number");
    schema_bad("{\"type\": \"integer\", \"multipleOf\": 1001}", "above 1000");
    schema_bad("{\"type\": \"integer\", \"multipleOf\": 0}", "above 0");
    schema_bad("{\"type\": \"integer\", \"multipleOf\": 5, \"minimum\": 0}", "beside minimum/maximum");
    schema_bad("{\"multipleOf\": 5}", "needs \"type\": \"integer\"");
}

/* A real SentencePiece vocabulary with byte fallback: the <0xC3> piece is
 * the raw byte, so "é" can be spelled as <0xC3><0xA9> or as a whole piece,
 * and the mask agrees with token_ok on every token. */
static void test_spm_vocab(void) {
    char path[1024];
    test_path("../shared/data/tokenizers/ggml-vocab-llama-spm.gguf", path, sizeof path);
    if (!test_need_file("test_grammar spm vocabulary", path)) return;
    candle_gguf *gg = NULL;
    candle_tokenizer *tok = NULL;
    CHECK(!candle_gguf_open(&gg, path, NULL) && !candle_tokenizer_from_gguf(&tok, gg));
    candle_grammar_vocab *v = NULL;
    CHECK(tok && !candle_grammar_vocab_from_tokenizer(&v, tok));
    candle_grammar *g = parse("root ::= \"\xC3\xA9t\xC3\xA9\" \" \"?");
    candle_grammar_state *s = NULL;
    CHECK(g && v && !candle_grammar_state_init(&s, g));
    if (s && v) {
        int32_t n = candle_grammar_vocab_n(v), c3 = -1, a9 = -1;
        int32_t lo = 3, hi = 3 + 256; /* llama's byte pieces <0x00>..<0xFF> */
        for (int32_t id = lo; id < hi && id < n; id++) {
            char b[8];
            size_t len = 0;
            if (!candle_tokenizer_token_bytes(tok, id, false, b, sizeof b, &len) && len == 1) {
                if ((unsigned char)b[0] == 0xC3) c3 = id;
                if ((unsigned char)b[0] == 0xA9) a9 = id;
            }
        }
        CHECK(c3 >= 0 && a9 >= 0);
        float *logits = calloc((size_t)n, sizeof *logits);
        int32_t n_ok = 0;
        CHECK(!candle_grammar_mask(s, v, logits, &n_ok) && n_ok >= 1);
        CHECK(c3 >= 0 && logits[c3] == 0);                   /* the lead byte alone */
        CHECK(a9 >= 0 && logits[a9] == -INFINITY);
        CHECK(logits[candle_tokenizer_eos(tok)] == -INFINITY); /* not yet */
        int agree = 0;
        for (int32_t t = 0; t < n; t++) agree += (logits[t] == 0) == candle_grammar_token_ok(s, v, t);
        CHECK(agree == n);
        CHECK(!candle_grammar_accept_token(s, v, c3) && !candle_grammar_accept_token(s, v, a9));
        CHECK(candle_grammar_state_accept_bytes(s, "t\xC3\xA9", 3));
        for (int32_t t = 0; t < n; t++) logits[t] = 0;
        CHECK(!candle_grammar_mask(s, v, logits, &n_ok));
        CHECK(logits[candle_tokenizer_eos(tok)] == 0); /* the grammar can end: EOS allowed */
        free(logits);
    }
    candle_grammar_state_free(s);
    candle_grammar_free(g);
    candle_grammar_vocab_free(v);
    candle_tokenizer_free(tok);
    candle_gguf_close(gg);
}

/* A partial UTF-8 sequence that only surrogates continue (ED A0..BF) is
 * refused at its second byte: a random model under a tool-call grammar
 * sampled ED B5 inside a string, and then no token could follow. */
static void test_surrogate_prefix(void) {
    const char *src = "root ::= [^\"]*";
    candle_grammar *g = NULL;
    candle_grammar_state *s = NULL;
    CHECK(!candle_grammar_parse(&g, src, strlen(src)) && !candle_grammar_state_init(&s, g));
    CHECK(candle_grammar_state_accept_bytes(s, "\xed", 1));
    CHECK(!candle_grammar_state_accept_bytes(s, "\xb5", 1));
    CHECK(!candle_grammar_state_accept_bytes(s, "\xa0", 1));
    CHECK(candle_grammar_state_accept_bytes(s, "\x9f\xbf", 2)); /* U+D7FF */
    CHECK(candle_grammar_state_accept_bytes(s, "\xee\x80\x80", 3)); /* U+E000 */
    candle_grammar_state_free(s);
    candle_grammar_free(g);
}

int main(void) {
    test_surrogate_prefix();
    test_features();
    test_errors();
    test_files();
    test_incremental();
    test_mask();
    test_mask_none();
    test_mask_vs_token_ok();
    test_json_schema();
    test_json_schema_pattern();
    test_json_schema_bounds();
    test_json_schema_number_bounds();
    test_json_schema_multiple_of();
    test_spm_vocab();
    return test_done("test_grammar");
}
