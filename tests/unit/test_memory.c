/* Arena and pool: alignment, reuse without system allocations, exact
 * counters, limits with their OOM message, trim, foreign releases, threads. */
#include <pthread.h>
#include <stdint.h>

#include "test.h"
#include "core/memory-impl.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1 << 20)

static void test_arena_alignment(void) {
    candle_arena *a;
    CHECK(candle_arena_init(&a, 4 * KiB, 0) == CANDLE_OK);
    const size_t aligns[] = {0, 1, 2, 8, 16, 64, 128, 256, 4096};
    for (size_t i = 0; i < sizeof aligns / sizeof *aligns; i++) {
        for (size_t size = 1; size < 300; size += 37) {
            char *p = candle_arena_alloc(a, size, aligns[i]);
            size_t al = aligns[i] ? aligns[i] : 64;
            CHECK(p != NULL);
            CHECK_MSG((uintptr_t)p % al == 0, "%p not aligned to %zu", (void *)p, al);
            if (p) memset(p, 0xab, size); /* ASan catches an overrun */
        }
    }
    /* Not a power of two: invalid argument, not a crash. */
    candle_clear_last_error();
    CHECK(candle_arena_alloc(a, 16, 48) == NULL);
    CHECK(candle_last_error() == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "power of two");
    candle_arena_free(a);
}

static void test_arena_counters_and_reuse(void) {
    candle_arena *a;
    CHECK(candle_arena_init(&a, 1 * KiB, 0) == CANDLE_OK);
    candle_mem_stats st = candle_arena_stats(a);
    CHECK(st.n_allocs == 0 && st.n_sys_allocs == 0 && st.bytes_reserved == 0);
    CHECK(st.fragmentation == 0.0);

    /* Step 1: 600 + 600 + 3000 bytes, 64-aligned: three blocks (1 KiB, 1 KiB,
     * one sized to the big request). */
    char *p0 = candle_arena_alloc(a, 600, 64);
    char *p1 = candle_arena_alloc(a, 600, 64);
    char *p2 = candle_arena_alloc(a, 3000, 64);
    CHECK(p0 && p1 && p2);
    st = candle_arena_stats(a);
    CHECK(st.n_allocs == 3);
    CHECK(st.n_sys_allocs == 3);
    CHECK(st.bytes_live == 4200);
    CHECK(st.bytes_peak == 4200);
    CHECK_MSG(st.bytes_reserved == 1024 + 1024 + 3008, "reserved %zu", st.bytes_reserved);
    CHECK_NEAR(st.fragmentation, 1.0 - 4200.0 / (1024 + 1024 + 3008), 1e-12);

    /* Reset merges the chain into one block of the step's linear size:
     * 600 -> 640 (aligned) + 600 -> 1280 + 3000 = 4280. */
    candle_arena_reset(a);
    st = candle_arena_stats(a);
    CHECK(st.bytes_live == 0);
    CHECK(st.bytes_peak == 4200);
    CHECK(st.n_sys_allocs == 4);
    CHECK_MSG(st.bytes_reserved == 4288, "merged block %zu", st.bytes_reserved); /* 4280 up to 64 */

    /* The next identical steps make no system allocation. */
    for (int step = 0; step < 3; step++) {
        char *q0 = candle_arena_alloc(a, 600, 64);
        char *q1 = candle_arena_alloc(a, 600, 64);
        char *q2 = candle_arena_alloc(a, 3000, 64);
        CHECK(q0 && q1 && q2);
        if (q0 && q2) {
            memset(q0, 1, 600);
            memset(q2, 2, 3000);
        }
        /* one block: the allocations are laid out back to back */
        CHECK(q1 == q0 + 640 && q2 == q0 + 1280);
        candle_arena_reset(a);
    }
    st = candle_arena_stats(a);
    CHECK(st.n_sys_allocs == 4);
    CHECK(st.n_allocs == 12);
    CHECK(st.bytes_reserved == 4288);

    /* A reset with one block keeps it. */
    candle_arena_alloc(a, 10, 0);
    candle_arena_reset(a);
    CHECK(candle_arena_stats(a).n_sys_allocs == 4);
    candle_arena_free(a);
}

static void test_arena_mixed_alignment_merge(void) {
    /* Larger alignments inside a step: the merged block still holds the step. */
    candle_arena *a;
    CHECK(candle_arena_init(&a, 256, 0) == CANDLE_OK);
    const size_t sizes[] = {3, 200, 17, 999, 64, 5};
    const size_t aligns[] = {1, 4096, 8, 256, 64, 2};
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 6; i++) {
            char *p = candle_arena_alloc(a, sizes[i], aligns[i]);
            CHECK(p && (uintptr_t)p % aligns[i] == 0);
        }
        uint64_t sys = candle_arena_stats(a).n_sys_allocs;
        candle_arena_reset(a);
        if (step > 0) CHECK_MSG(candle_arena_stats(a).n_sys_allocs == sys, "step %d", step);
    }
    candle_arena_free(a);
}

