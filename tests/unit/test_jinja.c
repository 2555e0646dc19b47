/* The Jinja2 interpreter: the real chat templates of tests/data/jinja
 * rendered on the conversations of scripts/gen_jinja_goldens.py, byte for
 * byte against jinja2's renderings (or failing where jinja2 fails); then the
 * language's pieces one by one, the errors with their line and column, and
 * the limits a hostile template meets. */
#include <dirent.h>

#include "candle/jinja.h"
#include "core/json-impl.h"
#include "test.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0;
    if (len) *len = (size_t)n;
    return b;
}

/* Renders src with the JSON context ctx; the output or NULL (message printed
 * when quiet is false). */
static char *render(const char *src, const char *ctx, const candle_jinja_limits *lim, bool quiet) {
    candle_jinja *t = NULL;
    if (candle_jinja_parse(src, strlen(src), &t)) {
        if (!quiet) printf("  parse: %s\n", candle_last_errmsg());
        return NULL;
    }
    char *out = NULL;
    size_t n = 0;
    candle_status st = candle_jinja_render(t, ctx, ctx ? strlen(ctx) : 0, lim, &out, &n);
    candle_jinja_free(t);
    if (st) {
        if (!quiet) printf("  render: %s\n", candle_last_errmsg());
        return NULL;
    }
    if (strlen(out) != n) printf("  length %zu but strlen %zu\n", n, strlen(out));
    return out;
}

static void same(const char *src, const char *ctx, const char *want) {
    char *got = render(src, ctx, NULL, false);
    bool ok = got && !strcmp(got, want);
    if (!ok) printf("  template %s\n  want [%s]\n  got  [%s]\n", src, want, got ? got : "(error)");
    CHECK(ok);
    candle_free(got);
}

/* Fails to parse (parse=true) or to render, with want in the message. */
static void bad(const char *src, const char *ctx, bool parse, const char *want) {
    candle_jinja *t = NULL;
    candle_status st = candle_jinja_parse(src, strlen(src), &t);
    if (!parse && !st) {
        char *out = NULL;
        st = candle_jinja_render(t, ctx, ctx ? strlen(ctx) : 0, NULL, &out, NULL);
        candle_free(out);
    }
    candle_jinja_free(t);
    const char *m = candle_last_errmsg();
    bool ok = st != CANDLE_OK && strstr(m, want);
    if (!ok) printf("  template %s\n  wanted an error with '%s', got %s '%s'\n", src, want, st ? "error" : "success", st ? m : "");
    CHECK(ok);
}

