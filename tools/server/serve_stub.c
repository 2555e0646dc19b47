/* `candle serve` in builds without libmicrohttpd or jansson. */
#ifndef CANDLE_HAVE_SERVER
#include <stdio.h>

#include "../cli/cli.h"

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "candle serve: this build has no server: install libmicrohttpd-dev and "
                    "libjansson-dev (make deps) and rebuild\n");
    return 1;
}
#endif
