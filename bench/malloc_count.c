/* LD_PRELOAD heap-allocation counter: counts every malloc, calloc, realloc,
 * aligned_alloc, posix_memalign and memalign of the process and
 * passes the call on to the real allocator. A benchmark reads the count
 * through candle_malloc_count(), found with dlsym(RTLD_DEFAULT, ...), so it
 * needs no link-time dependency and reports "n/a" when not preloaded.
 *
 *   LD_PRELOAD=build/lib/libcandle_malloc_count.so candle bench --latency 1000
 *
 * A process that cannot call it (a server) is read from outside: on SIGUSR2
 * the library writes "malloc_count ALLOCS FREES" as one line to stderr
 * (bench/serve_embed.py sends it before and after its steady-state requests).
 * The handler is installed only where the program left SIGUSR2 at its default.
 *
 * dlsym itself may call calloc before the real one is known: those first
 * requests are served from a small static buffer and never freed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static void *(*real_aligned_alloc)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

static unsigned long long n_allocs, n_frees;

static _Alignas(64) unsigned char boot[8192];
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t n) {
    n = (n + 63) & ~(size_t)63;
    if (n > sizeof boot - boot_used) return NULL;
    void *p = boot + boot_used;
    boot_used += n;
    return p;
}

static int in_boot(const void *p) {
    return (const unsigned char *)p >= boot && (const unsigned char *)p < boot + sizeof boot;
}

static void resolve(void) {
    if (real_malloc || resolving) return;
    resolving = 1;
    *(void **)&real_calloc = dlsym(RTLD_NEXT, "calloc");
    *(void **)&real_realloc = dlsym(RTLD_NEXT, "realloc");
    *(void **)&real_free = dlsym(RTLD_NEXT, "free");
    *(void **)&real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    *(void **)&real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    *(void **)&real_memalign = dlsym(RTLD_NEXT, "memalign");
    *(void **)&real_malloc = dlsym(RTLD_NEXT, "malloc");
    resolving = 0;
}

static void count(void) { __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED); }

EXPORT unsigned long long candle_malloc_count(void) {
    return __atomic_load_n(&n_allocs, __ATOMIC_RELAXED);
}

EXPORT unsigned long long cdl_free_count(void) {
    return __atomic_load_n(&n_frees, __ATOMIC_RELAXED);
}

EXPORT void *malloc(size_t n) {
    resolve();
    if (!real_malloc) return boot_alloc(n);
    count();
    return real_malloc(n);
}

EXPORT void *calloc(size_t a, size_t b) {
    resolve();
    if (!real_calloc) {
        if (b && a > SIZE_MAX / b) return NULL;
        return boot_alloc(a * b); /* static memory is zero */
    }
    count();
    return real_calloc(a, b);
}

EXPORT void *realloc(void *p, size_t n) {
    resolve();
    if (in_boot(p)) { /* moves out of the boot buffer; the old block is leaked */
        size_t avail = (size_t)(boot + sizeof boot - (unsigned char *)p);
        void *q = malloc(n);
        if (q) memcpy(q, p, n < avail ? n : avail);
        return q;
    }
    count();
    return real_realloc(p, n);
}

EXPORT void free(void *p) {
    if (!p || in_boot(p)) return;
    resolve();
    if (!real_free) return; /* only while dlsym runs: leak rather than crash */
    __atomic_add_fetch(&n_frees, 1, __ATOMIC_RELAXED);
    real_free(p);
}

EXPORT void *aligned_alloc(size_t al, size_t n) {
    resolve();
    count();
    return real_aligned_alloc(al, n);
}

EXPORT int posix_memalign(void **out, size_t al, size_t n) {
    resolve();
    count();
    return real_posix_memalign(out, al, n);
}

EXPORT void *memalign(size_t al, size_t n) {
    resolve();
    count();
    return real_memalign(al, n);
}

/* SIGUSR2: the counts to stderr with write(2) only (async-signal-safe). */
static void report(int sig) {
    (void)sig;
    char buf[96], *q = buf + sizeof buf;
    unsigned long long v[2] = {__atomic_load_n(&n_allocs, __ATOMIC_RELAXED),
                               __atomic_load_n(&n_frees, __ATOMIC_RELAXED)};
    *--q = '\n';
    for (int i = 1; i >= 0; i--) {
        unsigned long long x = v[i];
        do *--q = (char)('0' + x % 10); while (x /= 10);
        *--q = ' ';
    }
    static const char tag[] = "malloc_count";
    q -= sizeof tag - 1;
    memcpy(q, tag, sizeof tag - 1);
    ssize_t r = write(2, q, (size_t)(buf + sizeof buf - q));
    (void)r;
}

__attribute__((constructor)) static void install_report(void) {
    struct sigaction old;
    if (sigaction(SIGUSR2, NULL, &old) || old.sa_handler != SIG_DFL) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = report;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
}
