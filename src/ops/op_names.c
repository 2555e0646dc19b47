/* Op names, for messages and graph dumps. */
#include "ops-impl.h"

static const char *names[] = {
    [CANDLE_OP_NONE] = "none", [CANDLE_OP_VIEW] = "view", [CANDLE_OP_COPY] = "copy",
    [CANDLE_OP_NEG] = "neg", [CANDLE_OP_ABS] = "abs", [CANDLE_OP_EXP] = "exp",
    [CANDLE_OP_LOG] = "log", [CANDLE_OP_SQRT] = "sqrt", [CANDLE_OP_RSQRT] = "rsqrt",
    [CANDLE_OP_SIN] = "sin", [CANDLE_OP_COS] = "cos", [CANDLE_OP_TANH] = "tanh",
    [CANDLE_OP_SIGMOID] = "sigmoid", [CANDLE_OP_RELU] = "relu", [CANDLE_OP_SILU] = "silu",
    [CANDLE_OP_GELU_ERF] = "gelu", [CANDLE_OP_GELU_TANH] = "gelu_tanh",
    [CANDLE_OP_AFFINE] = "affine", [CANDLE_OP_CLAMP] = "clamp", [CANDLE_OP_ADD] = "add",
    [CANDLE_OP_SUB] = "sub", [CANDLE_OP_MUL] = "mul", [CANDLE_OP_DIV] = "div",
    [CANDLE_OP_MAXIMUM] = "maximum", [CANDLE_OP_MINIMUM] = "minimum", [CANDLE_OP_POW] = "pow",
    [CANDLE_OP_EQ] = "eq", [CANDLE_OP_NE] = "ne", [CANDLE_OP_LT] = "lt", [CANDLE_OP_LE] = "le",
    [CANDLE_OP_GT] = "gt", [CANDLE_OP_GE] = "ge", [CANDLE_OP_WHERE] = "where",
    [CANDLE_OP_SUM] = "sum", [CANDLE_OP_MEAN] = "mean", [CANDLE_OP_MAX] = "max",
    [CANDLE_OP_MIN] = "min", [CANDLE_OP_ARGMAX] = "argmax", [CANDLE_OP_SOFTMAX] = "softmax",
    [CANDLE_OP_LOG_SOFTMAX] = "log_softmax", [CANDLE_OP_MATMUL] = "matmul",
    [CANDLE_OP_RMS_NORM] = "rms_norm", [CANDLE_OP_LAYER_NORM] = "layer_norm",
    [CANDLE_OP_ROPE] = "rope", [CANDLE_OP_INDEX_SELECT] = "index_select",
    [CANDLE_OP_GATHER] = "gather", [CANDLE_OP_CONCAT] = "concat", [CANDLE_OP_ARANGE] = "arange",
    [CANDLE_OP_FILL] = "fill", [CANDLE_OP_RAND] = "rand", [CANDLE_OP_CONV1D] = "conv1d",
    [CANDLE_OP_CONV2D] = "conv2d", [CANDLE_OP_ATTENTION] = "attention",
    [CANDLE_OP_PAGED_ATTENTION] = "paged_attention", [CANDLE_OP_MOE_FFN] = "moe_ffn",
    [CANDLE_OP_TOPK_MASK] = "topk_mask", [CANDLE_OP_MATMUL_GROUP_CORR] = "matmul_group_corr",
};
_Static_assert(sizeof(names) / sizeof(names[0]) == CANDLE_OP_COUNT, "op name table out of date");

const char *candle_op_name(candle_op op) {
    return (unsigned)op < CANDLE_OP_COUNT && names[op] ? names[op] : "invalid op";
}
