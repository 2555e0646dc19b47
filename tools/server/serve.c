/* candle serve: load the model, start the scheduler and the HTTP daemon,
 * and shut both down in order on SIGINT/SIGTERM. */
#include <malloc.h>
#include <math.h>
#include <microhttpd.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/args.h"
#include "../cli/cli.h"
#include "candle/kv_pool.h"
#include "candle/speculative.h"
#include "server.h"

static const char usage[] =
    "usage: candle serve [-m MODEL[:ALIAS]]... [--models-dir DIR] [options]\n"
    "  -m PATH[:ALIAS]      a model (GGUF file or model folder); repeat for several: a\n"
    "                       request's \"model\" picks one (404 for an unknown name), the\n"
    "                       first answers requests without one. ALIAS: the name clients\n"
    "                       use (default: the file name without .gguf, or the folder's)\n"
    "  --models-dir DIR     serve every *.gguf file and model folder in DIR too\n"
    "  --models-max N       models loaded at once at most (default: all); with several,\n"
    "                       each loads on its first request and the least recently used\n"
    "                       idle one is unloaded to make room (503 when all are in use)\n"
    "  --mem-budget BYTES   weights + KV pools of the loaded models at most (K/M/G suffix)\n"
    "  --host ADDR          address to bind (default 127.0.0.1: loopback only)\n"
    "  --port N             TCP port (default 8080; 0 picks a free one)\n"
    "  --parallel N, -np N  sequences generated at once (default 4; Whisper: transcriptions)\n"
    "  -c N, --ctx-size N   context per sequence (default 2048, at most the model's)\n"
    "  --kv-mem BYTES       KV cache memory the running requests may reserve (K/M/G suffix)\n"
    "  -ctk, -ctv T         KV cache type, f32 (default), f16, bf16, q8_0 or q4_0 (K and V\n"
    "                       share it; q8_0/q4_0 need head_dim a multiple of 32)\n"
    "  --queue N            requests that may wait for a slot; 429 beyond (default 64)\n"
    "  --api-key KEY        require Authorization: Bearer KEY (or env CANDLE_API_KEY)\n"
    "  --max-body BYTES     largest request body (default 1M)\n"
    "  --max-body-mem BYTES request bodies held in memory at once, all together; 503 beyond\n"
    "                       (default 64M; on a Whisper model enough for --parallel + 1\n"
    "                       uploads of --max-audio-bytes)\n"
    "  --header-timeout S   seconds a connection has to send its headers; 408 after (default 10)\n"
    "  --body-timeout S     seconds it then has to send its whole body (default 60)\n"
    "  --conn-per-ip N      connections one client address may hold; 429 beyond (default 64,\n"
    "                       0: no bound)\n"
    "  --max-conns N        connections with complete headers served at once (default 512; a\n"
    "                       thread each); connections still sending headers hold no thread\n"
    "  --max-audio-bytes N  largest audio file of /v1/audio/* on a Whisper model (default 25M,\n"
    "                       as OpenAI's; 413 above, from Content-Length before the upload)\n"
    "  --prefill-chunk N    prompt tokens a sequence evaluates per step (default 64)\n"
    "  -b N, --batch-size N token rows of one step (default and limit 256): every running\n"
    "                       request's token goes in, prompt chunks fill up the rest\n"
    "  --itl-stretch X      while requests decode, a step adds prompt rows only up to X times\n"
    "                       the decodes' own step time (estimated; default 1.5; 0: up to -b)\n"
    "  --lookup N           speculative decoding by prompt lookup: draft the tokens that\n"
    "                       followed the latest earlier match of the context's last N tokens\n"
    "                       and verify them in the step (requests without a grammar or\n"
    "                       logprobs; output as without it; acceptance in /metrics)\n"
    "  --draft-model PATH   speculative decoding with a draft model: a smaller decoder of the\n"
    "                       same vocabulary drafts the tokens (requests without a grammar or\n"
    "                       logprobs; output as without it; a single -m; not with --lookup)\n"
    "  --draft-max K        most tokens drafted per step (default 8, at most 64)\n"
    "  --draft-p-min P      a draft model's drafting stops at a token it gives less than\n"
    "                       probability P (default 0: never)\n"
    "  --draft-no-timing    greedy requests' draft lengths from the acceptance alone, as\n"
    "                       sampled requests' (by default each step's lengths maximise its\n"
    "                       expected tokens per second, from the measured step times)\n"
    "  --chat-template NAME force a chat format (chatml, llama2, llama3, ...)\n"
    "  --alias NAME         the first -m model's name in the API (as -m PATH:ALIAS)\n"
    "  -t N                 threads per evaluation\n"
    "  --dtype T            f32 (weights as stored), f16, bf16 or q8_0 (bfloat16: the CPU's bf16 dot\n"
    "                       products where it has them): weight matrices converted at load\n"
    "  --max-batch-tokens N an encoder's embeddings, rerank and classify requests are batched\n"
    "                       across clients up to N tokens per computation (default 16384, as\n"
    "                       TEI's; an input longer runs alone)\n"
    "  --lora PATH          a LoRA adapter (llama.cpp's GGUF LoRA or a PEFT directory) at scale 1;\n"
    "                       repeatable, ids 0.. in order (GET/POST /lora-adapters, a request's\n"
    "                       \"lora\": [{\"id\": 0, \"scale\": 0.5}])\n"
    "  --lora-scaled PATH S the same at scale S\n"
    "  --lora-admin         allow POST /lora-adapters/load {\"path\", \"scale\"}: load another adapter\n"
    "                       from a path on this machine while serving (any client with the API key)\n"
    "  --quiet              no access log (a line per request on stderr: method, path,\n"
    "                       status, generated tokens, seconds)\n";

