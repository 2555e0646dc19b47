/* candle run / chat / logits / perplexity. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candle/chat.h"
#include "cli.h"
#include "gen.h"
#include "line_edit.h"
#include "ppl.h"

#define DEFAULT_CTX 2048

static const char *run_usage =
    "usage: candle run [-m MODEL] (-p PROMPT | -f FILE) [-n N] [options]\n"
    "  -m MODEL        GGUF file (default: " CLI_DEFAULT_MODEL ")\n"
    "  -p PROMPT       prompt text (special tokens like <|im_start|> are parsed)\n"
    "  -f FILE         read the prompt from FILE (at most 256 MiB)\n"
    "  -n N            tokens to generate (-1: until end of generation; default -1)\n"
    "  -c CTX          context size (default 2048; above the model's training context\n"
    "                  it is lowered to that, with a warning)\n"
    "  -t THREADS      threads\n"
    "  --temp T        temperature (0 = greedy; default 0.8)\n"
    "  --top-k K --top-p P --min-p P   truncation (defaults 40, 0.95, 0.05)\n"
    "  --repeat-penalty R --presence-penalty P --frequency-penalty F --repeat-last-n N\n"
    "  -s, --seed S    sampler seed (default: random, printed on stderr as \"seed: S\";\n"
    "                  -1: random)\n"
    "  --grammar FILE  constrain the output to a GBNF grammar (llama.cpp's syntax)\n"
    "  --grammar-text G  the same from text: --grammar-text 'root ::= \"yes\" | \"no\"'\n"
    "  --json-schema FILE  constrain the output to JSON valid for a schema (types,\n"
    "                  properties, required, enum, const, items, anyOf; others refused)\n"
    "  --ctx-shift     drop older context instead of stopping when it is full\n"
    "  -ctk, -ctv T    KV cache type: f32 (default), f16, q8_0 or q4_0 (head_dim a\n"
    "                  multiple of 32); K and V share one type (--kv-f16 = f16)\n"
    "  --no-mmap       read weights into memory instead of mapping the file\n"
    "  --lora FILE     apply a LoRA adapter: llama.cpp's GGUF LoRA or a PEFT directory\n"
    "                  (adapter_config.json + adapter_model.safetensors); repeatable\n"
    "  --lora-scaled FILE S  the same at scale S (--lora: 1)\n"
    "Speculative decoding (greedy output as without it; sampling keeps its distribution):\n"
    "  --lookup N      draft by prompt lookup: the tokens that followed the latest earlier\n"
    "                  occurrence of the last N tokens\n"
    "  -md, --draft-model FILE  draft with a smaller model of the same vocabulary\n"
    "  --draft-max K   tokens drafted per step, at most (1..64; default 8); with --temp 0\n"
    "                  each step's length is chosen from measured step times and the\n"
    "                  recent acceptance (0 when drafting would not pay)\n"
    "  --draft-no-timing  the lengths from the acceptance alone, as when sampling\n"
    "  --draft-p-min P  the draft model stops drafting at a token it gives less than P\n"
    "                  (default 0: never)\n"
    "Writes only the generated text to stdout, then a newline unless it ends with one\n"
    "or a grammar or schema shaped it; the seed and timings go to stderr. Ctrl-C stops\n"
    "the generation between two tokens (the text so far and the timings are written,\n"
    "exit status 130); a second Ctrl-C ends it at once.\n";

static char *read_file(const char *path, size_t *len);

static void report(const gen *g, int64_t n_prompt, double t_prompt, int64_t n_gen, double t_gen) {
    fprintf(stderr, "\nload time: %.1f ms\n", g->t_load * 1e3);
    fprintf(stderr, "prompt: %lld tokens in %.1f ms, %.2f tokens/s\n", (long long)n_prompt,
            t_prompt * 1e3, t_prompt > 0 ? (double)n_prompt / t_prompt : 0.0);
    fprintf(stderr, "generation: %lld tokens in %.1f ms, %.2f tokens/s\n", (long long)n_gen,
            t_gen * 1e3, t_gen > 0 ? (double)n_gen / t_gen : 0.0);
    if (g->spec) {
        candle_spec_stats st = candle_spec_get_stats(g->spec);
        fprintf(stderr, "speculative: %lld steps, %lld drafted, %lld accepted (%.1f%%), %.2f tokens/step\n",
                (long long)st.n_steps, (long long)st.n_drafted, (long long)st.n_accepted,
                st.n_drafted ? 100.0 * (double)st.n_accepted / (double)st.n_drafted : 0.0,
                st.n_steps ? (double)st.n_tokens / (double)st.n_steps : 0.0);
    }
}

/* A prompt that cannot fit is an error before any work. */
static int check_prompt(gen *g, int64_t n) {
    int64_t n_ctx = candle_session_n_ctx(g->sess);
    if (n == 0) {
        fprintf(stderr, "candle %s: the prompt is empty\n", g->cmd);
        return 1;
    }
    if (n > n_ctx) {
        fprintf(stderr, "candle %s: the prompt is %lld tokens, longer than the context of %lld "
                        "(use a larger -c)\n",
                g->cmd, (long long)n, (long long)n_ctx);
        return 1;
    }
    return 0;
}

