/* chat's line input: the readline API of libedit or GNU readline, else fgets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "line_edit.h"

#if defined(CANDLE_HAVE_LIBEDIT)
#include <editline/readline.h>
#define EDIT_NAME "libedit"
#elif defined(CANDLE_HAVE_READLINE)
#include <readline/history.h>
#include <readline/readline.h>
#define EDIT_NAME "readline"
#endif

const char *cli_line_edit_name(void) {
#ifdef EDIT_NAME
    return EDIT_NAME;
#else
    return NULL;
#endif
}

/* Lines of any length: a pasted paragraph is one message. */
static char *read_plain(const char *prompt) {
    fputs(prompt, stderr);
    fflush(stderr);
    size_t cap = 256, n = 0;
    char *line = malloc(cap);
    int c = EOF;
    while (line && (c = getchar()) != EOF && c != '\n') {
        if (n + 1 == cap) {
            char *nl = realloc(line, cap * 2);
            if (!nl) {
                free(line);
                return NULL;
            }
            line = nl;
            cap *= 2;
        }
        line[n++] = (char)c;
    }
    if (!line || (c == EOF && n == 0)) {
        free(line);
        return NULL;
    }
    if (n && line[n - 1] == '\r') n--;
    line[n] = 0;
    return line;
}

char *cli_read_line(const char *prompt) {
#ifdef EDIT_NAME
    if (isatty(STDIN_FILENO) && isatty(STDERR_FILENO)) {
        static int ready;
        if (!ready) {
            ready = 1;
            rl_outstream = stderr; /* the prompt and the echo stay off stdout */
            using_history();
        }
        char *line = readline(prompt);
        if (line && *line) add_history(line);
        return line;
    }
#endif
    return read_plain(prompt);
}
