/* `candle serve`: an OpenAI-compatible HTTP server.
 *
 * Threads: libmicrohttpd runs one thread per connection (handlers may block
 * while a generation runs); one scheduler thread owns every model session
 * and steps all running requests a token at a time. The two sides meet in
 * srv_req, whose output fields are guarded by its mutex. */
#ifndef CANDLE_SERVER_H
#define CANDLE_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "candle/candle.h"
#include "candle/grammar.h"
#include "gate.h"

#define SRV_MAX_STOP 4
#define SRV_MAX_CHOICES 16 /* n of a request at most (and at most --parallel) */
#define SRV_MAX_LORA 16    /* --lora adapters at most */

/* One generated token's log-probabilities (requests with logprobs). */
typedef struct srv_lp {
    candle_token_logprob tok;
    int32_t n_top;
    /* bytes of the generated text before and after the token's text; end is
     * SIZE_MAX while the token's text is not out yet (part of a character
     * that later tokens complete) */
    size_t start, end;
    candle_token_logprob top[CANDLE_MAX_TOP_LOGPROBS];
} srv_lp;

/* One generation request, shared by its HTTP handler and the scheduler
 * (reference-counted: whichever lets go last frees it). */
typedef struct srv_req {
    /* Input, written by the handler before submission, read-only after. */
    int32_t *prompt;
    int64_t n_prompt;
    int64_t max_tokens;
    candle_sampler_params sp;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    bool ignore_eos;
    candle_grammar *grammar; /* response_format's constraint, or NULL (owned) */
    bool grammar_lazy;       /* grammar applies from where the reply starts a tool call */
    int n_logprobs;          /* alternatives per token to report; -1: no logprobs */
    int32_t *bias_tok;       /* [n_bias] logit_bias (owned) */
    float *bias_val;         /* [n_bias] */
    int n_bias;
    /* tools: the reply is parsed for calls in tool_fmt (a stream gives its
     * content and calls as its tool stream reads them); tool_parallel:
     * several calls kept, else the first. */
    bool tools, tool_parallel;
    candle_tool_format tool_fmt;
    /* The LoRA adapters this request applies (lora.c: its "lora" field, else
     * the global scales), non-zero scales only; requests of one set share a
     * forward, others take their own (scheduler.c). */
    candle_lora_use lora[SRV_MAX_LORA];
    int n_lora;
    /* lora.c: the adapters of lora[] are held (a reference each, so an
     * unload waits for this request) until the request is freed, which
     * calls lora_release; NULL: none held (a choice borrows its owner's). */
    void (*lora_release)(struct srv_req *r);
    struct srv_loras *lora_src;
    /* A choice of a request with n > 1, after the first: prompt, stop, grammar
     * and bias are the owner's (borrowed, not freed), and this request holds a
     * reference to it, so they outlive every choice. */
    struct srv_req *owner;
    /* A stream of n > 1 choices is a group request: choices[n_choices]
     * (references held) do the work; the group's text gets every choice's
     * text as it comes (so http.c's reader wakes and copies as for one), and
     * it is done, with n_gen their sum, when all are (n_done). A choice's
     * group is set before submission and cleared, under the choice's mu,
     * when the group is freed; the scheduler tells it under that mu. */
    struct srv_req **choices;
    int n_choices, n_done;
    struct srv_req *group;

    /* Output, under mu; cv is signalled on every change. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *text; /* everything emitted so far (stop sequences cut off) */
    size_t len, cap;
    int64_t n_gen;      /* tokens generated */
    int64_t n_cached;   /* prompt tokens reused from a slot's cache */
    const char *finish; /* "stop" or "length" once done */
    bool done;
    int err_status; /* nonzero: the request failed with this HTTP status */
    char errmsg[256];
    /* with n_logprobs >= 0: an entry per generated token (end of generation
     * tokens and the tokens of a cut stop sequence left out), each added in
     * the same critical section as the text that ends it, so a reader that
     * has seen text up to byte L has every entry whose end <= L */
    srv_lp *lp;
    size_t n_lp, lp_cap;

    /* The stream reader's own cursor (srv_stream_chunk; no lock): entries
     * and text bytes sent, and the code points of those bytes. */
    size_t lp_sent, text_sent, cp_bytes, cp_count;
    bool role_sent; /* a group's choice: its first chat chunk (with the role) is out */
    candle_tool_stream *tool_stream; /* with tools: the calls read from the stream so far (owned) */
    size_t tool_heads;               /* ... and how many of them have been streamed */

    atomic_bool cancelled; /* client gone: the scheduler drops it */
    atomic_int refs;
    double t_submit, t_first, t_last; /* seconds, monotonic */
} srv_req;