/* Ctrl-C while generating (run's text, a chat reply) stops between two
 * tokens, or a prompt's evaluation between two of its batches (gen_set_stop),
 * so the text so far and its timings come out. A second Ctrl-C before the
 * first took effect, or one at chat's prompt, leaves by the signal's default
 * action (exit status 130 in a shell), as llama.cpp does. The line-editing
 * library restores the terminal before it passes the signal on. */
static volatile sig_atomic_t sigint_stop, sigint_soft;

static void on_sigint(int sig) {
    if (sigint_soft && !sigint_stop) {
        sigint_stop = 1;
        return;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void catch_sigint(gen *g) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    /* a write blocked on a full pipe or terminal resumes, then the loop
     * sees the flag */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    gen_set_stop(g, &sigint_stop);
}

/* Exit status of a run stopped by SIGINT, as a shell reports one. */
#define EXIT_SIGINT 130

int cmd_run(int argc, char **argv) {
    cli_args a;
    int r = cli_parse(argc, argv, &a, run_usage);
    if (r) return r < 0 ? 0 : r;
    cli_choose_seed(&a);
    if (!a.prompt == !a.file) {
        fprintf(stderr, "candle run: give one of -p PROMPT and -f FILE\n%s", run_usage);
        return 2;
    }
    char *text = NULL;
    size_t text_len = 0;
    if (a.file && !(text = read_file(a.file, &text_len))) {
        fprintf(stderr, "candle run: cannot read %s\n", a.file);
        return 1;
    }
    if (text && strlen(text) != text_len) {
        fprintf(stderr, "candle run: %s holds a NUL byte: not a text\n", a.file);
        free(text);
        return 1;
    }
    gen g;
    int32_t *ids = NULL;
    int64_t n = 0, n_gen = 0;
    if ((r = gen_open(&g, "run", &a, DEFAULT_CTX)) ||
        (r = gen_tokenize(&g, text ? text : a.prompt, true, true, &ids, &n)) || (r = check_prompt(&g, n))) {
        free(ids);
        free(text);
        gen_close(&g);
        return r;
    }
    free(text);
    for (int64_t i = 0; i < n; i++) candle_sampler_accept(g.smp, ids[i]);
    sigint_stop = 0;
    sigint_soft = 1;
    catch_sigint(&g);
    double t0 = cli_now();
    r = gen_eval(&g, ids, n, false, 0);
    bool prompt_stopped = g.eval_cancelled; /* gen_stream's evals set it again */
    if (!r && !prompt_stopped) r = gen_spec_context(&g, ids, n);
    double t1 = cli_now();
    int64_t n_keep = candle_tokenizer_bos(g.tok) >= 0 && ids[0] == candle_tokenizer_bos(g.tok);
    if (!r && a.n_predict != 0) r = gen_stream(&g, &a, a.n_predict, n_keep, &n_gen, NULL);
    double t2 = cli_now();
    /* From here a Ctrl-C ends the process: the rest is quick. */
    sigint_soft = 0;
    /* the text as a whole line: a shell prompt no longer starts after it.
     * Not under a grammar: there stdout is exactly a sentence of it. */
    if (g.line_open && !g.gstate) fputc('\n', stdout);
    fflush(stdout);
    if (!r && sigint_stop) {
        if (prompt_stopped) fprintf(stderr, "[stopped by Ctrl-C while evaluating the prompt]");
        else fprintf(stderr, "[generation stopped by Ctrl-C after %lld tokens]", (long long)n_gen);
        r = EXIT_SIGINT;
    }
    report(&g, prompt_stopped ? 0 : n, t1 - t0, n_gen, t2 - t1);
    free(ids);
    gen_close(&g);
    signal(SIGINT, SIG_DFL);
    return r;
}

/* ---- chat ---- */

#define STR_(x) #x
#define STR(x) STR_(x)
#define CHAT_N_STR STR(CLI_CHAT_N_PREDICT)
#if defined(CANDLE_HAVE_LIBEDIT)
#define LINE_EDIT_STR "on (libedit)"
#elif defined(CANDLE_HAVE_READLINE)
#define LINE_EDIT_STR "on (GNU readline)"
#else
#define LINE_EDIT_STR "off (built without libedit: scripts/install-cli-deps.sh)"
#endif

static const char *chat_usage =
    "usage: candle chat [-m MODEL] [-sys SYSTEM] [--chat-template NAME] [-n N] [options of run]\n"
    "Reads one user message per line from stdin and streams the replies.\n"
    "  -sys, --system S  system prompt\n"
    "  -n N            reply limit in tokens (default " CHAT_N_STR "; -1: none)\n"
    "  -s, --seed S    sampler seed (default: random, printed on stderr)\n"
    "Templates: chatml, llama2, llama3, zephyr, gemma, phi3 (default: from the model;\n"
    "a base model without one is refused: use candle run).\n"
    "Type /exit (or end the input) to leave, /reset to start over. Ctrl-C stops the\n"
    "reply being written and keeps the conversation; Ctrl-C at the prompt leaves.\n"
    "Line editing and history: " LINE_EDIT_STR ".\n";

typedef struct chat_state {
    candle_chat_msg *msgs;
    size_t n, cap;
    int32_t *prev; /* tokens in the session */
    int64_t n_prev;
} chat_state;

static bool chat_push(chat_state *c, const char *role, const char *content) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        candle_chat_msg *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return false;
        c->msgs = m;
        c->cap = cap;
    }
    char *copy = strdup(content);
    if (!copy) return false;
    c->msgs[c->n++] = (candle_chat_msg){.role = role, .content = copy};
    return true;
}