static void goldens(const char *dir) {
    char path[2048];
    snprintf(path, sizeof path, "%s/tokens.json", dir);
    size_t tlen;
    char *ttext = slurp(path, &tlen);
    json_doc *doc = NULL;
    if (!ttext || json_parse(&doc, ttext, tlen, "tokens.json", NULL)) {
        printf("  cannot read %s\n", path);
        CHECK(0);
        free(ttext);
        return;
    }
    const json_value *root = json_root(doc);
    snprintf(path, sizeof path, "%s/contexts", dir);
    int compared = 0, failed_as_wanted = 0;
    for (size_t ti = 0; ti < root->n; ti++) {
        const char *tname = json_obj_key(root, ti)->u.str;
        const json_value *tok = json_obj_val(root, ti);
        snprintf(path, sizeof path, "%s/%s.jinja", dir, tname);
        size_t slen;
        char *src = slurp(path, &slen);
        CHECK(src != NULL);
        if (!src) continue;
        candle_jinja *t = NULL;
        if (candle_jinja_parse(src, slen, &t)) {
            printf("  %s: %s\n", tname, candle_last_errmsg());
            CHECK(0);
            free(src);
            continue;
        }
        snprintf(path, sizeof path, "%s/contexts", dir);
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            size_t l = strlen(de->d_name);
            if (l < 6 || strcmp(de->d_name + l - 5, ".json")) continue;
            char conv[256];
            snprintf(conv, sizeof conv, "%.*s", (int)(l - 5), de->d_name);
            snprintf(path, sizeof path, "%s/contexts/%s", dir, de->d_name);
            size_t clen;
            char *c = slurp(path, &clen);
            /* the context as the generator builds it: defaults, then the
             * conversation, then the template's special tokens */
            char prefix[512];
            const char *bos = NULL, *eos = NULL;
            size_t bl = 0, el = 0;
            json_as_str(json_get(tok, "bos_token"), &bos, &bl);
            json_as_str(json_get(tok, "eos_token"), &eos, &el);
            snprintf(prefix, sizeof prefix, "{\"tools\": null, \"date_string\": \"02 Dec 2026\", ");
            char *ctx = malloc(clen + 1024);
            const char *body = strchr(c, '{') + 1;
            const char *end = strrchr(c, '}');
            int n = snprintf(ctx, clen + 1024, "%s%.*s, \"bos_token\": %s%s%s, \"eos_token\": %s%s%s}", prefix,
                             (int)(end - body), body, bos ? "\"" : "", bos ? bos : "null", bos ? "\"" : "",
                             eos ? "\"" : "", eos ? eos : "null", eos ? "\"" : "");
            (void)n;
            char *out = NULL;
            size_t olen = 0;
            candle_status st = candle_jinja_render(t, ctx, strlen(ctx), NULL, &out, &olen);
            char gpath[2048];
            snprintf(gpath, sizeof gpath, "%s/golden/%s.%s.txt", dir, tname, conv);
            size_t glen;
            char *want = slurp(gpath, &glen);
            if (want) {
                bool ok = st == CANDLE_OK && olen == glen && !memcmp(out, want, glen);
                if (!ok) {
                    printf("  %s on %s differs from jinja2\n", tname, conv);
                    if (st) printf("  error: %s\n", candle_last_errmsg());
                    else {
                        size_t k = 0;
                        while (k < olen && k < glen && out[k] == want[k]) k++;
                        printf("  at byte %zu:\n  want [%.80s]\n  got  [%.80s]\n", k, want + k, out + k);
                    }
                }
                CHECK(ok);
                compared += ok;
            } else {
                snprintf(gpath, sizeof gpath, "%s/golden/%s.%s.err", dir, tname, conv);
                want = slurp(gpath, &glen);
                CHECK(want != NULL);
                if (want) {
                    bool ok = st != CANDLE_OK;
                    if (ok && !strncmp(want, "raise: ", 7)) ok = strstr(candle_last_errmsg(), want + 7) != NULL;
                    if (!ok) printf("  %s on %s: jinja2 fails (%s), Candle gives %s\n", tname, conv, want,
                                    st ? candle_last_errmsg() : "a rendering");
                    CHECK(ok);
                    failed_as_wanted += ok;
                }
            }
            free(want);
            candle_free(out);
            free(ctx);
            free(c);
        }
        if (d) closedir(d);
        candle_jinja_free(t);
        free(src);
    }
    printf("  goldens: %d renderings identical to jinja2, %d refused as jinja2 refuses them\n", compared, failed_as_wanted);
    CHECK(compared >= 50);
    json_free(doc);
    free(ttext);
}