srv_req *srv_req_new(void);
/* Another choice of r (n > 1): r's input, borrowed (see owner), with seed + k. */
srv_req *srv_req_choice(srv_req *r, int k);
void srv_req_unref(srv_req *r);

/* Prometheus metrics (metrics.c). */
#define SRV_HIST_N 14
#define SRV_N_CODES 10
typedef struct srv_hist {
    const double *le; /* SRV_HIST_N upper bounds; set by srv_metrics_init */
    double sum;
    uint64_t count;
    uint64_t bucket[SRV_HIST_N]; /* cumulative counts at the bounds */
} srv_hist;

/* The kinds of an encoder's batches (enc_batch.c): a batch holds one kind. */
typedef enum srv_enc_kind { SRV_ENC_EMBED = 0, SRV_ENC_CLASSIFY, SRV_ENC_RERANK, SRV_ENC_KINDS } srv_enc_kind;

enum { SRV_EP_COMPLETIONS, SRV_EP_CHAT, SRV_EP_EMBEDDINGS, SRV_EP_MODELS, SRV_EP_RERANK, SRV_EP_CLASSIFY,
       SRV_EP_AUDIO, SRV_EP_OTHER, SRV_EP_COUNT };

typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests[SRV_EP_COUNT][SRV_N_CODES]; /* [endpoint][index of the status in srv_codes] */
    uint64_t prompt_tokens, gen_tokens, cached_tokens;
    uint64_t spec_drafted, spec_accepted; /* speculative tokens verified, and kept */
    srv_hist ttft, itl, e2e;
    /* per scheduler step: its forward's token rows, how many of them were
     * prompt rows, and its seconds (sampling included) */
    srv_hist step_rows, step_prefill_rows, step_time;
    /* per encoder batch, by its kind: its tokens, its inputs (texts or
     * pairs), the requests it took inputs from, and its library call's
     * seconds */
    srv_hist enc_tokens[SRV_ENC_KINDS], enc_inputs[SRV_ENC_KINDS], enc_requests[SRV_ENC_KINDS],
        enc_time[SRV_ENC_KINDS];
    /* per encoder request, by kind: seconds from its queueing to the start
     * of the first batch that takes its inputs */
    srv_hist enc_queue[SRV_ENC_KINDS];
    /* gauges, set by the scheduler */
    int64_t queue_depth, active, blocks_used, blocks_reserved, blocks_total;
    int64_t prefill_budget; /* prompt rows the last step beside decodes could take */
} srv_metrics;

void srv_metrics_init(srv_metrics *m);
void srv_metrics_request(srv_metrics *m, int endpoint, int status);
void srv_metrics_observe(srv_metrics *m, srv_hist *h, double value);
void srv_metrics_step(srv_metrics *m, int64_t rows, int64_t prefill_rows, double seconds);
/* One encoder batch of a kind (enc_batch.c): its tokens, inputs, the
 * requests it took them from, and its forward's seconds. */
void srv_metrics_enc_batch(srv_metrics *m, srv_enc_kind kind, int64_t tokens, int64_t inputs, int64_t requests,
                           double seconds);
/* Add src's counters and histograms (and with gauges its gauges) to dst. */
void srv_metrics_add(srv_metrics *dst, srv_metrics *src, bool gauges);
/* Back to zero (an unloaded model's, its counts carried elsewhere). */
void srv_metrics_reset(srv_metrics *m);
/* Prometheus text exposition into a malloc'ed string. */
char *srv_metrics_render(srv_metrics *m);

/* The scheduler (scheduler.c). */
/* Token rows per step at most. The quantized matmuls take up to 256 rows on their
 * integer kernels (QMM_MAX_M_TILE, fast_matmul_quant.c), whose result for a
 * row does not depend on the other rows; more would go to the dequantizing
 * GEMM, whose last bits differ: a request's greedy tokens would then depend
 * on who shares its steps. */
