/* Loading and streaming generation shared by run and chat. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"

/* A whole file into a malloc'ed buffer (NUL-terminated); NULL if unreadable. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = -1;
    if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = 0;
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
    }
    if (f) fclose(f);
    return buf;
}

/* The grammar of --grammar FILE, --grammar-text or --json-schema FILE: 0, or
 * 1 after a message. */
static int open_grammar(gen *g, const cli_args *a) {
    const char *text = a->grammar_text, *what = "--grammar-text";
    char *buf = NULL, *gbnf = NULL;
    size_t len = text ? strlen(text) : 0;
    const char *path = a->grammar_file ? a->grammar_file : a->json_schema;
    if (path) {
        what = path;
        if (!(text = buf = slurp(path, &len))) {
            fprintf(stderr, "candle %s: %s %s: cannot read it\n", g->cmd,
                    a->grammar_file ? "--grammar" : "--json-schema", path);
            return 1;
        }
    }
    int r = 0;
    if (a->json_schema) {
        if (candle_json_schema_to_gbnf(text, len, &gbnf)) {
            fprintf(stderr, "candle %s: %s: %s\n", g->cmd, what, candle_last_errmsg());
            free(buf);
            return 1;
        }
        text = gbnf;
        len = strlen(gbnf);
    }
    if (candle_grammar_parse(&g->grammar, text, len) ||
        candle_grammar_vocab_from_tokenizer(&g->gvocab, g->tok) ||
        candle_grammar_state_init(&g->gstate, g->grammar)) {
        fprintf(stderr, "candle %s: %s: %s\n", g->cmd, what, candle_last_errmsg());
        r = 1;
    } else {
        candle_sampler_set_grammar(g->smp, g->gstate, g->gvocab);
    }
    candle_free(gbnf);
    free(buf);
    return r;
}

/* Speculative decoding of --draft-model FILE or --lookup N: 0, or 1 after
 * a message. The draft model gets the target's context and threads. */
/* --lora / --lora-scaled: every adapter loaded for the model and set on the session. */
static int open_lora(gen *g, const cli_args *a) {
    candle_lora_use use[CLI_MAX_LORA];
    for (int i = 0; i < a->n_lora; i++) {
        if (candle_lora_load(&g->lora[i], g->model, a->lora[i].path)) {
            cli_error_file(g->cmd, a->lora[i].path, candle_last_errmsg());
            return 1;
        }
        g->n_lora = i + 1;
        use[i] = (candle_lora_use){g->lora[i], a->lora[i].scale};
    }
    if (candle_session_set_lora(g->sess, use, a->n_lora)) return gen_fail(g, "lora");
    return 0;
}

static int open_spec(gen *g, const cli_args *a, const candle_session_params *sp) {
    candle_spec_params p = candle_spec_default_params();
    if (a->draft_max) p.n_draft = a->draft_max;
    if (a->lookup) p.lookup_ngram = a->lookup;
    p.draft_p_min = a->draft_p_min;
    p.cost_aware = !a->draft_no_timing;
    if (a->draft_model) {
        candle_model_params mp = {.n_threads = a->n_threads, .no_mmap = a->no_mmap, .weight_dtype = a->weight_dtype};
        if (candle_model_load(&g->draft, a->draft_model, &mp)) {
            cli_error_file(g->cmd, a->draft_model, candle_last_errmsg());
            return 1;
        }
        p.draft_model = g->draft;
        p.draft_session = *sp;
        p.draft_sampling = a->sp;
    }
    if (candle_spec_init(&g->spec, g->model, g->tok, &p)) {
        fprintf(stderr, "candle %s: %s%s%s\n", g->cmd, a->draft_model ? a->draft_model : "",
                a->draft_model ? ": " : "", candle_last_errmsg());
        return 1;
    }
    return 0;
}

int gen_spec_context(gen *g, const int32_t *ids, int64_t n) {
    if (!g->spec || !candle_spec_set_context(g->spec, ids, n)) return 0;
    fprintf(stderr, "candle %s: %s\n", g->cmd, candle_last_errmsg());
    return 1;
}

