/* The two roofs a decoder step runs under: read bandwidth from ordinary
 * (anonymous) memory and the FMA peak, each measured with n_threads threads.
 * Generation reads every weight once per token, so
 *   tokens/s <= bandwidth / bytes of weights read per token. */
#ifndef CANDLE_CLI_BENCH_ROOFLINE_H
#define CANDLE_CLI_BENCH_ROOFLINE_H

/* Bytes per second; best of a few passes over a buffer well past the last
 * level cache. 0 when the buffer cannot be allocated. */
double bench_read_bandwidth(int n_threads);

/* Single-precision FLOP/s of independent FMA chains (AVX2+FMA when the CPU has
 * them, else scalar fmaf). */
double bench_fma_peak(int n_threads);

/* The FMA path measured by bench_fma_peak: "avx2-fma" or "scalar". */
const char *bench_fma_kind(void);

#endif