#define SRV_STEP_TOKENS 256

typedef struct srv_sched srv_sched;

typedef struct srv_sched_params {
    int n_slots;
    int64_t n_ctx;      /* per slot */
    int64_t kv_mem;     /* bytes of KV cache blocks that may be reserved; 0 = all */
    int queue_cap;      /* waiting requests beyond the running ones */
    int prefill_chunk;  /* prompt tokens per slot per step */
    int batch_size;     /* token rows per step, at most SRV_STEP_TOKENS */
    /* A step with prompt rows beside running decodes may take this many times
     * the decodes' own step (estimated); <= 0: no bound but batch_size. */
    double itl_stretch;
    int n_threads;
    candle_dtype kv_type; /* of the paged KV pool: f32 (0), f16, bf16, q8_0 or q4_0 */
    /* Prompt-lookup speculative decoding (--lookup N): the n-gram size
     * matched against the request's context, 0: off; n_draft: the most
     * tokens drafted per step (1..CANDLE_SPEC_MAX_DRAFT). */
    int lookup_ngram, n_draft;
    /* Or a draft model's drafts (--draft-model; its vocabulary the model's,
     * checked by the caller): it reads each drafting request's context in
     * its own pool and drafts n_draft tokens at most, stopping at one it
     * gives less than draft_p_min (0: never). */
    const candle_model *draft_model;
    float draft_p_min;
    /* --draft-no-timing: greedy requests' draft lengths from the acceptance
     * schedule, as sampled ones', instead of the cost model (spec_cost.h) */
    bool draft_no_timing;
} srv_sched_params;

candle_status srv_sched_start(srv_sched **out, const candle_model *m, const candle_tokenizer *tok,
                              const srv_sched_params *p, srv_metrics *metrics);
/* Queue a request (takes a reference). Returns 0, or the HTTP status that
 * refuses it (429 queue full, 503 shutting down) with a message in r. */
int srv_sched_submit(srv_sched *s, srv_req *r);
/* Refuse new work and wait (at most grace seconds) for running requests. */
void srv_sched_drain(srv_sched *s, double grace);
void srv_sched_stop(srv_sched *s);
int64_t srv_sched_n_ctx(const srv_sched *s);
int srv_sched_n_slots(const srv_sched *s);

/* The server as a whole (http.c). */
typedef struct srv_config {
    const char *host;
    int port;
    const char *api_key; /* NULL: no authentication */
    size_t max_body;
    bool quiet; /* no access log line per request on stderr */
    /* Bounds against slow or greedy clients (issue 22, findings 3 and 4). */
    size_t max_body_mem;   /* request bodies held in memory at once, all together */
    double header_timeout; /* seconds from accept to the end of the headers (the gate) */
    double body_timeout;   /* seconds from the headers to the end of the body */
    int per_ip;            /* connections per client address; 0: no bound */
    int max_conns;         /* connections the daemon serves (past the gate) */
    int max_pending;       /* connections the gate holds waiting for their headers */
    size_t max_audio_bytes; /* largest audio file of /v1/audio/... (413 above) */
} srv_config;

typedef struct srv_reply srv_reply;

/* Served models (models.c). A registry entry is one model clients name in
 * a request's `model`: registered at startup (-m, --models-dir) without
 * loading, loaded by the first request that names it, and unloaded, least
 * recently used first, when another load needs its place (--models-max,
 * --mem-budget). */
typedef enum { SRV_KIND_UNKNOWN, SRV_KIND_DECODER, SRV_KIND_ENCODER, SRV_KIND_SPEECH } srv_kind;
typedef enum { SRV_MODEL_UNLOADED, SRV_MODEL_LOADING, SRV_MODEL_LOADED, SRV_MODEL_FAILED } srv_model_state;