static void language(void) {
    const char *c = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\"}],"
                    " \"n\": 3, \"s\": \" Ab c \", \"d\": {\"b\": 1, \"a\": [1, 2.5, null, true]}}";
    same("a{{ 1 + 2 * 3 }}b", c, "a7b");
    same("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}", c, "3 -4 1 2 3.5 1024");
    same("{{ 'a' ~ 1 ~ none ~ true }}", c, "a1NoneTrue");
    same("{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 3.0 }}", c, "0.30000000000000004 1e+20 1.5e-07 3.0");
    same("{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ s|trim }}|{{ s.upper() }}|{{ s|lower }}", c,
         "Ab c|Ab c | Ab c|Ab c| AB C | ab c ");
    same("{{ 'abc'[::-1] }} {{ 'abcdef'[1:3] }} {{ [1,2,3][-1] }} {{ [1,2,3][1:] }} {{ 'hello'[-2:] }}", c, "cba bc 3 [2, 3] lo");
    same("{{ 'a,b,,c'.split(',') }} {{ ' x  y '.split() }} {{ 'a-b-c'.split('-', 1) }}", c,
         "['a', 'b', '', 'c'] ['x', 'y'] ['a', 'b-c']");
    same("{{ d|tojson }}", c, "{\"b\": 1, \"a\": [1, 2.5, null, true]}");
    same("{{ d|tojson(indent=2) }}", c, "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}");
    same("{{ 'é\"\\n'|tojson }}", c, "\"é\\\"\\n\"");
    same("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ m.role }};{% endfor %}", c,
         "10TrueFalse2user;21FalseTrue2assistant;");
    same("{% for x in [] %}x{% else %}empty{% endfor %}", c, "empty");
    same("{% for x in range(5) if x is odd %}{{ x }}{% endfor %}", c, "13");
    same("{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}", c, "b=1 a=[1, 2.5, None, True] ");
    same("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", c, "013");
    same("{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% if m.role == 'assistant' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.n }}", c, "True2");
    same("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", c, "1");
    same("{% if n > 5 %}a{% elif n > 2 %}b{% else %}c{% endif %}", c, "b");
    same("{{ 'yes' if n is number and n is not none else 'no' }} {{ undefined_thing is defined }} {{ d is mapping }} {{ s is string }}", c, "yes False True True");
    same("{{ x is undefined }}{{ 1 in [1, 2] }}{{ 'b' in 'abc' }}{{ 'z' not in d }}{{ 'a' in d }}", c, "TrueTrueTrueTrueTrue");
    same("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}", c, "hi");
    same("{{ messages|rejectattr('role', 'equalto', 'user')|list|length }} {{ messages|first|tojson }} {{ (messages|last).content }}", c,
         "1 {\"role\": \"user\", \"content\": \"hi\"} yo");
    same("{{ missing|default('dflt') }} {{ ''|default('e', true) }} {{ 'ab'|replace('b', 'c') }} {{ '42'|int + 1 }} {{ 3|string ~ 'x' }} {{ 'hello world'|capitalize }}", c,
         "dflt e ac 43 3x Hello world");
    same("{{ d.get('b') }} {{ d.get('zz', 5) }} {{ d.keys()|list }} {{ d['a'][1] }} {{ d.a.1 }}", c, "1 5 ['b', 'a'] 2.5 2.5");
    same("{% macro greet(name, p='Hi') %}{{ p }} {{ name }}{% endmacro %}{{ greet('Bob') }}/{{ greet('Al', p='Yo') }}", c, "Hi Bob/Yo Al");
    same("{% set block %}in {{ n }}{% endset %}[{{ block }}]", c, "[in 3]");
    same("{{ {'a': 1, 'b': [1, 2]} }} {{ ('x', 'y')|join('-') }} {{ \"it's\" }}", c, "{'a': 1, 'b': [1, 2]} x-y it's");
    same("{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'a b'.title() }}", c, "TrueTrueA B");
    same("{{ '<a \"q\">'|e }} {{ 'x'|safe + '<' }} {{ '<'|safe + '<' }} {{ '{} and {0} {n} {{}}'.format(1, n='z') }}", c,
         "&lt;a &#34;q&#34;&gt; x&lt; <&lt; 1 and 1 z {}");
    /* whitespace: trim_blocks and lstrip_blocks as Hugging Face sets them */
    same("a\n  {% if true %}\n  b\n  {% endif %}\nc\n", c, "a\n  b\nc");
    same("a  {{- ' b ' -}}  c", c, "a b c");
    same("a\n{# comment #}\nb", c, "a\nb");
    same("x {%+ if true %}y{% endif %}", c, "x y");
    same("{{ raise_exception is defined }}{{ messages[5] is defined }}{{ nope is defined }}", c, "TrueFalseFalse");
}

static void errors(void) {
    const char *c = "{\"n\": 1}";
    bad("{{ 1 + }}", c, true, "line 1, column 8");
    bad("hi\n{% if x %}", c, true, "line 2, column 4: 'if' opened here is never closed");
    bad("{% endfor %}", c, true, "unexpected 'endfor'");
    bad("{{ 'abc }}", c, true, "unterminated string");
    bad("{% while x %}{% endwhile %}", c, true, "unsupported statement 'while'");
    bad("{{ x", c, true, "unclosed tag");
    bad("a\n  {{ raise_exception('bad role ' ~ n) }}", c, false, "line 2, column 6: the template raised an exception: bad role 1");
    bad("{{ x.y }}", c, false, "'x' is undefined");
    bad("{{ 1 / 0 }}", c, false, "division by zero");
    bad("{{ n|nosuchfilter }}", c, false, "unknown filter 'nosuchfilter'");
    bad("{% for x in none %}{% endfor %}", c, false, "not iterable");
    bad("{% set n.a = 1 %}", c, false, "not a namespace");
    bad("{{ [1] < 2 }}", c, false, "cannot compare");
    bad("{{ 1 }}", "[1]", false, "must be a JSON object");
    bad("{{ 1 }}", "{bad", false, "jinja context");
}

