/* candle tokenize (pending). */
#include <stdio.h>

#include "cli.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "candle tokenize: not implemented yet\n");
    return 1;
}
