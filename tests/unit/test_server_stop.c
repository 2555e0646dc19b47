/* The server scheduler's stop-sequence buffer (tools/server/scheduler.c,
 * pend_flush), white-box: the source is included here, as the server is not
 * part of the library (and needs no jansson for this part).
 *
 * fuzz_server found: a request whose first generated token completes no
 * character (a byte-fallback piece of a longer UTF-8 sequence) on a slot that
 * never held text flushed a NULL buffer: memmem(NULL, ...) with stop
 * sequences, pointer arithmetic on NULL without (undefined behaviour;
 * UBSan stops it: make test-asan, the fuzz build). */
#include "test.h"

#include "../../tools/server/metrics.c"
#include "../../tools/server/scheduler.c"

static srv_req *req_with_stops(const char *const *stops, int n) {
    srv_req *r = srv_req_new();
    CHECK(r != NULL);
    for (int i = 0; i < n; i++) r->stop[r->n_stop++] = strdup(stops[i]);
    return r;
}

static bool push(srv_slot *sl, const char *s) {
    CHECK(pend_append(sl, s, strlen(s)));
    return pend_flush(sl, false);
}

static void emitted(const srv_req *r, const char *want) {
    CHECK_MSG(r->len == strlen(want) && (!r->len || !memcmp(r->text, want, r->len)),
              "emitted '%.*s', want '%s'", (int)r->len, r->text ? r->text : "", want);
}

/* The fuzz finding: nothing held yet, buffer never allocated. */
static void empty_unallocated(void) {
    const char *stops[] = {"ab", "x"};
    srv_slot sl = {0};
    sl.req = req_with_stops(stops, 2);
    CHECK(!pend_flush(&sl, false));
    CHECK(!pend_flush(&sl, true));
    CHECK(sl.pend == NULL && sl.pend_len == 0);
    emitted(sl.req, "");
    srv_req_unref(sl.req);
    sl.req = req_with_stops(NULL, 0); /* no stop sequences */
    CHECK(!pend_flush(&sl, false));
    emitted(sl.req, "");
    srv_req_unref(sl.req);
}

/* What may start a stop is held back; a stop cuts the text before it. */
static void holds_and_stops(void) {
    const char *stops[] = {"abc", "b!"};
    srv_slot sl = {0};
    sl.req = req_with_stops(stops, 2);
    CHECK(!push(&sl, "xya"));
    emitted(sl.req, "xy"); /* "a" may begin "abc" */
    CHECK(sl.pend_len == 1);
    CHECK(!push(&sl, "b"));
    emitted(sl.req, "xy"); /* "ab" may begin "abc", "b" may begin "b!" */
    CHECK(!pend_flush(&sl, false)); /* an empty token changes nothing */
    emitted(sl.req, "xy");
    CHECK(push(&sl, "!tail")); /* "b!" at offset 1 */
    emitted(sl.req, "xya");
    CHECK(sl.pend_len == 0);
    free(sl.pend);
    srv_req_unref(sl.req);

    /* the earliest of several stops wins; final flushes what is held */
    const char *stops2[] = {"cd", "d"};
    srv_slot s2 = {0};
    s2.req = req_with_stops(stops2, 2);
    CHECK(!push(&s2, "abc"));
    emitted(s2.req, "ab");
    CHECK(!pend_flush(&s2, true));
    emitted(s2.req, "abc");
    CHECK(push(&s2, "xcd"));
    emitted(s2.req, "abcx");
    free(s2.pend);
    srv_req_unref(s2.req);
}

int main(void) {
    empty_unallocated();
    holds_and_stops();
    return test_done("test_server_stop");
}