int gen_open(gen *g, const char *cmd, const cli_args *a, int64_t default_ctx) {
    memset(g, 0, sizeof *g);
    g->cmd = cmd;
    char buf[4096];
    const char *path = cli_model_path(a, buf, sizeof buf);
    if (!path) return 1;
    double t0 = cli_now();
    candle_model_params mp = {.n_threads = a->n_threads, .no_mmap = a->no_mmap, .weight_dtype = a->weight_dtype};
    if (candle_model_load(&g->model, path, &mp)) {
        cli_error_file(cmd, path, candle_last_errmsg());
        return 1;
    }
    const candle_model_config *c = candle_model_get_config(g->model);
    g->n_vocab = c->n_vocab;
    if (candle_tokenizer_from_weights(&g->tok, candle_model_weights(g->model))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "tokenizer: %s", candle_last_errmsg());
        cli_error_file(cmd, path, msg);
        return 1;
    }
    int64_t n_ctx = a->n_ctx ? a->n_ctx : default_ctx;
    /* -c is at most the model's training context: past it the positions were
     * never trained (Candle has no RoPE scaling options) and the KV cache
     * would grow for nothing. Clamped with a warning, as the help says. */
    if (c->n_ctx_train > 0 && n_ctx > c->n_ctx_train) {
        if (a->n_ctx)
            fprintf(stderr, "candle %s: warning: -c %lld is above the model's training context of "
                            "%lld; using %lld\n", cmd, (long long)a->n_ctx, (long long)c->n_ctx_train,
                    (long long)c->n_ctx_train);
        n_ctx = c->n_ctx_train;
    }
    candle_session_params sp = {.n_ctx = n_ctx,
                                .kv_type = a->kv_type,
                                .n_threads = a->n_threads};
    if (candle_session_init(&g->sess, g->model, &sp) ||
        candle_sampler_init(&g->smp, (int32_t)g->n_vocab, &a->sp)) {
        fprintf(stderr, "candle %s: %s\n", cmd, candle_last_errmsg());
        return 1;
    }
    if (a->n_lora && open_lora(g, a)) return 1;
    g->logits = malloc((size_t)g->n_vocab * sizeof *g->logits);
    if (!g->logits) {
        fprintf(stderr, "candle %s: out of memory\n", cmd);
        return 1;
    }
    if ((a->grammar_file || a->grammar_text || a->json_schema) && open_grammar(g, a)) return 1;
    if ((a->draft_model || a->lookup) && open_spec(g, a, &sp)) return 1;
    g->t_load = cli_now() - t0;
    return 0;
}

void gen_close(gen *g) {
    free(g->logits);
    candle_spec_free(g->spec);
    candle_model_free(g->draft);
    candle_sampler_free(g->smp);
    candle_grammar_state_free(g->gstate);
    candle_grammar_vocab_free(g->gvocab);
    candle_grammar_free(g->grammar);
    candle_session_free(g->sess);
    for (int i = 0; i < g->n_lora; i++) candle_lora_free(g->lora[i]);
    candle_tokenizer_free(g->tok);
    candle_model_free(g->model);
    memset(g, 0, sizeof *g);
}

int gen_fail(gen *g, const char *what) {
    fprintf(stderr, "candle %s: %s: %s\n", g->cmd, what, candle_session_errmsg(g->sess));
    return 1;
}

int gen_tokenize(gen *g, const char *text, bool add_special, bool parse_special, int32_t **ids,
                 int64_t *n) {
    size_t len = strlen(text);
    int64_t cap = (int64_t)len + 8;
    *ids = malloc((size_t)cap * sizeof **ids);
    if (*ids &&
        !candle_tokenizer_encode(g->tok, text, len, add_special, parse_special, *ids, cap, n) &&
        *n <= cap)
        return 0;
    fprintf(stderr, "candle %s: tokenize: %s\n", g->cmd,
            *ids ? candle_last_errmsg() : "out of memory");
    free(*ids);
    *ids = NULL;
    return 1;
}

static bool stop_set(void *flag) { return *(volatile sig_atomic_t *)flag != 0; }

void gen_set_stop(gen *g, volatile sig_atomic_t *flag) {
    g->stop = flag;
    candle_session_set_abort(g->sess, flag ? stop_set : NULL, (void *)flag);
}

int gen_eval(gen *g, const int32_t *ids, int64_t n, bool ctx_shift, int64_t n_keep) {
    candle_session *s = g->sess;
    g->eval_cancelled = false;
    int64_t room = candle_session_n_ctx(s) - candle_session_pos(s);
    if (n > room && ctx_shift && n < candle_session_n_ctx(s) - n_keep) {
        int64_t n_discard = (candle_session_pos(s) - n_keep) / 2;
        if (n_discard < n - room) n_discard = n - room;
        if (candle_session_shift(s, n_keep, n_discard)) return gen_fail(g, "context shift");
    }
    candle_status st = candle_session_eval(s, ids, n, g->logits, false);
    if (st == CANDLE_ERR_CANCELLED && g->stop && *g->stop) {
        g->eval_cancelled = true;
        return 0;
    }
    if (st) return gen_fail(g, "eval");
    return 0;
}

/* Append token bytes to a growing string. */
static void append(char **text, size_t *len, const char *b, size_t n) {
    char *t = realloc(*text, *len + n + 1);
    if (!t) return;
    memcpy(t + *len, b, n);
    *len += n;
    t[*len] = 0;
    *text = t;
}