/* Random steps: allocations never overlap (each is filled and checked), a
 * repeated step after its reset makes no system allocation. */
static void test_arena_random_steps(void) {
    candle_arena *a;
    CHECK(candle_arena_init(&a, 2 * KiB, 0) == CANDLE_OK);
    uint32_t x = 12345;
    for (int round = 0; round < 6; round++) {
        enum { N = 64 };
        size_t sizes[N], aligns[N];
        unsigned char *ptrs[N];
        for (int i = 0; i < N; i++) {
            x = x * 1664525u + 1013904223u;
            sizes[i] = (x >> 8) % (round * 700 + 300);
            aligns[i] = (size_t)1 << ((x >> 24) % 9);
        }
        for (int rep = 0; rep < 2; rep++) {
            uint64_t sys = candle_arena_stats(a).n_sys_allocs;
            for (int i = 0; i < N; i++) {
                ptrs[i] = candle_arena_alloc(a, sizes[i], aligns[i]);
                CHECK(ptrs[i] && (uintptr_t)ptrs[i] % aligns[i] == 0);
                if (ptrs[i]) memset(ptrs[i], i + 1, sizes[i]);
            }
            int bad = 0;
            for (int i = 0; i < N; i++)
                for (size_t k = 0; ptrs[i] && k < sizes[i]; k++) bad += ptrs[i][k] != i + 1;
            CHECK_MSG(bad == 0, "round %d: %d bytes overwritten", round, bad);
            size_t live = 0;
            for (int i = 0; i < N; i++) live += sizes[i];
            CHECK(candle_arena_stats(a).bytes_live == live);
            if (rep == 1) CHECK_MSG(candle_arena_stats(a).n_sys_allocs == sys, "round %d", round);
            candle_arena_reset(a);
        }
    }
    candle_arena_free(a);
}

static void test_arena_limit(void) {
    candle_arena *a;
    CHECK(candle_arena_init(&a, 1 * MiB, 2 * MiB) == CANDLE_OK);
    CHECK(candle_arena_alloc(a, 512 * KiB, 0) != NULL); /* 1 MiB block reserved */
    candle_clear_last_error();
    CHECK(candle_arena_alloc(a, 4 * MiB, 0) == NULL);
    CHECK(candle_last_error() == CANDLE_ERR_OOM);
    CHECK_CONTAINS(candle_last_errmsg(),
                   "out of memory: requested 4.00 MiB, available 1.50 MiB on cpu (arena limit 2.00 MiB)");
    /* What fits under the limit still works after the failure. */
    CHECK(candle_arena_alloc(a, 512 * KiB, 0) != NULL);
    CHECK(candle_arena_alloc(a, 1 * MiB, 0) != NULL);
    candle_mem_stats st = candle_arena_stats(a);
    CHECK(st.bytes_reserved <= 2 * MiB);
    CHECK(candle_arena_alloc(a, 1, 0) == NULL);
    CHECK(candle_last_error() == CANDLE_ERR_OOM);
    /* A limit below the block size: blocks shrink to the request. */
    candle_arena *b;
    CHECK(candle_arena_init(&b, 1 * MiB, 100 * KiB) == CANDLE_OK);
    CHECK(candle_arena_alloc(b, 50 * KiB, 0) != NULL);
    CHECK(candle_arena_alloc(b, 40 * KiB, 0) != NULL);
    CHECK(candle_arena_alloc(b, 20 * KiB, 0) == NULL);
    CHECK(candle_arena_stats(b).bytes_reserved <= 100 * KiB);
    /* The merge after reset respects the limit too. */
    candle_arena_reset(b);
    CHECK(candle_arena_stats(b).bytes_reserved <= 100 * KiB);
    CHECK(candle_arena_alloc(b, 50 * KiB, 0) != NULL);
    CHECK(candle_arena_alloc(b, 40 * KiB, 0) != NULL);
    candle_arena_free(b);
    /* Absurd sizes are an OOM, not an overflow. */
    CHECK(candle_arena_alloc(a, SIZE_MAX - 8, 64) == NULL);
    CHECK(candle_last_error() == CANDLE_ERR_OOM);
    candle_arena_free(a);
    candle_arena_free(NULL);
}

