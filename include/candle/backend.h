/* Backends compute graphs. Each is a vtable behind an opaque handle. */
#ifndef CANDLE_BACKEND_H
#define CANDLE_BACKEND_H

#include "api.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct candle_backend_iface {
    const char *name;
    /* Whether the host reads and writes this backend's buffers in place (the
     * CPU: its storages have backend NULL). Otherwise the storages name the
     * backend, and the graph's scheduler copies what crosses (counted). */
    bool host_visible;
    /* Storage of `size` bytes on the backend's device (refcount 1). */
    candle_status (*buffer_alloc)(candle_backend *be, size_t size, candle_storage **out);
    /* Bytes [offset, offset + size) of one of its storages (offset counted from
     * s->data, which derived storages such as plan regions move): written from
     * host memory, read into it, set to a byte value, copied within the
     * backend. Required where host_visible is false. */
    candle_status (*buffer_set)(candle_backend *be, candle_storage *s, size_t offset, const void *src, size_t size);
    candle_status (*buffer_get)(candle_backend *be, const candle_storage *s, size_t offset, void *dst, size_t size);
    candle_status (*buffer_memset)(candle_backend *be, candle_storage *s, size_t offset, int value, size_t size);
    candle_status (*buffer_copy)(candle_backend *be, candle_storage *dst, size_t dst_offset,
                                 const candle_storage *src, size_t src_offset, size_t size);
    bool (*supports_op)(candle_backend *be, const candle_tensor *node);
    /* Compute one node whose inputs are computed and whose storage is set. */
    candle_status (*compute_node)(candle_backend *be, candle_tensor *node);
    candle_status (*synchronize)(candle_backend *be);
    void (*free)(candle_backend *be);
    /* Optional (NULL: node by node): n matmul nodes that read the same
     * activation and not each other, ready as for compute_node, computed
     * together (one job where the backend can). */
    candle_status (*compute_group)(candle_backend *be, candle_tensor *const *nodes, int n);
    /* Optional (NULL: never fused): whether the backend can compute binary
     * (an add, sub, mul or div of unary's shape reading unary as exactly
     * one operand: the graph checks that) straight from unary's
     * input, the unary's result never stored; and that computation (binary
     * ready as for compute_node; unary gets no storage). The same for the
     * other pair the graph forms: "unary" an add of two operands of its
     * shape, "binary" the layer_norm whose input it is. compute_fused
     * answers CANDLE_ERR_UNSUPPORTED, having done nothing, where it cannot
     * (the graph then runs the two nodes one by one). Results are the same
     * bits as the two nodes' own kernels. */
    bool (*fusable)(candle_backend *be, const candle_tensor *unary, const candle_tensor *binary);
    candle_status (*compute_fused)(candle_backend *be, candle_tensor *unary, candle_tensor *binary);
    /* Optional (NULL: the graph drives compute_node/group/fused node by node,
     * which is the CPU's way): the n nodes of one graph run, in order, every
     * one supported, with its storage bound and inputs the backend reads in
     * place (the graph checks; otherwise it drives the run itself), computed
     * as a whole: a device backend may capture the sequence once and replay
     * it. After a failure no node of the run counts as computed. */
    candle_status (*graph_compute)(candle_backend *be, candle_tensor *const *nodes, int n);
} candle_backend_iface;

struct candle_backend {
    const candle_backend_iface *iface;
    candle_device device;
    int n_threads;
    void *impl;
};

/* Settings of a CPU backend. Every field's zero value (candle_cpu_default_params)
 * is the automatic choice for this CPU; the others are for comparisons,
 * debugging and tests. */
typedef enum candle_cpu_isa {
    CANDLE_CPU_ISA_AUTO,   /* the widest the CPU has */
    CANDLE_CPU_ISA_SCALAR, /* portable C only */
    CANDLE_CPU_ISA_AVX2,   /* x86-64: AVX2 + FMA + F16C (AVX-512 left unused) */
    CANDLE_CPU_ISA_AVX512, /* x86-64: AVX-512 F/BW/VL */
    CANDLE_CPU_ISA_NEON,   /* arm64 */
    CANDLE_CPU_ISA_COUNT
} candle_cpu_isa;

/* The quantized dot products' kernels, capped. */
typedef enum candle_cpu_quant {
    CANDLE_CPU_QUANT_AUTO,    /* the best the CPU has (AVX-512 VNNI, AVX2, NEON dotprod, NEON) */
    CANDLE_CPU_QUANT_SCALAR,  /* the reference kernels */
    CANDLE_CPU_QUANT_AVX2,    /* x86-64: AVX2 even where AVX-512 VNNI is present */
    CANDLE_CPU_QUANT_NEON,    /* arm64: plain NEON even where the dot-product instructions are */
    CANDLE_CPU_QUANT_COUNT
} candle_cpu_quant;