static void chat_clear(chat_state *c, size_t keep) {
    while (c->n > keep) free((char *)c->msgs[--c->n].content);
}

/* Evaluate the rendered conversation, reusing the cached common prefix. */
static int chat_eval(gen *g, chat_state *c, int32_t *ids, int64_t n) {
    int64_t same = 0;
    while (same < n && same < c->n_prev && same < candle_session_pos(g->sess) &&
           ids[same] == c->prev[same])
        same++;
    if (same == n) same--; /* the last token must be evaluated for its logits */
    if (candle_session_truncate(g->sess, same)) return gen_fail(g, "truncate");
    if (check_prompt(g, n)) return 1;
    if (gen_eval(g, ids + same, n - same, false, 0)) return 1;
    free(c->prev);
    c->prev = ids;
    c->n_prev = n;
    return 0;
}

static int chat_turn(gen *g, const candle_chat_template *t, chat_state *c, const cli_args *a) {
    char *prompt = NULL, *reply = NULL;
    int32_t *ids = NULL;
    int64_t n = 0, n_gen = 0;
    if (candle_chat_apply(t, c->msgs, c->n, true, &prompt)) {
        fprintf(stderr, "candle chat: %s\n", candle_last_errmsg());
        return 1;
    }
    sigint_stop = 0;
    sigint_soft = 1;
    int r = gen_tokenize(g, prompt, true, true, &ids, &n);
    free(prompt);
    if (!r && (r = chat_eval(g, c, ids, n))) free(ids);
    if (!r) r = gen_stream(g, a, a->n_predict, 0, &n_gen, &reply);
    sigint_soft = 0;
    fputs("\n", stdout);
    fflush(stdout);
    if (!r && g->why == GEN_STOPPED)
        fprintf(stderr, "[reply stopped by Ctrl-C after %lld tokens; Ctrl-C at the prompt leaves]\n",
                (long long)n_gen);
    else if (!r && g->why == GEN_LIMIT && a->n_predict > 0)
        fprintf(stderr, "[reply cut at the limit of -n %lld tokens]\n", (long long)a->n_predict);
    /* an interrupted reply stays in the conversation as far as it went */
    if (!r && !chat_push(c, "assistant", reply ? reply : "")) r = 1;
    free(reply);
    return r;
}