#define SERVE_MAX_MODELS 64

typedef struct serve_args {
    const char *models[SERVE_MAX_MODELS]; /* -m, in order */
    int n_models;
    const char *dirs[SERVE_MAX_MODELS]; /* --models-dir */
    int n_dirs;
    int models_max;
    int64_t mem_budget;
    const char *host, *api_key, *chat_template, *alias;
    int port, parallel, queue, prefill_chunk, batch_size, n_threads, per_ip, max_conns;
    int lookup, draft_max; /* prompt-lookup speculation: n-gram size (0: off), tokens per step */
    const char *draft_model; /* --draft-model, or NULL */
    double draft_p_min;
    bool draft_no_timing; /* --draft-no-timing: greedy requests keep the acceptance schedule too */
    double header_timeout, body_timeout;
    int64_t max_body_mem;
    bool quiet; /* no access log */
    double itl_stretch;
    int64_t n_ctx, kv_mem, max_body, max_audio, max_batch_tokens;
    candle_dtype kv_type; /* -ctk / -ctv */
    candle_dtype weight_dtype; /* --dtype */
    const char *lora[SRV_MAX_LORA]; /* --lora / --lora-scaled, in order */
    float lora_scale[SRV_MAX_LORA];
    int n_lora;
    bool lora_admin; /* POST /lora-adapters/load */
} serve_args;

static bool parse_size(const char *s, int64_t *out) {
    char *end;
    double v = strtod(s, &end);
    double mul = *end == 'K' || *end == 'k' ? 1024.0
                 : *end == 'M' || *end == 'm' ? 1048576.0
                 : *end == 'G' || *end == 'g' ? 1073741824.0
                                              : 1.0;
    if (mul != 1.0) end++;
    if (end == s || *end || !(v >= 0) || v * mul > 9e18) return false;
    *out = (int64_t)(v * mul);
    return true;
}

/* 0 (no bound), or a factor of at least 1. */
static bool parse_stretch(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v == 0 || (v >= 1 && v <= 100))) return false;
    *out = v;
    return true;
}