typedef struct srv_model {
    char *id;   /* what requests name: the file's name without .gguf, the folder's, or the alias */
    char *path;
    /* Under the registry's mu. */
    srv_kind kind;         /* UNKNOWN until loaded, unless the path tells (Whisper, sentence-transformers) */
    srv_model_state state;
    char error[512];       /* FAILED: why the last load failed */
    int refs;              /* requests using it (a stream until its end): never unloaded while > 0 */
    double last_use;       /* srv_now() of the last acquire or release: the LRU order */
    size_t bytes;          /* loaded: weights + KV pool; else the estimate a load is checked with */
    /* The loaded objects: written by the loader before the state becomes
     * LOADED, read-only while the entry is held, freed at unload. */
    candle_model *model;     /* a decoder's, or the encoder's (owned by enc) */
    candle_encoder *enc;     /* an encoder model: /v1/embeddings, rerank, classify */
    pthread_mutex_t enc_mu;  /* one encoder computation at a time (a batch) */
    struct srv_enc_batch *batch; /* its embeddings/classify/rerank batcher (enc_batch.c): made by the first request */
    candle_tokenizer *tok;
    candle_chat_template chat;
    bool have_chat;
    candle_whisper *whisper; /* a speech model: /v1/audio/... (transcribe.c) */
    srv_sched *sched;
    int64_t max_tokens_limit; /* a decoder's context per request */
    srv_metrics metrics;      /* its scheduler's counters and gauges (summed into /metrics) */
    bool borrowed;            /* the objects are the caller's (srv_model_adopt): never freed */
} srv_model;

/* How entries load: the serve options every model shares. */
typedef struct srv_load_params {
    int n_threads, parallel, queue, prefill_chunk, batch_size;
    int64_t n_ctx, kv_mem;
    double itl_stretch;
    candle_dtype kv_type;
    const char *chat_template; /* forced for every decoder (--chat-template), or NULL */
    int lookup_ngram, n_draft; /* prompt-lookup speculation (srv_sched_params) */
    const candle_model *draft_model; /* --draft-model (srv_sched_params), or NULL */
    float draft_p_min;
    bool draft_no_timing; /* --draft-no-timing (srv_sched_params) */
    candle_dtype weight_dtype; /* --dtype: every model's weight matrices converted at load */
    int64_t max_batch_tokens;  /* --max-batch-tokens: an encoder batch's tokens (0: SRV_MAX_BATCH_TOKENS) */
} srv_load_params;

typedef struct srv_ctx {
    srv_config cfg;
    /* The registry. router: several models, or --models-dir: a request's
     * model must name one (404 otherwise); without it the one model answers
     * whatever a request names, as before. */
    srv_model **models;
    int n_models, default_model;
    bool router;
    int models_max;      /* loaded (or loading) at once at most; 0: no bound */
    int64_t mem_budget;  /* bytes the loaded models' weights and KV pools may take; 0: no bound */
    srv_load_params load;
    pthread_mutex_t models_mu;
    pthread_cond_t models_cv; /* a load ended */
    uint64_t n_loads, n_unloads, n_load_failures;
    srv_metrics retired; /* counters of the schedulers of models since unloaded */
    struct srv_audio *audio; /* the speech models' concurrency gate (one for all) */
    srv_metrics metrics;
    atomic_bool shutting_down;
    atomic_long next_id;
    atomic_size_t body_mem;      /* bytes of request bodies held now (max_body_mem) */
    pthread_mutex_t big_prompt;  /* one long prompt tokenized at a time */
    int bound_port;              /* the port listened on (--port 0 picks one) */
    struct srv_gate *gate;
    struct srv_loras *loras;     /* --lora adapters (lora.c), or NULL */
} srv_ctx;

/* Set up c's registry (empty) with how its models load. */
void srv_models_init(srv_ctx *c, const srv_load_params *lp);
/* Register a model at path as id (NULL: from the path) without loading it;
 * false with a message on stderr (a duplicate id, a path not there). */
bool srv_models_add(srv_ctx *c, const char *path, const char *id);
/* Every *.gguf file and model folder (config.json, model.bin or
 * modules.json) in dir, in name order; false with a message on stderr. */
bool srv_models_add_dir(srv_ctx *c, const char *dir);
/* An entry for objects loaded elsewhere (white-box tests and fuzzers): LOADED,
 * borrowed; the caller fills its fields. NULL on memory. */
srv_model *srv_model_adopt(srv_ctx *c, const char *id, srv_kind kind);
/* Load the entry now (startup of a single model); false with e->error. */
bool srv_model_load_now(srv_ctx *c, srv_model *e);
/* The entry a request's model names (NULL or "": the default), loaded and
 * held; NULL after replying: 404 model_not_found, 503 when no room can be
 * made or while shutting down, 500 when its load fails. */