static int chat_loop(gen *g, const candle_chat_template *t, const cli_args *a) {
    chat_state c = {0};
    size_t base = 0;
    int r = 0;
    if (a->system && !(r = !chat_push(&c, "system", a->system))) base = 1;
    char *line;
    while (!r && (line = cli_read_line("> "))) {
        line[strcspn(line, "\r\n")] = 0;
        bool done = !strcmp(line, "/exit");
        if (done) {
        } else if (!strcmp(line, "/reset")) {
            chat_clear(&c, base);
        } else if (line[0]) {
            if (!chat_push(&c, "user", line)) r = 1;
            else r = chat_turn(g, t, &c, a);
        }
        free(line);
        if (done) break;
    }
    chat_clear(&c, 0);
    free(c.msgs);
    free(c.prev);
    return r;
}

int cmd_chat(int argc, char **argv) {
    cli_args a;
    int r = cli_parse(argc, argv, &a, chat_usage);
    if (r) return r < 0 ? 0 : r;
    cli_choose_seed(&a);
    gen g;
    if ((r = gen_open(&g, "chat", &a, DEFAULT_CTX))) {
        gen_close(&g);
        return r;
    }
    const char *tmpl = NULL;
    size_t len = 0;
    candle_weights_get_str(candle_model_weights(g.model), "tokenizer.chat_template", &tmpl, &len);
    if (!tmpl && !a.chat_template) {
        char buf[4096], esc[1024];
        const char *path = cli_model_path(&a, buf, sizeof buf);
        if (path) candle_escape_text(path, strlen(path), esc, sizeof esc);
        fprintf(stderr,
                "candle chat: %s has no chat template (no tokenizer.chat_template): it looks like "
                "a base model, which continues a text rather than answering messages. Use "
                "`candle run -p TEXT` with it, or, if it was tuned on a known format, name it "
                "with --chat-template (chatml, llama2, llama3, zephyr, gemma, phi3).\n",
                path ? esc : "the model");
        gen_close(&g);
        return 1;
    }
    candle_chat_template t;
    if (candle_chat_template_init(&t, tmpl, len, a.chat_template)) {
        fprintf(stderr, "candle chat: %s\n", candle_last_errmsg());
        gen_close(&g);
        return 1;
    }
    fprintf(stderr, "chat template: %s\n", candle_chat_format_name(t.format));
    catch_sigint(&g);
    r = chat_loop(&g, &t, &a);
    signal(SIGINT, SIG_DFL);
    candle_chat_template_free(&t);
    gen_close(&g);
    return r;
}

/* ---- logits ---- */

static const char *logits_usage =
    "usage: candle logits [-m MODEL] -p PROMPT [--top K] [-c CTX] [-t THREADS]\n"
    "Prints one JSON line per prompt position: its token and the top-K token ids\n"
    "and logits of the next-token distribution.\n";

typedef struct scored {
    int32_t id;
    float logit;
} scored;