/* A timeout: more than 0, at most a day. */
static bool parse_seconds(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v > 0 && v <= 86400)) return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, serve_args *a) {
    *a = (serve_args){.host = "127.0.0.1", .port = 8080, .parallel = 4, .queue = 64,
                      .prefill_chunk = 64, .batch_size = SRV_STEP_TOKENS, .itl_stretch = 1.5,
                      .n_ctx = 2048, .max_body = 1 << 20, .max_audio = 25 << 20, .max_body_mem = -1,
                      .header_timeout = 10, .body_timeout = 60, .per_ip = 64, .max_conns = 512,
                      .api_key = getenv("CANDLE_API_KEY")};
    const char *ctk = NULL, *ctv = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(usage, stdout);
            return -1;
        }
        if (!strcmp(o, "--quiet")) {
            a->quiet = true;
            continue;
        }
        if (!strcmp(o, "--lora-admin")) {
            a->lora_admin = true;
            continue;
        }
        if (!strcmp(o, "--draft-no-timing")) {
            a->draft_no_timing = true;
            continue;
        }
        if (!strcmp(o, "--lora") || !strcmp(o, "--lora-scaled")) {
            bool scaled = o[6] == '-';
            char *end = NULL;
            if (i + 1 + scaled >= argc || a->n_lora == SRV_MAX_LORA) {
                fprintf(stderr, "candle serve: %s needs %s (at most %d adapters)\n", o,
                        scaled ? "PATH SCALE" : "PATH", SRV_MAX_LORA);
                return 2;
            }
            float sc = scaled ? strtof(argv[i + 2], &end) : 1.0f;
            if (scaled && (!*argv[i + 2] || *end || !isfinite(sc))) {
                fprintf(stderr, "candle serve: bad scale for --lora-scaled: '%s'\n", argv[i + 2]);
                return 2;
            }
            a->lora[a->n_lora] = argv[i + 1];
            a->lora_scale[a->n_lora++] = sc;
            i += 1 + scaled;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "candle serve: %s needs a value (or is unknown)\n%s", o, usage);
            return 2;
        }
        const char *v = argv[++i];
        int64_t n = 0;
        bool num = parse_size(v, &n);
        bool ok = true;
        if (!strcmp(o, "-m") || !strcmp(o, "--model"))
            ok = a->n_models < SERVE_MAX_MODELS && (a->models[a->n_models++] = v, true);
        else if (!strcmp(o, "--models-dir")) ok = a->n_dirs < SERVE_MAX_MODELS && (a->dirs[a->n_dirs++] = v, true);
        else if (!strcmp(o, "--models-max")) ok = num && n >= 1 && n <= 100000 && (a->models_max = (int)n, true);
        else if (!strcmp(o, "--mem-budget")) ok = num && n >= 1 && (a->mem_budget = n, true);
        else if (!strcmp(o, "--host")) a->host = v;
        else if (!strcmp(o, "--api-key")) a->api_key = v;
        else if (!strcmp(o, "--chat-template")) a->chat_template = v;
        else if (!strcmp(o, "--alias")) a->alias = v;
        else if (!strcmp(o, "--port")) ok = num && n <= 65535 && (a->port = (int)n, true);
        else if (!strcmp(o, "--parallel") || !strcmp(o, "-np"))
            ok = num && n >= 1 && n <= 256 && (a->parallel = (int)n, true);
        else if (!strcmp(o, "--queue")) ok = num && n <= 100000 && (a->queue = (int)n, true);
        else if (!strcmp(o, "--lookup")) ok = num && n >= 1 && n <= 64 && (a->lookup = (int)n, true);
        else if (!strcmp(o, "--draft-model")) a->draft_model = v;
        else if (!strcmp(o, "--draft-p-min")) {
            char *end;
            a->draft_p_min = strtod(v, &end);
            ok = end != v && !*end && a->draft_p_min >= 0 && a->draft_p_min <= 1;
        } else if (!strcmp(o, "--draft-max"))
            ok = num && n >= 1 && n <= CANDLE_SPEC_MAX_DRAFT && (a->draft_max = (int)n, true);
        else if (!strcmp(o, "--prefill-chunk"))
            ok = num && n >= 1 && n <= 4096 && (a->prefill_chunk = (int)n, true);
        else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size"))
            ok = num && n >= 1 && n <= SRV_STEP_TOKENS && (a->batch_size = (int)n, true);
        else if (!strcmp(o, "--itl-stretch")) ok = parse_stretch(v, &a->itl_stretch);
        else if (!strcmp(o, "-t")) ok = num && n <= 256 && (a->n_threads = (int)n, true);
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) ok = num && n >= 8 && (a->n_ctx = n, true);
        else if (!strcmp(o, "--kv-mem")) ok = num && (a->kv_mem = n, true);
        else if (!strcmp(o, "--max-body")) ok = num && n >= 64 && (a->max_body = n, true);
        else if (!strcmp(o, "--max-body-mem")) ok = num && n >= 64 && (a->max_body_mem = n, true);
        else if (!strcmp(o, "--header-timeout")) ok = parse_seconds(v, &a->header_timeout);
        else if (!strcmp(o, "--body-timeout")) ok = parse_seconds(v, &a->body_timeout);
        else if (!strcmp(o, "--conn-per-ip")) ok = num && n <= 100000 && (a->per_ip = (int)n, true);
        else if (!strcmp(o, "--max-conns")) ok = num && n >= 1 && n <= 10000 && (a->max_conns = (int)n, true);
        else if (!strcmp(o, "--max-audio-bytes")) ok = num && n >= 1 && n <= (1ll << 32) && (a->max_audio = n, true);
        else if (!strcmp(o, "--max-batch-tokens"))
            ok = num && n >= 1 && n <= (1 << 24) && (a->max_batch_tokens = n, true);
        else if (!strcmp(o, "--dtype")) ok = cli_weight_dtype(v, &a->weight_dtype);
        else if (!strcmp(o, "-ctk") || !strcmp(o, "--cache-type-k")) ctk = v;
        else if (!strcmp(o, "-ctv") || !strcmp(o, "--cache-type-v")) ctv = v;
        else {
            fprintf(stderr, "candle serve: unknown option %s\n%s", o, usage);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "candle serve: bad value for %s: '%s'\n", o, v);
            return 2;
        }
    }
    if (a->queue < 1) a->queue = 1;
    if (a->max_body_mem >= 0 && a->max_body_mem < a->max_body) {
        fprintf(stderr, "candle serve: --max-body-mem %lld is less than --max-body %lld\n",
                (long long)a->max_body_mem, (long long)a->max_body);
        return 2;
    }
    if (cli_kv_pair("serve", ctk, ctv, &a->kv_type)) return 2;
    if (a->draft_no_timing && !a->draft_model && !a->lookup) {
        fprintf(stderr, "candle serve: --draft-no-timing needs --draft-model or --lookup\n");
        return 2;
    }
    if (a->draft_model && a->lookup) {
        fprintf(stderr, "candle serve: --draft-model and --lookup are exclusive: one kind of drafts\n");
        return 2;
    }
    if (a->draft_model && (a->n_models > 1 || a->n_dirs > 0)) {
        fprintf(stderr, "candle serve: --draft-model needs a single -m model (not several, nor --models-dir)\n");
        return 2;
    }
    return 0;
}

