/* Sorted name indexes: the tensor and key lookups of the file readers and
 * weight sources, by binary search over names sorted once at open. */
#include <stdlib.h>
#include <string.h>

#include "core-impl.h"

/* Ties keep file order, so a repeated name's later entry comes second. */
static int ref_cmp(const void *a, const void *b) {
    const cdl_name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

void cdl_names_sort(cdl_name_ref *refs, int64_t n) {
    if (n > 1) qsort(refs, (size_t)n, sizeof *refs, ref_cmp);
}

int64_t cdl_names_find(const cdl_name_ref *sorted, int64_t n, const char *name) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid].name, name);
        if (c == 0) return sorted[mid].idx;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}
