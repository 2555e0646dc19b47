/* Quantizing GGUF files: `candle quantize IN.gguf OUT.gguf TYPE`.
 *
 * TYPE is one of llama.cpp's file types, under llama.cpp's names and numbers
 * (the number goes to general.file_type), so a file made here reads like one
 * made by llama-quantize. A file type is a base dtype plus a mixture rule:
 * unless `pure` is set, some tensors get more bits than the base (output.weight
 * q6_k in every block type but q8_0; attn_v and ffn_down in a subset of layers
 * in the _M mixes; ...). Only weight matrices (rank >= 2, not norms, not
 * gate_inp/position embeddings) are converted; everything else is copied.
 * Rows whose length is not a multiple of the chosen block size fall back to a
 * compatible type (as llama.cpp does: q2_k/q3_k to q4_0, iq4_xs to iq4_nl,
 * q4_k to q5_0, q5_k to q5_1, q6_k to q8_0; then f16), with a note.
 *
 * Inputs may be f32, f16 or bf16. Tensors already quantized are refused
 * (CANDLE_ERR_UNSUPPORTED, naming the tensor) unless allow_requantize is set:
 * then they are dequantized and quantized again, which compounds the error,
 * and the stats count them. A tensor already in its target type is copied
 * byte for byte.
 *
 * The output never replaces the input (same path, hard link or symlink are
 * refused before any work). It is written to OUT.tmp and renamed, so a failed
 * or interrupted run leaves no file under OUT; the converted tensors are held
 * in memory until then (about the output's size). */
#ifndef CANDLE_QUANTIZE_H
#define CANDLE_QUANTIZE_H

#include "api.h"
#include "dtype.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* llama.cpp's llama_ftype numbers (the gaps are types removed or not made
 * here: old q4_2/q4_3, and the types llama.cpp makes only with an importance
 * matrix, which Candle does not compute: iq1/iq2/iq3 and q2_k_s). */
typedef enum candle_ftype {
    CANDLE_FTYPE_ALL_F32 = 0,
    CANDLE_FTYPE_MOSTLY_F16 = 1,
    CANDLE_FTYPE_MOSTLY_Q4_0 = 2,
    CANDLE_FTYPE_MOSTLY_Q4_1 = 3,
    CANDLE_FTYPE_MOSTLY_Q8_0 = 7,
    CANDLE_FTYPE_MOSTLY_Q5_0 = 8,
    CANDLE_FTYPE_MOSTLY_Q5_1 = 9,
    CANDLE_FTYPE_MOSTLY_Q2_K = 10,
    CANDLE_FTYPE_MOSTLY_Q3_K_S = 11,
    CANDLE_FTYPE_MOSTLY_Q3_K_M = 12,
    CANDLE_FTYPE_MOSTLY_Q3_K_L = 13,
    CANDLE_FTYPE_MOSTLY_Q4_K_S = 14,
    CANDLE_FTYPE_MOSTLY_Q4_K_M = 15,
    CANDLE_FTYPE_MOSTLY_Q5_K_S = 16,
    CANDLE_FTYPE_MOSTLY_Q5_K_M = 17,
    CANDLE_FTYPE_MOSTLY_Q6_K = 18,
    CANDLE_FTYPE_MOSTLY_IQ4_NL = 25,
    CANDLE_FTYPE_MOSTLY_IQ4_XS = 30,
    CANDLE_FTYPE_MOSTLY_BF16 = 32,
    CANDLE_FTYPE_COUNT /* one past the largest number; not every value below is a type */
} candle_ftype;

/* Case-insensitive llama.cpp name ("Q4_K_M", "q8_0", aliases Q3_K, Q4_K and
 * Q5_K for the _M mixes). Unknown names: CANDLE_ERR_INVALID_ARG with a
 * message listing the valid ones. */
CANDLE_API candle_status candle_ftype_from_name(const char *name, candle_ftype *out);
/* "Q4_K_M", ...; NULL if f is not a file type made here. */
CANDLE_API const char *candle_ftype_name(candle_ftype f);
/* The base dtype of a file type; CANDLE_DTYPE_COUNT if f is not one. */
CANDLE_API candle_dtype candle_ftype_dtype(candle_ftype f);
/* One line describing the valid names (for usage messages). */
CANDLE_API const char *candle_ftype_names(void);

/* What the progress callback sees: called on the calling thread, after each
 * chunk of rows, once per note, and once before the output is written. */
typedef struct candle_quantize_progress {
    int64_t i_tensor, n_tensors; /* the tensor being converted, 0-based */
    const char *name;
    candle_dtype src_dtype, dst_dtype;
    uint64_t bytes_done, bytes_total; /* input tensor bytes handled so far / in all */
    const char *note; /* non-NULL: a one-line note (fallback type, requantizing) */
    bool writing;     /* the last call: the output file is being written */
} candle_quantize_progress;

/* Return false to cancel: nothing is written and the call fails. */
typedef bool (*candle_quantize_progress_fn)(const candle_quantize_progress *p, void *user);

typedef struct candle_quantize_stats {
    int64_t n_tensors;
    int64_t n_by_dtype[CANDLE_DTYPE_COUNT]; /* output tensors per dtype */
    int64_t n_converted;   /* tensors whose dtype changed */
    int64_t n_copied;      /* tensors written as they were */
    int64_t n_fallback;    /* rows did not fit the chosen block type */
    int64_t n_requantized; /* quantized inputs dequantized and quantized again */
    uint64_t n_elements;   /* in all tensors */
    uint64_t bytes_in, bytes_out; /* tensor data */
    uint64_t file_in, file_out;   /* whole files */
    double seconds_convert;       /* converting tensors */
    double seconds_total;         /* open to renamed output */
} candle_quantize_stats;

typedef struct candle_quantize_params {
    int n_threads;         /* <= 0: the online CPUs */
    bool pure;             /* no mixture rule: every weight matrix in the base dtype */
    bool allow_requantize; /* accept quantized inputs (see above) */
    /* llama-quantize's --output-tensor-type and --token-embedding-type: the
     * dtype of output.weight (of token_embd.weight too when the output is
     * tied to it) and of token_embd.weight, over the mixture rules and pure.
     * CANDLE_DTYPE_COUNT (the default params): by the rules. */
    candle_dtype output_type, token_embd_type;
    candle_quantize_progress_fn progress; /* may be NULL */
    void *progress_user;
    candle_quantize_stats *stats; /* filled when non-NULL, also on failure as far as it got */
} candle_quantize_params;

CANDLE_API candle_quantize_params candle_quantize_default_params(void);

/* in_path: a GGUF file or a Hugging Face directory (weights.h); a
 * directory's metadata is written as llama.cpp's converter types it and
 * Llama q/k rows are permuted as it does. NULL params = defaults. Errors
 * (io, format, invalid argument, unsupported) go to the thread-local last
 * error. */
CANDLE_API candle_status candle_quantize_file(const char *in_path, const char *out_path,
                                              candle_ftype ftype,
                                              const candle_quantize_params *params);

#ifdef __cplusplus
}
#endif
#endif
