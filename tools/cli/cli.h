/* Subcommands of the `candle` tool. Each returns the process exit code. */
#ifndef CANDLE_CLI_H
#define CANDLE_CLI_H

#include "candle/candle.h"

int cmd_info(int argc, char **argv);       /* cmd_info.c */
int cmd_tokenize(int argc, char **argv);   /* cmd_tokenize.c */
int cmd_embed(int argc, char **argv);      /* cmd_embed.c */
int cmd_classify(int argc, char **argv);   /* cmd_classify.c */
int cmd_rerank(int argc, char **argv);     /* cmd_classify.c */
int cmd_transcribe(int argc, char **argv); /* cmd_transcribe.c */
int cmd_run(int argc, char **argv);        /* cmd_run.c */
int cmd_chat(int argc, char **argv);       /* cmd_run.c */
int cmd_logits(int argc, char **argv);     /* cmd_run.c */
int cmd_perplexity(int argc, char **argv); /* cmd_run.c */
int cmd_bench(int argc, char **argv);      /* cmd_bench.c */
int cmd_bench_model(int argc, char **argv); /* cmd_bench_model.c: bench -m MODEL */
int cmd_bench_quant(int argc, char **argv); /* cmd_bench_quant.c: bench quant */
int cmd_bench_attn(int argc, char **argv);  /* cmd_bench_attn.c: bench attn */
int cmd_bench_load(int argc, char **argv);  /* cmd_bench_load.c: bench load */
int cmd_bench_embed(int argc, char **argv); /* cmd_bench_embed.c: bench embed */
int cmd_quantize(int argc, char **argv);   /* cmd_quantize.c */
int cmd_serve(int argc, char **argv);      /* tools/server/serve.c */

/* The default model fetched by `make run` (scripts/fetch-model.sh). */
#define CLI_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

#endif
