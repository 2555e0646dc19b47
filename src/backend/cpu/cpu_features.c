/* CPU feature detection (cpuid + xgetbv; on aarch64 AT_HWCAP) and the
 * physical core count. A
 * feature counts only when the OS also saves its registers (XCR0), otherwise
 * its instructions fault even though cpuid lists them. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cpu-impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect(cpu_features *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = c & (1u << 27);
    bool fma = c & (1u << 12), f16c = c & (1u << 29), avx = c & (1u << 28);
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm_ok = (xcr0 & 0x6) == 0x6;    /* SSE + AVX state */
    bool zmm_ok = (xcr0 & 0xe6) == 0xe6;  /* + opmask, ZMM hi256, hi16 ZMM */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    f->avx2 = avx && ymm_ok && (b & (1u << 5));
    f->fma = fma && ymm_ok;
    f->f16c = f16c && ymm_ok;
    f->avx512f = zmm_ok && (b & (1u << 16));
    f->avx512bw = f->avx512f && (b & (1u << 30));
    f->avx512vl = f->avx512f && (b & (1u << 31));
    f->avx512vnni = f->avx512f && (c & (1u << 11));
    unsigned a1 = 0, b1, c1, d1;
    if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f->avx512bf16 = f->avx512f && (a1 & (1u << 5));
    char vendor[13];
    __get_cpuid(0, &a, &b, &c, &d);
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    vendor[12] = 0;
    f->amd = !strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine");
}
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1 << 9)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1 << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

static void detect(cpu_features *f) {
    unsigned long hw = getauxval(AT_HWCAP);
    f->neon = (hw & HWCAP_ASIMD) != 0;
    f->dotprod = (hw & HWCAP_ASIMDDP) != 0;
    f->fp16 = (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
}
#else
static void detect(cpu_features *f) { (void)f; }
#endif

static int read_int(const char *path) {
    FILE *fp = fopen(path, "r");
    int v = -1;
    if (fp) {
        if (fscanf(fp, "%d", &v) != 1) v = -1;
        fclose(fp);
    }
    return v;
}

/* Distinct (package, core) pairs among the CPUs this process may run on;
 * hyperthread siblings share a core and only slow each other's FMA units. */
static int count_physical(void) {
    cpu_set_t set;
    int allowed = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) allowed = CPU_COUNT(&set);
    if (allowed <= 0) allowed = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (allowed <= 0) return 1;
    enum { MAX_CORES = 1024 };
    static int seen[MAX_CORES];
    int n_seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n_seen < MAX_CORES; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        char p[128];
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        int core = read_int(p);
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        int pkg = read_int(p);
        if (core < 0) return allowed;
        int key = pkg * 65536 + core, dup = 0;
        for (int i = 0; i < n_seen && !dup; i++) dup = seen[i] == key;
        if (!dup) seen[n_seen++] = key;
    }
    return n_seen > 0 && n_seen <= allowed ? n_seen : allowed;
}

static cpu_features g_features;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_features(void) {
    detect(&g_features);
    g_features.n_physical = count_physical();
}

const cpu_features *cpu_get_features(void) {
    pthread_once(&g_once, init_features);
    return &g_features;
}
