/* An integer range [lo, hi] (either side open) as GBNF over JSON's decimal
 * integers: the digit strings of each length from lo's to hi's, each length
 * split on its first differing digit (the classic range-to-regex
 * construction), "-" and the magnitudes for the negative side. Bounds past
 * 16 digits are open sides, as the schema's integers have at most 16. */
#include <stdio.h>
#include <string.h>

#include "../core/strbuf-impl.h"
#include "nn-impl.h"

#define MAX_DIGITS 16

static void put(cdl_strbuf *b, const char *s) { cdl_strbuf_str(b, s); }

static int digits(int64_t v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

static int64_t pow10i(int n) {
    int64_t p = 1;
    while (n-- > 0) p *= 10;
    return p;
}

static bool all_of(const char *s, int n, char c) {
    for (int i = 0; i < n; i++)
        if (s[i] != c) return false;
    return true;
}

static void any_digits(cdl_strbuf *b, int n) {
    char t[32];
    if (n > 0) snprintf(t, sizeof t, "[0-9]{%d} ", n), put(b, t);
}

/* The n-digit strings from a to b (a <= b, leading zeros allowed). */
static void same_len(cdl_strbuf *b, const char *a, const char *z, int n) {
    char t[32];
    if (n == 0) return;
    if (a[0] == z[0]) {
        snprintf(t, sizeof t, "\"%c\" ", a[0]);
        put(b, t);
        same_len(b, a + 1, z + 1, n - 1);
        return;
    }
    char nines[MAX_DIGITS + 4], zeros[MAX_DIGITS + 4];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    bool a_low = all_of(a + 1, n - 1, '0'), z_high = all_of(z + 1, n - 1, '9');
    char mid_lo = a_low ? a[0] : (char)(a[0] + 1), mid_hi = z_high ? z[0] : (char)(z[0] - 1);
    bool first = true;
    put(b, "(");
    if (!a_low) {
        snprintf(t, sizeof t, "\"%c\" ", a[0]);
        put(b, t);
        same_len(b, a + 1, nines, n - 1);
        first = false;
    }
    if (mid_lo <= mid_hi) {
        if (!first) put(b, "| ");
        snprintf(t, sizeof t, "[%c-%c] ", mid_lo, mid_hi);
        put(b, t);
        any_digits(b, n - 1);
        first = false;
    }
    if (!z_high) {
        if (!first) put(b, "| ");
        snprintf(t, sizeof t, "\"%c\" ", z[0]);
        put(b, t);
        same_len(b, zeros, z + 1, n - 1);
    }
    put(b, ") ");
}

/* Non-negative integers from lo to hi (hi < 0: no upper bound), no leading
 * zeros, as alternatives (each followed by "| " but the last). */
static void nonneg(cdl_strbuf *b, int64_t lo, int64_t hi) {
    int dl = digits(lo), dh = hi < 0 ? MAX_DIGITS : digits(hi);
    bool first = true;
    for (int d = dl; d <= dh; d++) {
        int64_t a = d == 1 ? 0 : pow10i(d - 1), z = pow10i(d) - 1;
        if (a < lo) a = lo;
        if (hi >= 0 && z > hi) z = hi;
        if (a > z) continue;
        if (!first) put(b, "| ");
        first = false;
        if (a == (d == 1 ? 0 : pow10i(d - 1)) && z == pow10i(d) - 1 && d > 1) { /* every d-digit number */
            put(b, "[1-9] ");
            any_digits(b, d - 1);
            continue;
        }
        char sa[32], sz[32]; /* d <= MAX_DIGITS: room to spare */
        snprintf(sa, sizeof sa, "%0*lld", d & 31, (long long)a);
        snprintf(sz, sizeof sz, "%0*lld", d & 31, (long long)z);
        same_len(b, sa, sz, d);
    }
}

void cdl_json_int_range_gbnf(bool has_lo, int64_t lo, bool has_hi, int64_t hi, cdl_strbuf *out) {
    const int64_t cap = pow10i(MAX_DIGITS) - 1;
    if (has_lo && lo < -cap) has_lo = false;
    if (has_hi && hi > cap) has_hi = false;
    if (has_lo && lo > cap) lo = cap; /* past what the grammar writes: only the largest */
    if (has_hi && hi < -cap) hi = -cap;
    put(out, "(");
    bool any = false;
    if (!has_hi || hi >= 0) { /* [max(lo, 0), hi] */
        put(out, "(");
        nonneg(out, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
        put(out, ") ");
        any = true;
    }
    if (!has_lo || lo < 0) { /* -m for m in [max(1, -hi), -lo] */
        if (any) put(out, "| ");
        put(out, "\"-\" (");
        nonneg(out, has_hi && hi < 0 ? -hi : 1, has_lo ? -lo : -1);
        put(out, ") ");
    }
    put(out, ") ws");
}