static int cmp_scored(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static void print_top(int64_t pos, int32_t tok, const float *row, int64_t n_vocab, int k,
                      scored *tmp) {
    for (int64_t i = 0; i < n_vocab; i++) tmp[i] = (scored){(int32_t)i, row[i]};
    qsort(tmp, (size_t)n_vocab, sizeof *tmp, cmp_scored);
    printf("{\"pos\": %lld, \"token\": %d, \"top\": [", (long long)pos, (int)tok);
    for (int i = 0; i < k && i < n_vocab; i++)
        printf("%s[%d, %.6f]", i ? ", " : "", (int)tmp[i].id, (double)tmp[i].logit);
    printf("]}\n");
}

int cmd_logits(int argc, char **argv) {
    cli_args a;
    int r = cli_parse(argc, argv, &a, logits_usage);
    if (r) return r < 0 ? 0 : r;
    if (!a.prompt) {
        fprintf(stderr, "candle logits: -p PROMPT is required\n%s", logits_usage);
        return 2;
    }
    gen g;
    int32_t *ids = NULL;
    int64_t n = 0;
    float *all = NULL;
    scored *tmp = NULL;
    if (!(r = gen_open(&g, "logits", &a, DEFAULT_CTX)) &&
        !(r = gen_tokenize(&g, a.prompt, true, true, &ids, &n)) && !(r = check_prompt(&g, n))) {
        all = malloc((size_t)(n * g.n_vocab) * sizeof *all);
        tmp = malloc((size_t)g.n_vocab * sizeof *tmp);
        if (!all || !tmp) r = 1, fprintf(stderr, "candle logits: out of memory\n");
        else if (candle_session_eval(g.sess, ids, n, all, true)) r = gen_fail(&g, "eval");
        for (int64_t i = 0; !r && i < n; i++)
            print_top(i, ids[i], all + i * g.n_vocab, g.n_vocab, a.top, tmp);
    }
    free(tmp);
    free(all);
    free(ids);
    gen_close(&g);
    return r;
}

/* ---- perplexity ---- */

static const char *ppl_usage =
    "usage: candle perplexity [-m MODEL] -f TEXT [-c CTX] [-t THREADS]\n"
    "       candle perplexity [-m BASE] -f TEXT [-c CTX] --kl-divergence-base FILE\n"
    "       candle perplexity -m MODEL [-f TEXT] --kl-divergence-base FILE --kl-divergence\n"
    "Splits the text into chunks of CTX tokens (default 512) and scores the second\n"
    "half of each; ends with a line PPL = <value>.\n"
    "  --kl-divergence-base FILE  alone: also save the model's distributions at the\n"
    "                  scored positions to FILE (with the text's tokens, the context\n"
    "                  and the vocabulary size); with --kl-divergence: read them and\n"
    "                  compare this model with them (mean KL divergence, its\n"
    "                  percentiles, top-1 agreement, both PPLs and their ratio, RMS\n"
    "                  delta p). The text and -c come from FILE; a -f or -c given must\n"
    "                  match it.\n";

/* Text inputs are bounded: `-f /dev/zero` read without end. */
#define MAX_TEXT_BYTES ((size_t)256 << 20)

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n > MAX_TEXT_BYTES) {
            fprintf(stderr, "candle: %s: over the limit of %zu MiB of text\n", path,
                    MAX_TEXT_BYTES >> 20);
            free(buf);
            buf = NULL;
            break;
        }
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static void progress(int64_t done, int64_t total, double nll, int64_t count) {
    int width = 30, fill = total ? (int)(width * done / total) : width;
    fprintf(stderr, "\r[");
    for (int i = 0; i < width; i++) fputc(i < fill ? '=' : (i == fill ? '>' : ' '), stderr);
    fprintf(stderr, "] %lld/%lld chunks, PPL %.4f", (long long)done, (long long)total,
            count ? exp(nll / (double)count) : 0.0);
    fflush(stderr);
}

/* -log p(next) from a logit row. */
static double nll_of(const float *row, int64_t n_vocab, int32_t next) {
    double mx = row[0], sum = 0;
    for (int64_t i = 1; i < n_vocab; i++)
        if (row[i] > mx) mx = row[i];
    for (int64_t i = 0; i < n_vocab; i++) sum += exp((double)row[i] - mx);
    return log(sum) + mx - (double)row[next];
}