srv_model *srv_model_acquire(srv_ctx *c, const char *name, srv_reply *out);
void srv_model_release(srv_ctx *c, srv_model *e);
/* GET /v1/models and /v1/models/{id}. */
void srv_models_list(srv_ctx *c, const char *url, srv_reply *out);
bool srv_is_models_url(const char *url);
/* POST /models/load and /models/unload {"model": NAME}, as llama-server's
 * router: load it now (room made as for a request), or unload it now (400
 * when not loaded, 503 while requests use it); {"success": true}. */
bool srv_is_models_admin_url(const char *url);
void srv_models_admin(srv_ctx *c, const char *url, json_t *req, srv_reply *out);
/* /metrics: the server's metrics with every scheduler's summed, and the
 * registry's gauges and counters. malloc'ed. */
char *srv_models_metrics(srv_ctx *c);
/* Requests are running on some model. */
bool srv_models_busy(srv_ctx *c);
/* Is any registered model a speech model (audio uploads are taken)? */
bool srv_models_have_speech(const srv_ctx *c);
/* Shutdown: refuse new work on every scheduler and wait (at most grace
 * seconds in all) for running requests. */
void srv_models_drain(srv_ctx *c, double grace);
/* Stop every scheduler, failing what is left (handlers waiting on it return). */
void srv_models_stop(srv_ctx *c);
/* Free every entry and the registry (no handler left running). */
void srv_models_free(srv_ctx *c);

double srv_now(void);
/* Wait on cv (mu held) at most ms milliseconds. */
void srv_timedwait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms);

/* Start the HTTP daemon and its gate; NULL on failure (message on stderr). */
struct MHD_Daemon *srv_http_start(srv_ctx *c);
/* Stop accepting, then stop the daemon (its connections closed). */
void srv_http_stop(srv_ctx *c, struct MHD_Daemon *d);

/* The gate (gate.c): accepts connections and hands each to the daemon once
 * its header block is complete and valid; refuses the rest in OpenAI's
 * shape. */
typedef struct srv_gate srv_gate;
typedef struct srv_gate_params {
    double header_timeout;
    int per_ip, max_pending, max_conns;
} srv_gate_params;
/* lfd: the listening socket (non-blocking; the gate closes it). */
srv_gate *srv_gate_start(srv_ctx *c, int lfd, const srv_gate_params *p);
candle_status srv_gate_run(srv_gate *g, struct MHD_Daemon *d);
void srv_gate_stop(srv_gate *g);
void srv_gate_free(srv_gate *g);
/* MHD_OPTION_NOTIFY_CONNECTION's callback: the daemon's connections count
 * toward their address's bound until they close. */
#ifdef MHD_VERSION
void srv_gate_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                     enum MHD_ConnectionNotificationCode code);
#endif


/* Request handlers (handlers.c): they return the HTTP status and a
 * malloc'ed JSON body, or for a stream hand back the request to stream. */
struct srv_reply {
    int status;
    char *body;        /* JSON, malloc'ed */
    srv_req *stream;   /* non-NULL: stream this request as SSE instead */
    bool chat;         /* shape of the stream's chunks */
    bool include_usage;
    char id[48];
    int64_t tokens; /* generated tokens of a finished reply, for the access log; -1: none */
    const char *content_type; /* of body; NULL: application/json */
    /* The entry the request ran on. With a stream: held (a reference) until
     * the stream ends, when http.c releases it; srv_stream_chunk reads its
     * tokenizer and id. */
    srv_model *model;
};

/* fd: the client socket, polled for a hang-up while waiting. */
void srv_handle(srv_ctx *c, const char *method, const char *url, const char *body, size_t len,
                int fd, srv_reply *out);
/* Has the client closed its socket? (never blocks) */
bool srv_peer_gone(int fd);
char *srv_error_json(int status, const char *msg, const char *param, const char *code);

/* Encoder requests' JSON without the heap (jalloc.c): srv_jalloc_install
 * once before serving makes jansson's allocator route a thread's objects
 * to an arena between srv_jparse_begin and srv_jparse_end; they must all
 * be released (json_decref) before the end. srv_json_dumps is json_dumps
 * on the heap (what free() takes) whatever the routing; the server calls
 * it instead of json_dumps. Without the install the calls do nothing. */
