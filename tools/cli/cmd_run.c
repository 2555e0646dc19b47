/* candle run / chat / logits / perplexity (pending). */
#include <stdio.h>

#include "cli.h"

#define PENDING(fn)                                              \
    int fn(int argc, char **argv) {                              \
        (void)argc;                                              \
        (void)argv;                                              \
        fprintf(stderr, "candle: %s not implemented yet\n", #fn); \
        return 1;                                                \
    }
PENDING(cmd_run)
PENDING(cmd_chat)
PENDING(cmd_logits)
PENDING(cmd_perplexity)
