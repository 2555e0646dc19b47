/* libFuzzer target for the generation commands' option parser
 * (tools/cli/args.c, compiled into this target): an input is the argument
 * list, NUL-separated (argv[0] is the command). Beyond "no crash":
 * cli_parse returns 0, -1 (after --help) or 2 (usage error); when it
 * accepts, the documented limits hold (-c, -t >= 0, --top > 0), string
 * options point into argv, and parsing the same arguments again gives the
 * same result. Seeds: tests/fuzz/corpus/cli_args/ (written by hand:
 * command lines of the README). Built with -DCANDLE_FUZZ=ON. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "fuzz-check.h"

#define MAX_ARGS 64

static FILE *devnull;

static bool in_argv(const char *s, char *const *argv, int argc) {
    if (!s) return true;
    for (int i = 0; i < argc; i++)
        if (s == argv[i]) return true;
    return false;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    /* Usage and error text are not what is tested: it goes to /dev/null
     * (stdout for good, stderr around each parse) to keep the log readable. */
    devnull = fopen("/dev/null", "w");
    if (!getenv("FUZZ_VERBOSE") && !freopen("/dev/null", "w", stdout)) return 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    for (size_t i = 0, start = 0; i <= size && argc < MAX_ARGS; i++)
        if (buf[i] == 0) {
            argv[argc++] = buf + start;
            start = i + 1;
        }
    argv[argc] = NULL;
    cli_args a, b;
    FILE *err = stderr;
    if (devnull && !getenv("FUZZ_VERBOSE")) stderr = devnull;
    int r = cli_parse(argc, argv, &a, "usage\n");
    int r2 = cli_parse(argc, argv, &b, "usage\n");
    stderr = err;
    check(r == 0 || r == -1 || r == 2);
    check(r == r2);
    if (r == 0) {
        check(a.n_ctx >= 0 && a.n_threads >= 0 && a.top > 0);
        check(in_argv(a.model, argv, argc) && in_argv(a.prompt, argv, argc) &&
              in_argv(a.file, argv, argc) && in_argv(a.system, argv, argc) &&
              in_argv(a.chat_template, argv, argc));
        check(a.n_predict == b.n_predict && a.n_ctx == b.n_ctx && a.n_threads == b.n_threads &&
              a.top == b.top && a.no_mmap == b.no_mmap && a.sp.seed == b.sp.seed &&
              a.sp.top_k == b.sp.top_k);
    }
    free(buf);
    return 0;
}