/* The software prefetches of the decoding weight streams. */
typedef enum candle_cpu_prefetch {
    CANDLE_CPU_PREFETCH_AUTO, /* non-temporal on AMD (its L3 takes what L2 evicts), T0 elsewhere */
    CANDLE_CPU_PREFETCH_NTA,
    CANDLE_CPU_PREFETCH_T0,
    CANDLE_CPU_PREFETCH_COUNT
} candle_cpu_prefetch;

typedef struct candle_cpu_params {
    int n_threads;                /* 0: the physical cores this process may use */
    candle_cpu_isa isa;           /* cap on the vector kernels */
    candle_cpu_quant quant;       /* cap on the quantized dot products */
    candle_cpu_prefetch prefetch; /* kind of the weight streams' prefetches (same bits) */
    bool reference_only;          /* every op on the scalar reference kernels (the ground truth) */
    bool bf16_exact; /* bf16 weights x f32 activations in f32 FMAs even where AVX512_BF16
                      * would round prompt-sized activations to bf16 (nmse ~2e-6) */
    int qmm_max_m; /* activation rows up to which quantized matmuls stay on the integer
                    * kernels (more are dequantized into the f32 GEMM); -1: per type */
    int qgemm_direct_max_m; /* AVX-512 VNNI: q4_0/q4_1/q8_0 products of up to this many
                             * rows read the weight blocks in place (0..64); -1: 64 */
    int qgemm_few_max_m; /* AVX2 without VNNI: products of up to this many rows (0..32, and at
                          * most the type's own limit) decode each weight block once for all
                          * rows, each output the one-row product's bits; 0: off; -1: per type */
} candle_cpu_params;

CANDLE_API candle_cpu_params candle_cpu_default_params(void);
/* The settings of CPU backends made without explicit ones (by a context, a
 * model or candle_backend_cpu_init); at first candle_cpu_default_params().
 * Backends made before keep theirs. Invalid or unsupported settings (an ISA
 * this CPU lacks) are refused and change nothing. */
CANDLE_API candle_status candle_cpu_set_defaults(const candle_cpu_params *p);
CANDLE_API candle_cpu_params candle_cpu_get_defaults(void);
/* Names for the enums ("auto", "scalar", "avx2", "avx512", "neon"; "auto",
 * "scalar", "avx2", "neon"; "auto", "nta", "t0"), and back (-1 if unknown). */
CANDLE_API const char *candle_cpu_isa_name(candle_cpu_isa isa);
CANDLE_API const char *candle_cpu_quant_name(candle_cpu_quant q);
CANDLE_API const char *candle_cpu_prefetch_name(candle_cpu_prefetch k);
CANDLE_API int candle_cpu_isa_from_name(const char *name);
CANDLE_API int candle_cpu_quant_from_name(const char *name);
CANDLE_API int candle_cpu_prefetch_from_name(const char *name);

/* A CPU backend with its own thread pool. NULL params: the defaults above.
 * Errors: CANDLE_ERR_UNSUPPORTED for an ISA this CPU lacks, invalid
 * argument for out-of-range settings (the thread-local last error). */
CANDLE_API candle_status candle_backend_cpu_init_params(candle_backend **out, const candle_cpu_params *p);
/* candle_backend_cpu_init_params with the defaults and n_threads (0: default). */
CANDLE_API candle_backend *candle_backend_cpu_init(int n_threads);
/* The settings a CPU backend runs with (its ISA and quantized kernels as chosen,
 * never AUTO); false for another kind of backend. */
CANDLE_API bool candle_backend_cpu_params(const candle_backend *be, candle_cpu_params *out);
CANDLE_API void candle_backend_free(candle_backend *be);
/* A backend's failing call records its detail for the calling thread, so
 * sessions sharing one backend on different threads never see each other's
 * (the graph copies it into the context's error). candle_backend_errmsg:
 * the detail of the last failing backend call on this thread ("" if none). */
CANDLE_API void candle_backend_set_errmsg(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
CANDLE_API const char *candle_backend_errmsg(const candle_backend *be);
CANDLE_API const char *candle_backend_name(const candle_backend *be);
/* The backends of this build ("cpu", later "cuda"): the count, each one's
 * name and a line on it (NULL out of range), and one made by name with its
 * own settings struct (candle_cpu_params for "cpu"; NULL: its defaults).
 * An unknown name is CANDLE_ERR_UNSUPPORTED. */
CANDLE_API int candle_backend_count(void);
CANDLE_API const char *candle_backend_reg_name(int i);
CANDLE_API const char *candle_backend_reg_description(int i);
CANDLE_API candle_status candle_backend_init_by_name(candle_backend **out, const char *name, const void *params);
/* CPU features found (cpuid) and the kernels chosen, one per line. */
CANDLE_API const char *candle_cpu_info(char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
