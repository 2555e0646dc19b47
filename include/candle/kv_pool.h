/* Paged KV cache: one pool of fixed-size blocks (CANDLE_KV_BLOCK positions
 * of every layer's keys and values) shared by many sequences. A sequence
 * owns a block table (its positions' blocks in order); blocks come from a
 * free list and return to it when no sequence references them. Full blocks
 * of prompt tokens are published under the hash of the whole prefix up to
 * them, so a later prompt with the same prefix shares those blocks
 * (reference-counted) instead of recomputing them; the rows of a partly
 * filled block are copied instead. Freed blocks keep their
 * contents and stay shareable until the free list hands them out again
 * (oldest first). Attention reads K/V through the block table
 * (candle_batch_eval with candle_batch_seq.paged). Not thread-safe: one
 * thread (the scheduler) drives a pool. */
#ifndef CANDLE_KV_POOL_H
#define CANDLE_KV_POOL_H

#include "api.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CANDLE_KV_BLOCK 16

typedef struct candle_kv_pool candle_kv_pool;

typedef struct candle_kv_seq {
    int32_t *blocks; /* [cap] block ids of positions [i*BLOCK, (i+1)*BLOCK) */
    int64_t n_blocks, cap;
    int64_t pos;     /* positions holding keys/values */
    int64_t n_ctx;   /* most positions this sequence may hold */
} candle_kv_seq;

/* n_blocks blocks of keys and values for every layer, stored as kv_type:
 * f32, f16 or bf16 (rows rounded to nearest even as they are written), or
 * q8_0 or q4_0 (rows quantized as they are written, as llama.cpp's -ctk
 * q8_0; the model's head_dim must be a multiple of 32, else a dtype error). */
CANDLE_API candle_status candle_kv_pool_init(candle_kv_pool **out, const candle_model *m,
                                             int64_t n_blocks, candle_dtype kv_type);
CANDLE_API void candle_kv_pool_free(candle_kv_pool *p);
CANDLE_API int64_t candle_kv_pool_n_blocks(const candle_kv_pool *p);
/* Blocks referenced by at least one sequence. */
CANDLE_API int64_t candle_kv_pool_n_used(const candle_kv_pool *p);
/* Bytes of one block (keys and values of all layers) of kv_type: a block
 * type's rows of head_dim elements rounded up to whole blocks. */
CANDLE_API size_t candle_kv_pool_block_bytes(const candle_model *m, candle_dtype kv_type);

CANDLE_API candle_status candle_kv_seq_init(candle_kv_seq *s, int64_t n_ctx);
/* Drop every block reference and free the table. */
CANDLE_API void candle_kv_seq_free(candle_kv_pool *p, candle_kv_seq *s);
/* While the sequence holds whole blocks only (none partly filled): add the
 * published blocks that hold the longest whole-block continuation of
 * tokens[0..n-1) (the last token is always left to evaluate). Returns the
 * positions now filled. */
CANDLE_API int64_t candle_kv_seq_share_prefix(candle_kv_pool *p, candle_kv_seq *s,
                                              const int32_t *tokens, int64_t n);
/* After candle_kv_seq_share_prefix: copy the keys and values of the
 * longest run of published rows that continues tokens[0..n-1) into a block
 * of the sequence's own (copy on write: the rows of a block partly filled
 * by a prompt, or the first rows of a whole one). Returns the positions now
 * filled; unchanged when no rows match or no block is free. */
CANDLE_API int64_t candle_kv_seq_share_rows(candle_kv_pool *p, candle_kv_seq *s,
                                            const int32_t *tokens, int64_t n);
/* Publish the first n positions, whose tokens are tokens[0..n), for later
 * sequences to share: whole blocks, and the rows of a last partial one.
 * Called again as the positions grow (a prompt evaluated in chunks). */
CANDLE_API void candle_kv_seq_publish(candle_kv_pool *p, candle_kv_seq *s, const int32_t *tokens,
                                      int64_t n);
/* Make room for positions up to pos+n; CANDLE_ERR_OOM (nothing taken) when
 * the free list is short. */
CANDLE_API candle_status candle_kv_seq_reserve(candle_kv_pool *p, candle_kv_seq *s, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