static void test_pool_classes_and_reuse(void) {
    candle_pool *p;
    CHECK(candle_pool_init(&p, 0, (candle_device){CANDLE_DEVICE_CPU, 0}) == CANDLE_OK);
    /* size -> class bytes */
    const size_t sizes[] = {0, 1, 64, 65, 128, 129, 1000, 4096, 4097};
    const size_t classes[] = {64, 64, 64, 128, 128, 256, 1024, 4096, 8192};
    void *ptrs[9];
    size_t total = 0;
    for (int i = 0; i < 9; i++) {
        ptrs[i] = candle_pool_alloc(p, sizes[i]);
        CHECK(ptrs[i] != NULL && (uintptr_t)ptrs[i] % 64 == 0);
        if (ptrs[i]) memset(ptrs[i], 0x5a, classes[i]); /* the whole class is usable */
        total += classes[i];
    }
    candle_mem_stats st = candle_pool_stats(p);
    CHECK(st.n_allocs == 9 && st.n_sys_allocs == 9);
    CHECK(st.bytes_live == total && st.bytes_reserved == total && st.bytes_peak == total);
    CHECK(st.fragmentation == 0.0);

    for (int i = 0; i < 9; i++) candle_pool_release(p, ptrs[i]);
    st = candle_pool_stats(p);
    CHECK(st.bytes_live == 0 && st.bytes_reserved == total && st.bytes_peak == total);
    CHECK(st.fragmentation == 1.0);

    /* Same classes again: served from the free lists, no system call. */
    void *again[9];
    for (int i = 0; i < 9; i++) again[i] = candle_pool_alloc(p, sizes[i]);
    st = candle_pool_stats(p);
    CHECK(st.n_allocs == 18 && st.n_sys_allocs == 9);
    CHECK(st.bytes_live == total);
    /* a 100-byte block reuses a released 128-byte one */
    candle_pool_release(p, again[3]);
    void *r = candle_pool_alloc(p, 100);
    CHECK(r == again[3]);
    CHECK(candle_pool_stats(p).n_sys_allocs == 9);
    candle_pool_release(p, r);
    again[3] = NULL;

    /* trim gives cached blocks back; live ones stay */
    candle_pool_trim(p);
    st = candle_pool_stats(p);
    CHECK(st.bytes_reserved == total - 128);
    CHECK(st.bytes_live == total - 128);
    for (int i = 0; i < 9; i++) candle_pool_release(p, again[i]);
    candle_pool_trim(p);
    st = candle_pool_stats(p);
    CHECK(st.bytes_reserved == 0 && st.bytes_live == 0 && st.fragmentation == 0.0);
    candle_pool_free(p);
}

static void test_pool_foreign_release(void) {
    candle_pool *p;
    CHECK(candle_pool_init(&p, 0, (candle_device){CANDLE_DEVICE_CPU, 0}) == CANDLE_OK);
    void *a = candle_pool_alloc(p, 256);
    int on_stack = 0;
    candle_clear_last_error();
    candle_pool_release(p, &on_stack);
    CHECK(candle_last_error() == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "was not allocated by this pool");
    candle_pool_release(p, (char *)a + 8); /* interior pointer */
    CHECK(candle_last_error() == CANDLE_ERR_INVALID_ARG);
    candle_mem_stats st = candle_pool_stats(p);
    CHECK(st.bytes_live == 256);
    candle_pool_release(p, a);
    candle_clear_last_error();
    candle_pool_release(p, a); /* double release */
    CHECK(candle_last_error() == CANDLE_ERR_INVALID_ARG);
    st = candle_pool_stats(p);
    CHECK(st.bytes_live == 0 && st.bytes_reserved == 256);
    /* the pool still works and hands the block out once */
    void *b = candle_pool_alloc(p, 200), *c = candle_pool_alloc(p, 200);
    CHECK(b == a && c != a && c != NULL);
    candle_pool_release(p, NULL); /* no-op */
    candle_pool_free(p);          /* frees live blocks too (ASan: no leak) */
    /* a cuda pool cannot come from the core */
    candle_pool *q = (candle_pool *)&on_stack;
    CHECK(candle_pool_init(&q, 0, (candle_device){CANDLE_DEVICE_CUDA, 0}) == CANDLE_ERR_UNSUPPORTED);
    CHECK(q == NULL);
}