/* The next token: sampled from the logits of the last evaluated one, or
 * the next of a speculative step's output (the step evaluates all of it
 * but its last, the pending token). 0, 1 after a message, or 2 when the
 * stop flag cancelled a step's evaluation. */
static int next_token(gen *g, int32_t *queue, int32_t *n_queue, int32_t *at, bool *pending,
                      int32_t last, int32_t *id) {
    if (*at < *n_queue) { /* recorded (history, grammar) by the step */
        *id = queue[(*at)++];
        return 0;
    }
    if (!*pending) {
        if ((*id = candle_sampler_sample(g->smp, g->logits)) < 0) {
            fprintf(stderr, "\ncandle %s: %s\n", g->cmd, candle_last_errmsg());
            return 1;
        }
        candle_sampler_accept(g->smp, *id);
        return 0;
    }
    *at = 0;
    candle_status st = candle_spec_step(g->spec, g->sess, g->smp, last, queue, n_queue);
    if (st == CANDLE_ERR_CANCELLED && g->stop && *g->stop) { /* Ctrl-C: the session as before */
        *n_queue = 0;
        return 2;
    }
    if (st) {
        fprintf(stderr, "\ncandle %s: speculative step: %s\n", g->cmd, candle_last_errmsg());
        return 1;
    }
    *id = queue[(*at)++];
    return 0;
}

int gen_stream(gen *g, const cli_args *a, int64_t n_predict, int64_t n_keep, int64_t *n_out,
               char **text) {
    size_t text_len = 0;
    *n_out = 0;
    g->why = GEN_LIMIT;
    if (g->gstate) candle_grammar_state_reset(g->gstate);
    int32_t queue[CANDLE_SPEC_MAX_DRAFT + 1], n_queue = 0, at = 0, id = -1;
    bool pending = false; /* speculative: id was chosen and is not evaluated yet */
    while (n_predict < 0 || *n_out < n_predict) {
        if (g->stop && *g->stop) {
            g->why = GEN_STOPPED;
            break;
        }
        bool stepped = pending; /* the token comes from a step, which advanced the grammar */
        int nt = next_token(g, queue, &n_queue, &at, &pending, id, &id);
        if (nt == 2) {
            g->why = GEN_STOPPED;
            break;
        }
        if (nt) return 1;
        if (candle_tokenizer_is_eog(g->tok, id)) {
            g->why = GEN_EOG;
            break;
        }
        if (g->gstate && !stepped && candle_grammar_accept_token(g->gstate, g->gvocab, id)) {
            fprintf(stderr, "\ncandle %s: %s\n", g->cmd, candle_last_errmsg());
            return 1;
        }
        char buf[256];
        size_t len = 0;
        if (!candle_tokenizer_token_bytes(g->tok, id, false, buf, sizeof buf, &len)) {
            fwrite(buf, 1, len, stdout);
            fflush(stdout);
            if (len) g->line_open = buf[len - 1] != '\n';
            if (text) append(text, &text_len, buf, len);
        }
        ++*n_out;
        /* a step advanced the matcher over its whole output, and only its
         * last token can complete the grammar */
        bool state_here = !g->spec || at == n_queue;
        if (g->gstate && state_here && candle_grammar_state_done(g->gstate)) { /* only the end can follow */
            g->why = GEN_GRAMMAR;
            break;
        }
        if (n_predict >= 0 && *n_out == n_predict) {
            if (g->gstate && (!state_here || !candle_grammar_state_can_end(g->gstate)))
                fprintf(stderr, "\ncandle %s: stopped after -n %lld tokens, before the grammar "
                                "was complete\n", g->cmd, (long long)n_predict);
            break;
        }
        if (g->spec && at < n_queue) continue; /* evaluated by the step already */
        bool full = candle_session_pos(g->sess) >= candle_session_n_ctx(g->sess);
        if (full && !a->ctx_shift) {
            if (n_predict < 0) { /* "until the end": the context's end counts */
                fprintf(stderr, "\ncandle %s: stopped: the context of %lld tokens is full\n",
                        g->cmd, (long long)candle_session_n_ctx(g->sess));
                g->why = GEN_CTX_FULL;
                break;
            }
            fprintf(stderr,
                    "\ncandle %s: the context of %lld tokens is full after %lld generated "
                    "tokens (use a larger -c or --ctx-shift)\n",
                    g->cmd, (long long)candle_session_n_ctx(g->sess), (long long)*n_out);
            return 1;
        }
        if (g->spec) pending = true; /* the next step evaluates it with the drafts */
        else if (gen_eval(g, &id, 1, a->ctx_shift, n_keep)) return 1;
    }
    return 0;
}
