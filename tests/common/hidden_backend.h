/* A backend for tests whose memory the host cannot address: its storages
 * hold addresses moved out of the host's range (a read through
 * candle_tensor_data faults), bytes move only through its buffer calls, and
 * it runs every node through the CPU kernels on its own storages alone, so
 * an input the scheduler failed to copy is an error. It takes whole graphs
 * (graph_compute), counting them. Ops in `unsupported`
 * (ending with CANDLE_OP_NONE; NULL: none) are refused, for the scheduler's
 * CPU fallback. */
#ifndef CANDLE_TEST_HIDDEN_BACKEND_H
#define CANDLE_TEST_HIDDEN_BACKEND_H

#include "candle/candle.h"

candle_backend *test_hidden_backend_init(int n_threads, const candle_op *unsupported);
/* Storages it made so far and those still live; whole graphs it was handed. */
void test_hidden_backend_counts(const candle_backend *be, long *allocs, long *live, long *graphs);

#endif
