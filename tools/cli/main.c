/* candle: command-line front end. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "env_settings.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"run", cmd_run, "generate text: run -m MODEL -p PROMPT -n N"},
    {"chat", cmd_chat, "interactive chat with a model's chat template"},
    {"logits", cmd_logits, "top-k logits for every prompt position as JSON lines"},
    {"perplexity", cmd_perplexity, "perplexity of a model over a text file"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"embed", cmd_embed, "sentence embeddings: embed -m ENCODER (-p TEXT | -f FILE)"},
    {"classify", cmd_classify, "text classification: classify -m MODEL (-p TEXT | -f FILE)"},
    {"rerank", cmd_rerank, "cross-encoder reranking: rerank -m MODEL -q QUERY -f DOCS [--top-n N]"},
    {"transcribe", cmd_transcribe, "speech to text with Whisper: transcribe -m WHISPER_DIR -f AUDIO"},
    {"info", cmd_info, "CPU features and kernels, or a model's (GGUF or directory) contents"},
    {"bench", cmd_bench, "benchmarks: bench ops|quant|attn|load | bench -m MODEL"},
    {"quantize", cmd_quantize, "quantize IN OUT.gguf TYPE (IN: GGUF or a Hugging Face directory)"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server: serve -m MODEL --port N"},
};

static void usage(FILE *f) {
    fprintf(f, "candle %s: transformer inference\n\nusage: candle <command> [options]\n\n",
            CANDLE_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`candle <command> --help` describes a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("candle %s\n", CANDLE_VERSION);
        return 0;
    }
    char err[256];
    if (tool_apply_env_settings(err, sizeof err)) {
        fprintf(stderr, "candle: %s\n", err);
        return 2;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "candle: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
