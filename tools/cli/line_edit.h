/* Reading chat's input lines: with line editing and history (libedit, or GNU
 * readline, through the readline API) when stdin is a terminal and the build
 * found one of them (tools/cli/cli.cmake), else plain fgets. */
#ifndef CANDLE_CLI_LINE_EDIT_H
#define CANDLE_CLI_LINE_EDIT_H

/* One line without its newline, malloc'ed; NULL at the end of the input.
 * The prompt goes to stderr, so stdout holds only the replies. Lines read
 * with editing join the history (this process's only: nothing is written). */
char *cli_read_line(const char *prompt);

/* "libedit", "readline" or NULL: what the build links for editing. */
const char *cli_line_edit_name(void);

#endif