void ppl_layout(int64_t n, int64_t n_ctx, int64_t *n_chunk, int64_t *len) {
    *n_chunk = n >= n_ctx ? n / n_ctx : 1;
    *len = n >= n_ctx ? n_ctx : n;
}

int ppl_eval(gen *g, const int32_t *ids, int64_t n_chunk, int64_t len, ppl_row_fn fn, void *ctx) {
    int32_t bos = candle_tokenizer_bos(g->tok);
    float *logits = malloc((size_t)(len * g->n_vocab) * sizeof *logits);
    int32_t *chunk = malloc((size_t)len * sizeof *chunk);
    if (!logits || !chunk) {
        free(logits);
        free(chunk);
        fprintf(stderr, "candle perplexity: out of memory\n");
        return 1;
    }
    double nll = 0;
    int64_t count = 0;
    int r = 0;
    progress(0, n_chunk, 0, 0);
    for (int64_t c = 0; c < n_chunk && !r; c++) {
        memcpy(chunk, ids + c * len, (size_t)len * sizeof *chunk);
        if (bos >= 0 && ids[0] == bos) chunk[0] = bos; /* every chunk starts like a text */
        candle_session_reset(g->sess);
        if (candle_session_eval(g->sess, chunk, len, logits, true)) {
            r = gen_fail(g, "eval");
            break;
        }
        for (int64_t j = len / 2; j < len - 1 && !r; j++, count++) {
            const float *row = logits + j * g->n_vocab;
            double e = nll_of(row, g->n_vocab, chunk[j + 1]);
            nll += e;
            if (fn) r = fn(ctx, row, chunk[j + 1], e);
        }
        progress(c + 1, n_chunk, nll, count);
    }
    fputc('\n', stderr);
    if (!r && !count) r = 1, fprintf(stderr, "candle perplexity: no token scored\n");
    if (!r) printf("PPL = %.4f\n", exp(nll / (double)count));
    free(logits);
    free(chunk);
    return r;
}

int cmd_perplexity(int argc, char **argv) {
    cli_args a;
    int r = cli_parse(argc, argv, &a, ppl_usage);
    if (r) return r < 0 ? 0 : r;
    if (a.kld && !a.kld_base) {
        fprintf(stderr, "candle perplexity: --kl-divergence needs --kl-divergence-base FILE\n%s", ppl_usage);
        return 2;
    }
    if (a.kld) {
        size_t tlen = 0;
        char *t = NULL;
        if (a.file && !(t = read_file(a.file, &tlen))) {
            fprintf(stderr, "candle perplexity: cannot read %s\n", a.file);
            return 1;
        }
        r = kld_compare(&a, t);
        free(t);
        return r;
    }
    if (!a.file) {
        fprintf(stderr, "candle perplexity: -f TEXT is required\n%s", ppl_usage);
        return 2;
    }
    /* the second half of a chunk is scored, less its last token: fewer than
     * 4 tokens score nothing (PPL = -nan) */
    if (a.n_ctx && a.n_ctx < 4) {
        fprintf(stderr, "candle perplexity: -c %lld: chunks need at least 4 tokens\n", (long long)a.n_ctx);
        return 2;
    }
    size_t len;
    char *text = read_file(a.file, &len);
    if (!text) {
        fprintf(stderr, "candle perplexity: cannot read %s\n", a.file);
        return 1;
    }
    gen g;
    int32_t *ids = NULL;
    int64_t n = 0, n_chunk, clen;
    if (!(r = gen_open(&g, "perplexity", &a, 512)) && !(r = gen_tokenize(&g, text, true, false, &ids, &n))) {
        if (n < 4) r = 1, fprintf(stderr, "candle perplexity: %s is too short (%lld tokens)\n",
                                  a.file, (long long)n);
        else {
            ppl_layout(n, candle_session_n_ctx(g.sess), &n_chunk, &clen);
            r = a.kld_base ? kld_save(&g, a.kld_base, ids, n, n_chunk, clen)
                           : ppl_eval(&g, ids, n_chunk, clen, NULL, NULL);
        }
    }
    free(ids);
    free(text);
    gen_close(&g);
    return r;
}