void srv_jalloc_install(void);
void srv_jparse_begin(void);
void srv_jparse_end(void);
char *srv_json_dumps(const json_t *j, size_t flags);
/* out's status and body: a JSON value (taken), or an error in OpenAI's shape. */
void srv_reply_json(srv_reply *out, int status, json_t *j);
/* An optional boolean field of a request into *v (absent or null: kept);
 * false after replying 400 for another type. */
bool srv_get_bool(json_t *o, const char *k, bool *v, srv_reply *out);
void srv_reply_error(srv_reply *out, int status, const char *param, const char *code,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Tool calling (toolcalls.c). A request's tools, tool_choice and
 * parallel_tool_calls, checked. */
typedef struct srv_tools {
    char *tools;    /* compact JSON of the tools array; NULL: none, or tool_choice "none" */
    char *only;     /* tool_choice naming a function: its name */
    bool required;  /* "required" or named: generation is constrained to calls */
    bool parallel;  /* parallel_tool_calls (default true) */
} srv_tools;
/* false after replying 400 (OpenAI's shape) for a bad field; chat: the
 * endpoint takes tools (the legacy completions refuse them). */
bool srv_tools_parse(json_t *o, bool chat, srv_tools *t, srv_reply *out);
/* A constraint's GBNF (gbnf, taken; st: how making it went) parsed into *g;
 * false after replying: 500 on memory, else a 400 unsupported_parameter
 * naming param with the library's message. */
bool srv_grammar_parse(candle_status st, char *gbnf, const char *param, candle_grammar **g, srv_reply *out);
/* For required/named: the grammar of the calls in format f into *g. */
bool srv_tools_grammar(const srv_tools *t, candle_tool_format f, candle_grammar **g, srv_reply *out);
void srv_tools_free(srv_tools *t);
/* messages[index]'s tool_calls (OpenAI's shape, arguments a string) into
 * *calls (ids and names borrowed from msg, arguments owned; free with
 * srv_tools_msg_calls_free); false after replying 400. */
bool srv_tools_msg_calls(json_t *msg, size_t index, candle_chat_tool_call **calls, size_t *n, srv_reply *out);
void srv_tools_msg_calls_free(candle_chat_tool_call *calls, size_t n);
/* A reply's calls as OpenAI's message.tool_calls (ids "call_..."; the first
 * only unless parallel), or NULL when it holds none; *calls gets the parse
 * (content: the text outside the calls), freed with candle_tool_calls_free. */
json_t *srv_tool_calls_json(const char *text, size_t len, candle_tool_format f, bool parallel,
                            candle_tool_calls *calls);
/* prefix and 24 hex digits into buf: unique per seq and not guessable from
 * one another (a per-process random key through a 64-bit mix of seq), as
 * OpenAI's ids are. */
void srv_unique_id(char *buf, size_t n, const char *prefix, uint64_t seq);
/* A unique, unguessable id "call_<24 hex>" into buf (>= 32 bytes). */
void srv_tool_call_id(char *buf, size_t n);

/* LoRA adapters (lora.c). Load paths[n] for c->model at start (0, or 1
 * after a message); admin: POST /lora-adapters/load may add more. Free
 * them after the scheduler stopped. */
typedef struct srv_loras srv_loras;
/* The adapters onto m, the one model served (--lora needs a single -m). */
int srv_lora_open(srv_ctx *c, const candle_model *m, const char *const *paths, const float *scales, int n,
                  bool admin);
void srv_lora_free(srv_ctx *c);
/* GET /lora-adapters, POST /lora-adapters and POST /lora-adapters/load. */
bool srv_is_lora_url(const char *url);
void srv_lora_handle(srv_ctx *c, const char *method, const char *url, const char *body, size_t len,
                     srv_reply *out);
/* The request's adapter set into r (its "lora" field, else the global
 * scales); false after replying 400. */
bool srv_lora_request(srv_ctx *c, json_t *o, srv_req *r, srv_reply *out);

/* Batching of an encoder's requests across clients (enc_batch.c), by a
 * token budget as text-embeddings-inference does: each request tokenizes
 * its inputs itself (its errors are its own), queues them, and waits; a
 * thread that finds no batch running takes queued inputs in arrival order
 * up to the budget (an input over it alone), among requests of the same
 * kind (embeddings of one dimensions, classify, rerank), runs them in one
 * token-level library call, hands each request its rows and wakes the
 * waiters. A request's inputs may span batches. Jobs and the batch's
 * buffers are kept per model and reused. */
#define SRV_MAX_BATCH_TOKENS 16384
typedef struct srv_enc_job {
    srv_enc_kind kind;
    int64_t n, dim;    /* inputs; floats per row (dimensions, labels, 1 score) */
    int32_t *tok;      /* [used] every input's ids, one after another */
    int32_t *types;    /* [used] their token types (rerank's; grown with tok, unused otherwise) */
    size_t used, cap_tok;
    int64_t *off;      /* [n] where input i starts in tok */
    int64_t *n_ids;    /* [n] its ids (after any cut) */
    float *out;        /* [n, dim]: the rows, once run */
    int64_t cap_n, cap_out;
    /* the batcher's, under its lock */
    int64_t next, done; /* inputs taken into a batch; inputs computed */
    double queued;      /* srv_now() when it was queued */
    candle_status status;
    char err[256];      /* the computation's message when status */
    pthread_cond_t cv;  /* its rows are in, or it is the queue's head and no batch runs */
    struct srv_enc_job *link;
} srv_enc_job;
/* An empty job of a kind for up to n inputs of dim floats (from md's pool);
 * NULL on memory. */
srv_enc_job *srv_enc_job_get(srv_ctx *c, srv_model *md, srv_enc_kind kind, int64_t n, int64_t dim);
/* Room for k more ids at the end of j->tok (NULL on memory), and as many
 * types at j->types + j->used; input i's ids, once written there, are
 * counted by srv_enc_job_add. */
int32_t *srv_enc_job_room(srv_enc_job *j, size_t k);
void srv_enc_job_add(srv_enc_job *j, int64_t i, int64_t n_ids);
/* Queue j's inputs and wait for its rows; CANDLE_OK or the error of a batch. */
candle_status srv_enc_job_run(srv_model *md, srv_enc_job *j);
/* Back to md's pool. */
void srv_enc_job_put(srv_model *md, srv_enc_job *j);
/* At unload (no request holds md): the batcher and its pool. */
void srv_enc_batch_free(srv_model *md);

/* POST /v1/embeddings on an encoder model (embeddings.c). */
void srv_embeddings(srv_ctx *c, srv_model *e, json_t *req, srv_reply *out);
/* POST /v1/rerank, /rerank, /v1/classify, /classify, /predict
 * (encoder_heads.c): the model's classifier head; a 400 without one. */
bool srv_is_encoder_head_url(const char *url);
void srv_encoder_head(srv_ctx *c, srv_model *e, const char *url, json_t *req, srv_reply *out);
/* Speech (transcribe.c). Audio URLs, and every URL on a Whisper model, go
 * to srv_audio_handle (it needs the Content-Type's boundary) instead of
 * srv_handle. */
bool srv_is_audio_url(const char *url);
bool srv_audio_routes(const srv_ctx *c, const char *url);
/* The largest body url takes: --max-body, or for audio the file's limit
 * plus the form's other fields. */
size_t srv_body_limit(const srv_ctx *c, const char *url);
int srv_audio_init(srv_ctx *c, int parallel, int queue, int n_threads);
void srv_audio_free(srv_ctx *c);
/* An audio upload may start (its body is buffered whole): at most parallel +
 * queue at once, so they hold at most that many times --max-audio-bytes.
 * false: refuse it (429). Each true is paired with a release. */
bool srv_audio_admit(srv_ctx *c);
void srv_audio_release(srv_ctx *c);
void srv_audio_handle(srv_ctx *c, const char *method, const char *url, const char *content_type,
                      const char *body, size_t len, int fd, srv_reply *out);
/* SSE text for new output of a stream: chunk events, and when final, the
 * closing chunk and [DONE]. malloc'ed. */
char *srv_stream_chunk(srv_ctx *c, const srv_reply *rp, const char *text, size_t len,
                       bool first, const srv_req *final);

#endif
