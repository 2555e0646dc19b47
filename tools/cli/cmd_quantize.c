/* candle quantize (pending). */
#include <stdio.h>

#include "cli.h"

int cmd_quantize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "candle quantize: not implemented yet\n");
    return 1;
}