static void limits(void) {
    candle_jinja_limits lim = {.max_output = 1000, .max_iterations = 5000, .max_depth = 8, .max_memory = 1 << 20};
    char *o;
    candle_status st;
    candle_jinja *t;
    const char *spin = "{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}";
    CHECK(candle_jinja_parse(spin, strlen(spin), &t) == CANDLE_OK);
    st = candle_jinja_render(t, NULL, 0, &lim, &o, NULL);
    CHECK(st == CANDLE_ERR_INVALID_ARG && strstr(candle_last_errmsg(), "iteration limit of 5000"));
    candle_jinja_free(t);
    const char *big = "{% for i in range(500) %}xyz{% endfor %}";
    CHECK(candle_jinja_parse(big, strlen(big), &t) == CANDLE_OK);
    st = candle_jinja_render(t, NULL, 0, &lim, &o, NULL);
    CHECK(st == CANDLE_ERR_INVALID_ARG && strstr(candle_last_errmsg(), "output limit of 1000"));
    candle_jinja_free(t);
    const char *rec = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
    CHECK(candle_jinja_parse(rec, strlen(rec), &t) == CANDLE_OK);
    st = candle_jinja_render(t, NULL, 0, &lim, &o, NULL);
    CHECK(st == CANDLE_ERR_INVALID_ARG && strstr(candle_last_errmsg(), "nested deeper than 8"));
    candle_jinja_free(t);
    const char *mem = "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}";
    CHECK(candle_jinja_parse(mem, strlen(mem), &t) == CANDLE_OK);
    st = candle_jinja_render(t, NULL, 0, &lim, &o, NULL);
    CHECK(st == CANDLE_ERR_INVALID_ARG && strstr(candle_last_errmsg(), "limit"));
    candle_jinja_free(t);
    const char *rep = "{{ 'x' * 1000000000000 }}";
    CHECK(candle_jinja_parse(rep, strlen(rep), &t) == CANDLE_OK);
    st = candle_jinja_render(t, NULL, 0, &lim, &o, NULL);
    CHECK(st == CANDLE_ERR_INVALID_ARG);
    candle_jinja_free(t);
    /* the deepest C stack a template can ask for: macro recursion to the
     * depth cap, each level under 95 nested ifs and 120 filters (2 MB of
     * stack in Release, measured; within a default 8 MB thread under ASan) */
    {
        size_t cap = 20000, m = 0;
        char *w = malloc(cap);
        m += (size_t)snprintf(w + m, cap - m, "{%% macro f(n) %%}");
        for (int i = 0; i < 95; i++) m += (size_t)snprintf(w + m, cap - m, "{%% if true %%}");
        m += (size_t)snprintf(w + m, cap - m, "{{ f(n + 1)");
        for (int i = 0; i < 120; i++) m += (size_t)snprintf(w + m, cap - m, "|trim");
        m += (size_t)snprintf(w + m, cap - m, " }}");
        for (int i = 0; i < 95; i++) m += (size_t)snprintf(w + m, cap - m, "{%% endif %%}");
        snprintf(w + m, cap - m, "{%% endmacro %%}{{ f(0) }}");
        CHECK(candle_jinja_parse(w, strlen(w), &t) == CANDLE_OK);
        st = candle_jinja_render(t, NULL, 0, NULL, &o, NULL);
        CHECK(st == CANDLE_ERR_INVALID_ARG && strstr(candle_last_errmsg(), "nested deeper than 16"));
        candle_jinja_free(t);
        free(w);
    }
    /* nesting the parser refuses instead of recursing without end */
    char deep[4000];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
    for (int i = 0; i < 1000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    CHECK(candle_jinja_parse(deep, strlen(deep), &t) == CANDLE_ERR_FORMAT && strstr(candle_last_errmsg(), "nested deeper"));
    k = (size_t)snprintf(deep, sizeof deep, "{{ 1");
    for (int i = 0; i < 600; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "+1");
    snprintf(deep + k, sizeof deep - k, " }}");
    CHECK(candle_jinja_parse(deep, strlen(deep), &t) == CANDLE_ERR_FORMAT && strstr(candle_last_errmsg(), "expression nested deeper"));
}

int main(void) {
    const char *src = getenv("CANDLE_SOURCE_DIR");
    char dir[900];
    snprintf(dir, sizeof dir, "%s/tests/data/jinja", src ? src : ".");
    goldens(dir);
    language();
    errors();
    limits();
    return test_done("jinja");
}
