/* Peer benchmark: Candle's quant dot kernels and activation quantizers
 * against ggml's x86 ones on the same blocks, in one process, single thread,
 * best of 15 CPU-time runs; also prints the largest relative difference of
 * the two dot results (a cross-check of the block semantics).
 * Not part of the build: run scripts/bench_quant_ggml.sh GGML_CHECKOUT BUILD_DIR. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <math.h>
#include "candle/dtype.h"

typedef void (*gdot)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
#define G(n) void n(int, float*, size_t, const void*, size_t, const void*, size_t, int);
G(ggml_vec_dot_q4_0_q8_0) G(ggml_vec_dot_q4_1_q8_1) G(ggml_vec_dot_q5_0_q8_0) G(ggml_vec_dot_q5_1_q8_1) G(ggml_vec_dot_q8_0_q8_0) G(ggml_vec_dot_iq4_nl_q8_0)
G(ggml_vec_dot_q2_K_q8_K) G(ggml_vec_dot_q3_K_q8_K) G(ggml_vec_dot_q4_K_q8_K) G(ggml_vec_dot_q5_K_q8_K) G(ggml_vec_dot_q6_K_q8_K) G(ggml_vec_dot_iq4_xs_q8_K)
void quantize_row_q8_0(const float*, void*, int64_t); void quantize_row_q8_1(const float*, void*, int64_t); void quantize_row_q8_K(const float*, void*, int64_t);

/* ggml symbols its quant files reference */
void ggml_abort(const char *file, int line, const char *fmt, ...) { (void)fmt; fprintf(stderr, "ggml_abort %s:%d\n", file, line); abort(); }
void ggml_log_internal(int level, const char *fmt, ...) { (void)level, (void)fmt; }
size_t ggml_row_size(int type, int64_t ne) { (void)type, (void)ne; abort(); }
const char *ggml_type_name(int type) { (void)type; return "?"; }
size_t ggml_type_size(int type) { (void)type; abort(); }
float ggml_table_f32_f16[1 << 16];
float ggml_table_f32_e8m0_half[256];
float ggml_table_f32_ue4m3[256];
static double now(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  for (int i = 0; i < 65536; i++) ggml_table_f32_f16[i] = candle_f16_to_f32((uint16_t)i);
  long n = 4096, rows = 256;
  float *x = malloc(n*rows*4), *y = malloc(n*4);
  srand(1); for (long i=0;i<n*rows;i++) x[i] = (float)rand()/RAND_MAX-0.5f; for (long i=0;i<n;i++) y[i] = (float)rand()/RAND_MAX-0.5f;
  struct {candle_dtype t; gdot g;} cs[] = {{CANDLE_DTYPE_Q4_0,ggml_vec_dot_q4_0_q8_0},{CANDLE_DTYPE_Q4_1,ggml_vec_dot_q4_1_q8_1},{CANDLE_DTYPE_Q5_0,ggml_vec_dot_q5_0_q8_0},{CANDLE_DTYPE_Q5_1,ggml_vec_dot_q5_1_q8_1},{CANDLE_DTYPE_Q8_0,ggml_vec_dot_q8_0_q8_0},{CANDLE_DTYPE_IQ4_NL,ggml_vec_dot_iq4_nl_q8_0},{CANDLE_DTYPE_Q2_K,ggml_vec_dot_q2_K_q8_K},{CANDLE_DTYPE_Q3_K,ggml_vec_dot_q3_K_q8_K},{CANDLE_DTYPE_Q4_K,ggml_vec_dot_q4_K_q8_K},{CANDLE_DTYPE_Q5_K,ggml_vec_dot_q5_K_q8_K},{CANDLE_DTYPE_Q6_K,ggml_vec_dot_q6_K_q8_K},{CANDLE_DTYPE_IQ4_XS,ggml_vec_dot_iq4_xs_q8_K}};
  printf("type    candle GB/s  ggml GB/s  ratio  max rel diff of results\n");
  for (unsigned k=0;k<sizeof cs/sizeof cs[0];k++){
    const candle_dtype_traits *tx=candle_dtype_info(cs[k].t), *ty=candle_dtype_info(tx->vec_dot_type);
    size_t rs = candle_dtype_row_size(cs[k].t, n);
    char *xq = malloc(rs*rows); void *yq = malloc(candle_dtype_row_size(tx->vec_dot_type,n));
    for (long r=0;r<rows;r++) tx->from_f32(x+r*n, xq+r*rs, n);
    ty->from_f32(y,yq,n);
    double tc=1e9, tg=1e9, md=0; float o1, o2;
    for (int rep=0; rep<15; rep++){
      double t0=now(); for (long r=0;r<rows;r++) tx->vec_dot(n,&o1,xq+r*rs,yq); double t1=now(); if (t1-t0<tc) tc=t1-t0;
      t0=now(); for (long r=0;r<rows;r++) cs[k].g(n,&o2,0,xq+r*rs,0,yq,0,1); t1=now(); if (t1-t0<tg) tg=t1-t0;
    }
    for (long r=0;r<rows;r++){ tx->vec_dot(n,&o1,xq+r*rs,yq); cs[k].g(n,&o2,0,xq+r*rs,0,yq,0,1); double d=fabs(o1-o2)/(fabs(o2)+1e-3); if(d>md) md=d; }
    double gb = (double)rs*rows/1e9;
    printf("%-7s %8.2f %10.2f %7.2f  %.1e\n", tx->name, gb/tc, gb/tg, tg/tc, md);
    free(xq); free(yq);
  }
  /* activation quantizers */
  struct {const char *nm; candle_dtype t; void (*g)(const float*, void*, int64_t);} q[] = {{"q8_0",CANDLE_DTYPE_Q8_0,quantize_row_q8_0},{"q8_1",CANDLE_DTYPE_Q8_1,quantize_row_q8_1},{"q8_k",CANDLE_DTYPE_Q8_K,quantize_row_q8_K}};
  for (int k=0;k<3;k++){ const candle_dtype_traits *tr=candle_dtype_info(q[k].t); char *b=malloc(candle_dtype_row_size(q[k].t,n*rows)); double tc=1e9,tg=1e9;
    for (int rep=0;rep<5;rep++){ double t0=now(); tr->from_f32(x,b,n*rows); double t1=now(); if(t1-t0<tc)tc=t1-t0; t0=now(); q[k].g(x,b,n*rows); t1=now(); if(t1-t0<tg)tg=t1-t0; }
    printf("%s from_f32: candle %.2f GB/s ggml %.2f GB/s (f32 in)\n", q[k].nm, n*rows*4/tc/1e9, n*rows*4/tg/1e9); free(b);}
}
