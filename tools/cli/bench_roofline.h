/* The two roofs a decoder step runs under: read bandwidth from ordinary
 * (anonymous) memory and the FMA peak, each measured with n_threads threads.
 * Generation reads every weight once per token, so
 *   tokens/s <= bandwidth / bytes of weights read per token. */
#ifndef CANDLE_CLI_BENCH_ROOFLINE_H
#define CANDLE_CLI_BENCH_ROOFLINE_H

/* Bytes per second; best of a few passes over a buffer well past the last
 * level cache. 0 when the buffer cannot be allocated. */
double bench_read_bandwidth(int n_threads);

/* Single-precision FLOP/s of independent FMA chains (cpu_probe_fma, in the
 * instruction set the CPU backend chose). */
double bench_fma_peak(int n_threads);

/* The kernel table the probes ran with ("avx2", "scalar", ...). */
const char *bench_fma_kind(void);

#endif