/* -m PATH:ALIAS: the path and the alias, unless PATH:ALIAS is itself there
 * (or the alias would hold a '/', a path's colon then). */
static void split_alias(const char *v, char *path, size_t cap, const char **alias) {
    snprintf(path, cap, "%s", v);
    *alias = NULL;
    char *colon = strrchr(path, ':');
    if (!colon || !access(v, F_OK) || strchr(colon + 1, '/') || !colon[1] || colon == path) return;
    *colon = 0;
    *alias = v + (colon - path) + 1;
}

/* Wait for SIGINT/SIGTERM. Meanwhile, whenever the server is idle after
 * some work, hand freed heap memory back to the system (issue 22, finding 5:
 * RSS plateaus near its idle level instead of keeping each burst's peak). */
static int wait_signal(srv_ctx *c, const sigset_t *set) {
    uint64_t seen = 0;
    for (;;) {
        struct timespec ts = {1, 0};
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig > 0) return sig;
        srv_metrics *m = &c->metrics;
        pthread_mutex_lock(&m->mu);
        uint64_t done = 0;
        for (int e = 0; e < SRV_EP_COUNT; e++)
            for (int k = 0; k < SRV_N_CODES; k++) done += m->requests[e][k];
        pthread_mutex_unlock(&m->mu);
        bool idle = !srv_models_busy(c);
        if (idle && done != seen && atomic_load(&c->body_mem) == 0) {
            malloc_trim(0);
            seen = done;
        }
    }
}

/* Descriptors for the connections the gate holds: the soft limit raised to
 * the hard one (at most 65536); returns it. */
static int raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return 1024;
    rlim_t want = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
}

/* 127.0.0.0/8, ::1 or localhost: reachable from this machine only. */
static bool is_loopback(const char *host) {
    return !strcmp(host, "localhost") || !strcmp(host, "::1") || !strcmp(host, "[::1]") ||
           !strncmp(host, "127.", 4);
}

