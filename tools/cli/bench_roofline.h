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

/* The machine's own timing noise for a memory-bound step: `passes` passes,
 * each n_threads threads started together reading from memory for about
 * `secs` (sized with the measured bandwidth), each pass's slowest thread time
 * into pass_secs[passes]. A decoder step cannot be steadier than this.
 * 0, or -1 when memory or a thread cannot be had. */
int bench_read_jitter(int n_threads, double secs, int passes, double *pass_secs);

/* The kernel table the probes ran with ("avx2", "scalar", ...). */
const char *bench_fma_kind(void);

#endif
