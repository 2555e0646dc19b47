/* Reference kernels: rms_norm layer_norm (pending). */
#include "../cpu-impl.h"

candle_status cpu_ref_rms_norm(const cpu_task *task, candle_tensor *dst) {
    return cpu_error(task, CANDLE_ERR_UNSUPPORTED, "%s: not implemented yet", candle_op_name((candle_op)dst->op));
}
candle_status cpu_ref_layer_norm(const cpu_task *task, candle_tensor *dst) {
    return cpu_error(task, CANDLE_ERR_UNSUPPORTED, "%s: not implemented yet", candle_op_name((candle_op)dst->op));
}
