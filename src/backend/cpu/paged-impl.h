/* Block-table lookups shared by the paged attention kernels (reference and
 * fast): a bad table entry is an error, never an out-of-range access. */
#ifndef CANDLE_CPU_PAGED_IMPL_H
#define CANDLE_CPU_PAGED_IMPL_H

#include <string.h>

#include "cpu-impl.h"

static inline int32_t pa_entry(const candle_tensor *tab, int64_t i, int64_t c) {
    int32_t v;
    memcpy(&v, tensor_ptr(tab) + i * tab->stride[0] + c * tab->stride[1], sizeof v);
    return v;
}

/* Position of table row i (negative: bad). */
static inline int64_t pa_pos(const candle_tensor *tab, int64_t i) { return pa_entry(tab, i, 0); }

/* Cache row of position j through table row i, or -1 when the table does
 * not cover j or names a block outside the cache. */
static inline int64_t pa_cache_row(const candle_tensor *dst, int64_t i, int64_t j) {
    const candle_tensor *tab = dst->src[5];
    int64_t block = dst->iparams[0], c = 1 + j / block;
    if (j < 0 || c >= tab->shape[1]) return -1;
    int32_t b = pa_entry(tab, i, c);
    if (b < 0 || (int64_t)b >= dst->src[3]->shape[0] / block) return -1;
    return (int64_t)b * block + j % block;
}

/* First position row i sees (its sliding window). */
static inline int64_t pa_first(const candle_tensor *dst, int64_t pos) {
    int64_t w = dst->iparams[1];
    return w > 0 && pos - w + 1 > 0 ? pos - w + 1 : 0;
}

static inline candle_status pa_bad_table(const cpu_task *task, const candle_tensor *dst, int64_t i) {
    const candle_tensor *tab = dst->src[5];
    return cpu_error(task, CANDLE_ERR_INVALID_ARG,
                     "paged_attention: table row %lld (position %lld): a position past its %lld "
                     "blocks of %lld or a block id outside the cache's %lld",
                     (long long)i, (long long)pa_pos(tab, i), (long long)(tab->shape[1] - 1),
                     (long long)dst->iparams[0],
                     (long long)(dst->src[3]->shape[0] / dst->iparams[0]));
}

#endif
