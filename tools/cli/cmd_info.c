/* candle info (pending). */
#include <stdio.h>

#include "cli.h"

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "candle info: not implemented yet\n");
    return 1;
}
