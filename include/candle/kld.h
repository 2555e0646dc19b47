/* The base-logits file of `candle perplexity --kl-divergence-base FILE`: the
 * next-token distributions of a reference model over a text, kept so that a
 * quantized model's distributions can later be compared with them
 * (KL divergence, top-1 agreement, PPL ratio) without the reference loaded.
 *
 * Format, version 1, little-endian (after llama.cpp's llama-perplexity, which
 * keeps per token a scale, a minimum and uint16 log-probs; this one is
 * Candle's own and not read by llama.cpp):
 *   offset 0   8 bytes  magic "CDLKLDB\0"
 *          8   u32      version (1)
 *         12   u32      bytes of a row's fixed part (16)
 *         16   u64      n_vocab   the model's vocabulary size
 *         24   u64      n_ctx     tokens per chunk
 *         32   u64      n_chunk   chunks evaluated
 *         40   u64      first     first scored position of a chunk (n_ctx / 2)
 *         48   u64      n_tokens  tokens of the text
 *         56   i32[n_tokens]      the text's token ids
 *   then n_chunk * (n_ctx - 1 - first) rows, chunk by chunk, position by
 *   position, each the distribution at a scored position j (predicting j + 1):
 *              i32      argmax    the most likely token (exact)
 *              f32      top       its log-probability (exact)
 *              f32      logp_next log-probability of the text's next token (exact)
 *              f32      step      in (0, 64 / 65535]: the row's span below the top
 *                       (down to the lowest logit, at most 64 nats) over 65535
 *              u16[n_vocab]       q: log p_i = top - q_i * step (an error of at
 *                       most step / 2 <= 4.9e-4 nats); log-probs more than 64
 *                       below the top (p under e^-64 of the top's) are clamped
 *                       to q = 65535
 *   end        u64      FNV-1a (64-bit) of every byte before it.
 * A row's fixed part keeps what the statistics read exactly (base PPL, top-1);
 * the quantized part is renormalized on reading, so a model compared with
 * its own file gives a KL divergence of the order of 1e-8 (second order
 * in the codes' error).
 *
 * Reading validates everything before use: the magic, the version, the sizes
 * against each other and against the file's length (a truncated file is
 * refused at open), the token ids below n_vocab, each row (argmax in range
 * with q 0, finite log-probs in order) as it is read, and the checksum once
 * the last row is read (candle_kld_finish). Errors are CANDLE_ERR_FORMAT with
 * a message naming the field. */
#ifndef CANDLE_KLD_H
#define CANDLE_KLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "status.h"

#define CANDLE_KLD_VERSION 1

typedef struct candle_kld_header {
    int64_t n_vocab, n_ctx, n_chunk, first, n_tokens;
} candle_kld_header;

/* The exact part of a row. */
typedef struct candle_kld_row {
    int32_t argmax;
    float top, logp_next;
} candle_kld_row;

/* Rows a file with this header holds: n_chunk * (n_ctx - 1 - first). */
CANDLE_API int64_t candle_kld_n_rows(const candle_kld_header *h);

typedef struct candle_kld_reader candle_kld_reader;
CANDLE_API candle_status candle_kld_open(candle_kld_reader **out, const char *path);
/* The same over a buffer (not copied: it must outlive the reader). */
CANDLE_API candle_status candle_kld_open_memory(candle_kld_reader **out, const void *data,
                                                size_t size);
CANDLE_API const candle_kld_header *candle_kld_header_of(const candle_kld_reader *r);
CANDLE_API const int32_t *candle_kld_tokens(const candle_kld_reader *r); /* [n_tokens] */
/* The next row: logp[n_vocab] gets its log-probabilities, renormalized. */
CANDLE_API candle_status candle_kld_read_row(candle_kld_reader *r, float *logp,
                                             candle_kld_row *row);
/* After the last row: checks the checksum and that nothing follows. */
CANDLE_API candle_status candle_kld_finish(candle_kld_reader *r);
CANDLE_API void candle_kld_close(candle_kld_reader *r);

/* Writing goes to a temporary beside path, renamed over it by a successful
 * commit; a failed or abandoned write (commit with ok false) leaves no file. */
typedef struct candle_kld_writer candle_kld_writer;
CANDLE_API candle_status candle_kld_create(candle_kld_writer **out, const char *path,
                                           const candle_kld_header *h, const int32_t *tokens);
/* One scored position: its logits[n_vocab] and the text's next token. */
CANDLE_API candle_status candle_kld_write_row(candle_kld_writer *w, const float *logits,
                                              int32_t next);
/* Frees w; with ok, fails unless every row was written. */
CANDLE_API candle_status candle_kld_commit(candle_kld_writer *w, bool ok);

#endif