static void test_pool_limit(void) {
    candle_pool *p;
    CHECK(candle_pool_init(&p, 2 * MiB, (candle_device){CANDLE_DEVICE_CPU, 0}) == CANDLE_OK);
    void *a = candle_pool_alloc(p, 1 * MiB);
    CHECK(a != NULL);
    candle_clear_last_error();
    CHECK(candle_pool_alloc(p, 3 * MiB + 1) == NULL);
    CHECK(candle_last_error() == CANDLE_ERR_OOM);
    CHECK_CONTAINS(candle_last_errmsg(),
                   "out of memory: requested 3.00 MiB, available 1.00 MiB on cpu (pool limit 2.00 MiB)");
    /* Cached blocks of other classes are trimmed to make room. */
    void *b = candle_pool_alloc(p, 512 * KiB);
    CHECK(b != NULL);
    candle_pool_release(p, b);
    candle_pool_release(p, a);
    void *c = candle_pool_alloc(p, 2 * MiB); /* needs both cached blocks gone */
    CHECK(c != NULL);
    candle_mem_stats st = candle_pool_stats(p);
    CHECK(st.bytes_reserved == 2 * MiB && st.bytes_live == 2 * MiB);
    CHECK(candle_pool_alloc(p, 1) == NULL);
    CHECK(candle_pool_alloc(p, SIZE_MAX) == NULL);
    CHECK(candle_last_error() == CANDLE_ERR_OOM);
    candle_pool_free(p);
}

/* A memory source that fails once its budget of live blocks is used. */
typedef struct fake_source {
    int live, max_live, n_alloc, n_free;
} fake_source;

static void *fake_alloc(void *user, size_t size) {
    fake_source *f = user;
    if (f->live == f->max_live) return NULL;
    f->live++;
    f->n_alloc++;
    return malloc(size);
}
static void fake_free(void *user, void *ptr) {
    fake_source *f = user;
    f->live--;
    f->n_free++;
    free(ptr);
}

static void test_pool_source_failure(void) {
    fake_source f = {0, 2, 0, 0};
    cdl_pool_source src = {fake_alloc, fake_free, &f};
    candle_pool *p;
    CHECK(cdl_pool_init_with(&p, 0, (candle_device){CANDLE_DEVICE_CUDA, 1}, &src) == CANDLE_OK);
    void *a = candle_pool_alloc(p, 100), *b = candle_pool_alloc(p, 1000);
    CHECK(a && b && f.live == 2);
    candle_clear_last_error();
    CHECK(candle_pool_alloc(p, 5000) == NULL);
    CHECK(candle_last_error() == CANDLE_ERR_OOM);
    CHECK_CONTAINS(candle_last_errmsg(),
                   "out of memory: requested 4.88 KiB, available 0 B on cuda:1 (pool: system allocation failed)");
    /* a cached block is given back and the allocation retried */
    candle_pool_release(p, b);
    void *c = candle_pool_alloc(p, 5000);
    CHECK(c != NULL && f.n_free == 1);
    candle_mem_stats st = candle_pool_stats(p);
    CHECK(st.n_sys_allocs == 3 && st.bytes_reserved == 128 + 8192 && st.bytes_live == 128 + 8192);
    candle_pool_free(p);
    CHECK(f.live == 0); /* live blocks went back to the source too */
}

typedef struct worker_arg {
    candle_pool *p;
    int seed;
    int bad;
} worker_arg;

static void *worker(void *argp) {
    worker_arg *w = argp;
    void *held[16] = {0};
    uint32_t x = (uint32_t)w->seed * 2654435761u + 1;
    for (int i = 0; i < 2000; i++) {
        x = x * 1664525u + 1013904223u;
        int slot = (int)(x >> 28);
        if (held[slot]) {
            if (*(unsigned char *)held[slot] != (unsigned char)(slot + w->seed)) w->bad++;
            candle_pool_release(w->p, held[slot]);
            held[slot] = NULL;
        } else {
            size_t size = 64u << ((x >> 8) % 6);
            held[slot] = candle_pool_alloc(w->p, size);
            if (!held[slot]) w->bad++;
            else memset(held[slot], slot + w->seed, size);
        }
    }
    for (int s = 0; s < 16; s++) candle_pool_release(w->p, held[s]);
    return NULL;
}

static void test_pool_threads(void) {
    candle_pool *p;
    CHECK(candle_pool_init(&p, 0, (candle_device){CANDLE_DEVICE_CPU, 0}) == CANDLE_OK);
    pthread_t th[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){p, i * 31, 0};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].bad == 0);
    }
    candle_mem_stats st = candle_pool_stats(p);
    CHECK(st.bytes_live == 0);
    CHECK(st.n_allocs > 0 && st.n_sys_allocs <= st.n_allocs);
    candle_pool_free(p);
}

int main(void) {
    test_arena_alignment();
    test_arena_counters_and_reuse();
    test_arena_mixed_alignment_merge();
    test_arena_random_steps();
    test_arena_limit();
    test_pool_classes_and_reuse();
    test_pool_foreign_release();
    test_pool_limit();
    test_pool_source_failure();
    test_pool_threads();
    return test_done("test_memory");
}
