/* candle bench (pending). */
#include <stdio.h>

#include "cli.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "candle bench: not implemented yet\n");
    return 1;
}