int cmd_serve(int argc, char **argv) {
    serve_args a;
    int r = parse_args(argc, argv, &a);
    if (r) return r < 0 ? 0 : r;
    char buf[4096];
    if (!a.n_models && !a.n_dirs) {
        cli_args ca = {0};
        const char *path = cli_model_path(&ca, buf, sizeof buf);
        if (!path) return 1;
        a.models[a.n_models++] = path;
    }
    srv_jalloc_install(); /* before any thread parses a request */
    if (!a.api_key && !is_loopback(a.host))
        fprintf(stderr, "candle serve: WARNING: listening on %s without an API key: anyone who can reach "
                        "this address can use the model (--api-key KEY or CANDLE_API_KEY)\n", a.host);

    /* Signals are taken by sigwait below; every thread started after this
     * inherits the mask. Writes to a closed socket must not kill us. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Memory (issue 22, finding 5): glibc gives each thread that mallocs its
     * own arena, and a thread per connection left one burst's temporaries in
     * dozens of arenas; two arenas, and large blocks (bodies, a long prompt's
     * tokenizer work) in their own mappings, returned when freed. */
    mallopt(M_ARENA_MAX, 2);
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
    int nofile = raise_nofile();

    srv_ctx *c = calloc(1, sizeof *c);
    if (!c) return 1;
    srv_metrics_init(&c->metrics);
    pthread_mutex_init(&c->big_prompt, NULL);
    candle_model *draft = NULL;
    if (a.draft_model) {
        candle_model_params mp = {.n_threads = a.n_threads, .weight_dtype = a.weight_dtype};
        if (candle_model_load(&draft, a.draft_model, &mp)) {
            fprintf(stderr, "candle serve: --draft-model %s: %s\n", a.draft_model, candle_last_errmsg());
            return 2;
        }
        if (candle_model_get_config(draft)->kind != CANDLE_MODEL_DECODER_LM) {
            fprintf(stderr, "candle serve: --draft-model %s: not a decoder language model\n", a.draft_model);
            candle_model_free(draft);
            return 2;
        }
    }
    srv_load_params lp = {.n_threads = a.n_threads, .parallel = a.parallel, .queue = a.queue,
                          .prefill_chunk = a.prefill_chunk, .batch_size = a.batch_size, .n_ctx = a.n_ctx,
                          .kv_mem = a.kv_mem, .itl_stretch = a.itl_stretch, .kv_type = a.kv_type,
                          .chat_template = a.chat_template, .lookup_ngram = a.lookup,
                          .n_draft = a.draft_max ? a.draft_max : 8, .weight_dtype = a.weight_dtype,
                          .draft_model = draft, .draft_p_min = (float)a.draft_p_min,
                          .draft_no_timing = a.draft_no_timing, .max_batch_tokens = a.max_batch_tokens};
    srv_models_init(c, &lp);
    /* the gate holds what the descriptors left by the daemon's allow */
    int pending = nofile - a.max_conns - 64;
    c->cfg = (srv_config){.host = a.host, .port = a.port, .api_key = a.api_key, .quiet = a.quiet,
                          .max_body = (size_t)a.max_body, .max_body_mem = (size_t)a.max_body_mem,
                          .max_audio_bytes = (size_t)a.max_audio,
                          .header_timeout = a.header_timeout, .body_timeout = a.body_timeout,
                          .per_ip = a.per_ip, .max_conns = a.max_conns,
                          .max_pending = pending < 64 ? 64 : pending > 4096 ? 4096 : pending};
    struct MHD_Daemon *d = NULL;
    for (int i = 0; !r && i < a.n_models; i++) {
        const char *alias;
        split_alias(a.models[i], buf, sizeof buf, &alias);
        if (!alias && i == 0) alias = a.alias;
        if (!srv_models_add(c, buf, alias)) r = 1;
    }
    for (int i = 0; !r && i < a.n_dirs; i++)
        if (!srv_models_add_dir(c, a.dirs[i])) r = 1;
    /* one -m alone serves as it always has: loaded now, whatever a request
     * names; several (or a folder) are a router */
    c->router = c->n_models > 1 || a.n_dirs > 0;
    c->models_max = a.models_max;
    c->mem_budget = a.mem_budget;
    if (!r && srv_models_have_speech(c) && srv_audio_init(c, a.parallel, a.queue, a.n_threads)) {
        fprintf(stderr, "candle serve: out of memory\n");
        r = 1;
    }
    if (!r && a.max_body_mem < 0) {
        /* Several full-size uploads at once must fit, or 64M would turn a
         * third 25 MB upload into a 503. */
        size_t audio = (size_t)(a.parallel + 1) * srv_body_limit(c, "/v1/audio/transcriptions");
        size_t mem = c->audio && audio > (64u << 20) ? audio : 64u << 20;
        c->cfg.max_body_mem = mem > (size_t)a.max_body ? mem : (size_t)a.max_body;
    }
    srv_model *e = !r && !c->router ? c->models[0] : NULL;
    if (e && !srv_model_load_now(c, e)) {
        fprintf(stderr, "candle serve: %s\n", e->error);
        r = strstr(e->error, "--kv-mem") || strstr(e->error, "--draft-model") ? 2 : 1;
    }
    if (!r && draft && (e->enc || e->whisper)) {
        fprintf(stderr, "candle serve: --draft-model: the model is not a decoder language model\n");
        r = 2;
    }
    if (!r && (a.n_lora || a.lora_admin)) {
        if (!e || e->enc || e->whisper) {
            fprintf(stderr, "candle serve: --lora: %s\n",
                    !e ? "adapters need a single -m model (not several, nor --models-dir)"
                       : "the model is not a decoder language model");
            r = 2;
        } else if (srv_lora_open(c, e->model, a.lora, a.lora_scale, a.n_lora, a.lora_admin)) {
            r = 1;
        }
    }
    if (!r && !(d = srv_http_start(c))) r = 1;
    if (!r) {
        const char *key = a.api_key ? ", API key required" : "";
        if (c->router) {
            char lim[96] = "";
            if (a.models_max) snprintf(lim, sizeof lim, ", at most %d loaded", a.models_max);
            if (a.mem_budget)
                snprintf(lim + strlen(lim), sizeof lim - strlen(lim), ", --mem-budget %lld",
                         (long long)a.mem_budget);
            fprintf(stderr, "candle serve: %d models, loaded on demand%s, on http://%s:%d%s\n", c->n_models, lim,
                    a.host, c->bound_port, key);
            for (int i = 0; i < c->n_models; i++)
                fprintf(stderr, "candle serve:   %s%s: %s\n", c->models[i]->id, i == c->default_model ? " (default)" : "",
                        c->models[i]->path);
        } else if (e->whisper) {
            fprintf(stderr, "candle serve: %s (whisper, %d transcriptions at once) on http://%s:%d%s\n",
                    e->id, a.parallel, a.host, c->bound_port, key);
        } else if (e->enc) {
            fprintf(stderr, "candle serve: %s (encoder, %lld dimensions) on http://%s:%d%s\n",
                    e->id, (long long)candle_encoder_dim(e->enc), a.host, c->bound_port, key);
        } else {
            fprintf(stderr,
                    "candle serve: %s on http://%s:%d (%d slots x %lld context, queue %d%s)\n",
                    e->id, a.host, c->bound_port, a.parallel,
                    (long long)e->max_tokens_limit, a.queue, key);
        }
        int sig = wait_signal(c, &set);
        /* Waiting requests get 503; running ones finish (transcriptions:
         * the daemon's stop joins their threads). */
        fprintf(stderr, "candle serve: %s: finishing running requests\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        atomic_store(&c->shutting_down, true);
        srv_models_drain(c, 10.0);
    }
    /* The schedulers fail what is left, so handlers blocked on a request
     * return and the daemon's connection threads can be joined; the models
     * go once no handler can reach them. */
    srv_models_stop(c);
    if (d) srv_http_stop(c, d);
    srv_lora_free(c); /* after every request that could use them */
    srv_models_free(c);
    candle_model_free(draft); /* after the scheduler that drafted with it */
    srv_audio_free(c);
    pthread_mutex_destroy(&c->metrics.mu);
    pthread_mutex_destroy(&c->big_prompt);
    free(c);
    if (!r) fprintf(stderr, "candle serve: stopped\n");
    return r;
}
