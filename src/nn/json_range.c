/* An integer range [lo, hi] (either side open) as GBNF over JSON's decimal
 * integers: the digit strings of each length from lo's to hi's, each length
 * split on its first differing digit (the classic range-to-regex
 * construction), "-" and the magnitudes for the negative side. Bounds past
 * 16 digits are open sides, as the schema's integers have at most 16.
 * Numbers between whole bounds are an integer part in such a range and a
 * fraction of a kind (any, zeros only, not all zeros) that keeps them
 * inside; the multiples of k are a k-state automaton over the digits. */
#include <stdio.h>
#include <stdlib.h>
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

/* --- numbers between whole bounds ------------------------------------------------- */

enum { F_ANY, F_ZERO, F_NONZERO };
static const char *const frac_kind[] = {
    [F_ANY] = "(\".\" [0-9]{1,16})? ",
    [F_ZERO] = "(\".\" \"0\"{1,16})? ",
    [F_NONZERO] = "\".\" [0-9]{0,15} [1-9] [0-9]{0,15} ",
};

/* An integer part in [lo, hi] (hi < 0: open) and a fraction of kind k. */
static void piece(cdl_strbuf *b, bool *first, int64_t lo, int64_t hi, int k) {
    if (hi >= 0 && lo > hi) return;
    if (!*first) put(b, "| ");
    *first = false;
    put(b, "((");
    nonneg(b, lo, hi);
    put(b, ") ");
    put(b, frac_kind[k]);
    put(b, ") ");
}

/* Magnitudes m (written without sign or exponent) with L < m or L <= m, and
 * m < H or m <= H (has_H false: no upper bound); L, H >= 0. */
static void magnitudes(cdl_strbuf *b, bool *first, int64_t L, bool L_excl, bool has_H, int64_t H, bool H_excl) {
    if (has_H && (H < L || (H == L && (L_excl || H_excl)))) return;
    int64_t start = L;
    if (L_excl) { /* (L, L + 1): L and a fraction not all zeros; H >= L + 1 here */
        piece(b, first, L, L, F_NONZERO);
        start = L + 1;
    }
    if (!has_H) {
        piece(b, first, start, -1, F_ANY);
        return;
    }
    if (start <= H - 1) piece(b, first, start, H - 1, F_ANY);
    if (!H_excl) piece(b, first, H, H, F_ZERO);
}

bool cdl_json_num_range_gbnf(bool has_lo, int64_t lo, bool lo_excl, bool has_hi, int64_t hi, bool hi_excl,
                             cdl_strbuf *out) {
    const int64_t cap = pow10i(MAX_DIGITS) - 1;
    if (has_lo && lo < -cap) has_lo = false;
    if (has_hi && hi > cap) has_hi = false;
    if ((has_lo && lo > cap) || (has_hi && hi < -cap)) return false;
    bool first = true;
    put(out, "(");
    if (!has_hi || hi >= 0) /* x >= 0 */
        magnitudes(out, &first, has_lo && lo >= 0 ? lo : 0, has_lo && lo >= 0 && lo_excl, has_hi, hi, hi_excl);
    if (!has_lo || lo < 0) { /* x = -m < 0: m <= -lo, and m >= -hi or m > 0 */
        cdl_strbuf neg = {0};
        bool none = true;
        bool below = has_hi && hi < 0;
        magnitudes(&neg, &none, below ? -hi : 0, below ? hi_excl : true, has_lo, has_lo ? -lo : 0, lo_excl);
        if (!none) {
            if (!first) put(out, "| ");
            first = false;
            put(out, "\"-\" (");
            cdl_strbuf_put(out, neg.s, neg.n);
            put(out, ") ");
        }
        if (neg.failed) out->failed = true;
        free(neg.s);
    }
    put(out, ") ws");
    return !first;
}

/* --- multiples ------------------------------------------------------------------------ */

void cdl_json_int_multiple_gbnf(int64_t k, int base, cdl_strbuf *rules, cdl_strbuf *out) {
    char t[64];
    /* rule base + r: the rest of the digits after a prefix of remainder r */
    for (int64_t r = 0; r < k; r++) {
        snprintf(t, sizeof t, "s%lld ::= ", (long long)(base + r));
        put(rules, t);
        if (r == 0) put(rules, "(");
        bool first = true;
        for (int d = 0; d < 10; d++) {
            int64_t to = (10 * r + d) % k;
            bool seen = false; /* digits with this target were written with the first of them */
            for (int e = 0; e < d; e++) seen |= (10 * r + e) % k == to;
            if (seen) continue;
            if (!first) put(rules, " | ");
            first = false;
            put(rules, "[");
            for (int e = d; e < 10; e++)
                if ((10 * r + e) % k == to) cdl_strbuf_put(rules, &"0123456789"[e], 1);
            snprintf(t, sizeof t, "] s%lld", (long long)(base + to));
            put(rules, t);
        }
        put(rules, r == 0 ? ")?\n" : "\n");
    }
    /* "0", or a sign and a first digit 1-9 into its remainder */
    put(out, "(\"0\" | \"-\"? (");
    bool first = true;
    for (int d = 1; d < 10; d++) {
        int64_t to = d % k;
        bool seen = false;
        for (int e = 1; e < d; e++) seen |= e % k == to;
        if (seen) continue;
        if (!first) put(out, " | ");
        first = false;
        put(out, "[");
        for (int e = d; e < 10; e++)
            if (e % k == to) cdl_strbuf_put(out, &"0123456789"[e], 1);
        snprintf(t, sizeof t, "] s%lld", (long long)(base + to));
        put(out, t);
    }
    put(out, ")) ws");
}
