/* Options shared by run, chat, logits and perplexity. */
#ifndef CANDLE_CLI_ARGS_H
#define CANDLE_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "candle/dtype.h"
#include "candle/sampler.h"

/* --lora / --lora-scaled adapters one command takes. */
#define CLI_MAX_LORA 16

typedef struct cli_args {
    const char *model;  /* -m; NULL = the default model */
    const char *prompt; /* -p */
    const char *file;   /* -f */
    const char *system; /* -sys / --system, chat's system prompt */
    const char *chat_template; /* --chat-template NAME */
    const char *grammar_file;  /* --grammar FILE (GBNF) */
    const char *grammar_text;  /* --grammar-text 'root ::= ...' */
    const char *json_schema;   /* --json-schema FILE */
    const char *kld_base;      /* --kl-divergence-base FILE (perplexity) */
    bool kld;                  /* --kl-divergence: compare with kld_base */
    int64_t n_predict;  /* -n; -1 = until end of generation */
    int64_t n_ctx;      /* -c; 0 = the command's default */
    int n_threads;      /* -t */
    int top;            /* --top K (logits) */
    bool no_mmap;       /* --no-mmap */
    bool ctx_shift;     /* --ctx-shift */
    bool kv_f16;        /* --kv-f16 (-ctk f16 -ctv f16) */
    const char *ctk, *ctv; /* -ctk / -ctv TYPE, as llama.cpp's --cache-type-k/-v */
    candle_dtype kv_type;  /* from the three above (cli_parse); f32 by default */
    candle_sampler_params sp;
    const char *draft_model; /* --draft-model FILE (run): speculative decoding's draft */
    int draft_max;      /* --draft-max K: tokens drafted per step; 0 = the default */
    int lookup;         /* --lookup N: prompt-lookup drafting with n-grams of N; 0 = off */
    float draft_p_min;  /* --draft-p-min P: a draft model stops drafting below it */
    bool draft_no_timing; /* --draft-no-timing: the acceptance schedule alone (candle_spec_params.cost_aware off) */
    bool seed_given;    /* -s / --seed N (N >= 0); otherwise a random seed, printed */
    const char *dtype;  /* --dtype f32|f16|bf16|q8_0: float weight matrices converted at load */
    candle_dtype weight_dtype; /* from dtype (cli_parse) */
    /* --lora FILE (scale 1) and --lora-scaled FILE SCALE, as llama.cpp spells them:
     * LoRA adapters (a GGUF LoRA or a PEFT directory) in the order given */
    struct {
        const char *path;
        float scale;
    } lora[CLI_MAX_LORA];
    int n_lora;
} cli_args;

/* Parse argv (argv[0] is the command: run, chat, logits or perplexity; an
 * option that command does not use is a usage error naming it). Returns 0
 * to go on, -1 after --help (exit 0), or 2 on a usage error (a message is
 * printed). The same argv always parses the same. chat's -n defaults to
 * CLI_CHAT_N_PREDICT. */
int cli_parse(int argc, char **argv, cli_args *a, const char *usage);
/* run and chat: a random seed unless -s/--seed named one, printed on stderr
 * ("seed: N") as llama.cpp does, so a run can be repeated. */
void cli_choose_seed(cli_args *a);

/* KV cache type names of -ctk/-ctv (f32, f16, bf16, q8_0, q4_0): false if
 * unknown. */
bool cli_kv_type(const char *name, candle_dtype *out);

/* --dtype's names (f32/float32: weights as stored; f16/float16; bf16/bfloat16,
 * as TEI spells them) into candle_model_params.weight_dtype: false if unknown. */
bool cli_weight_dtype(const char *name, candle_dtype *out);

/* The KV cache type of -ctk and -ctv (NULL when not given; neither: *out
 * stays): 0, or 2 after a message when a name is unknown or the two differ
 * (K and V share one cache type here). */
int cli_kv_pair(const char *cmd, const char *ctk, const char *ctv, candle_dtype *out);

/* The model path: -m, else the default model beside the current directory or
 * the repository the binary was built in. NULL (with a message) if none. */
const char *cli_model_path(const cli_args *a, char *buf, size_t n);

/* chat's default reply limit (-n): a base or looping model would otherwise
 * fill the whole context with one reply. */
#define CLI_CHAT_N_PREDICT 512

/* "candle CMD: PATH: MSG", leaving PATH out when MSG names it already (the
 * library's open errors do: "gguf: PATH: open: ..."). */
void cli_error_file(const char *cmd, const char *path, const char *msg);

/* Seconds on a monotonic clock. */
double cli_now(void);

#endif
