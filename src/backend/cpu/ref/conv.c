/* Reference kernels: conv1d conv2d (pending). */
#include "../cpu-impl.h"

candle_status cpu_ref_conv1d(const cpu_task *task, candle_tensor *dst) {
    return cpu_error(task, CANDLE_ERR_UNSUPPORTED, "%s: not implemented yet", candle_op_name((candle_op)dst->op));
}
candle_status cpu_ref_conv2d(const cpu_task *task, candle_tensor *dst) {
    return cpu_error(task, CANDLE_ERR_UNSUPPORTED, "%s: not implemented yet", candle_op_name((candle_op)dst->op));
}
