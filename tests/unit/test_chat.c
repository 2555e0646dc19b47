/* Chat templates: recognising each family's Jinja text, rendering turns, the
 * SmolLM2-style default system prompt, and errors. */
#include "candle/chat.h"
#include "test.h"

static const char *smollm2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

static const char *qwen2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}";

static void render(const char *tmpl, const char *name, const candle_chat_msg *m, size_t n,
                   const char *want) {
    candle_chat_template t;
    CHECK_OK(NULL, candle_chat_template_init(&t, tmpl, tmpl ? strlen(tmpl) : 0, name));
    char *out = NULL;
    CHECK_OK(NULL, candle_chat_apply(&t, m, n, true, &out));
    CHECK_MSG(out && !strcmp(out, want), "got [%s]\nwant [%s]", out ? out : "(null)", want);
    free(out);
    candle_chat_template_free(&t);
}

static void test_detect(void) {
    struct {
        const char *tmpl;
        candle_chat_format f;
    } cases[] = {
        {smollm2, CANDLE_CHAT_CHATML},
        {"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}", CANDLE_CHAT_LLAMA3},
        {"{{ '<start_of_turn>' + role + '\n' }}", CANDLE_CHAT_GEMMA},
        {"{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n'}}", CANDLE_CHAT_PHI3},
        {"{{ '<|user|>\n' + message['content'] + eos_token }}", CANDLE_CHAT_ZEPHYR},
        {"{{ bos_token + '[INST] ' + content + ' [/INST]' }}", CANDLE_CHAT_LLAMA2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        candle_chat_format f = CANDLE_CHAT_FORMAT_COUNT;
        CHECK_OK(NULL, candle_chat_format_detect(cases[i].tmpl, strlen(cases[i].tmpl), &f));
        CHECK_MSG(f == cases[i].f, "case %zu: %s", i, candle_chat_format_name(f));
    }
    candle_chat_format f;
    const char *odd = "{% for m in messages %}{{ m.content }}{% endfor %}";
    CHECK(candle_chat_format_detect(odd, strlen(odd), &f) == CANDLE_ERR_UNSUPPORTED);
    CHECK_CONTAINS(candle_last_errmsg(), "not a known format");
    CHECK_CONTAINS(candle_last_errmsg(), "chatml");
    CHECK(candle_chat_format_detect(NULL, 0, &f) == CANDLE_ERR_UNSUPPORTED);
    CHECK_CONTAINS(candle_last_errmsg(), "no tokenizer.chat_template");
    CHECK(candle_chat_format_from_name("nope", &f) == CANDLE_ERR_INVALID_ARG);
    CHECK_CONTAINS(candle_last_errmsg(), "unknown format 'nope'");
    CHECK_OK(NULL, candle_chat_format_from_name("gemma", &f));
    CHECK(f == CANDLE_CHAT_GEMMA);
}

static void test_render(void) {
    candle_chat_msg u[] = {{.role = "user", .content = "Hi"}};
    candle_chat_msg conv[] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello!"},
                              {.role = "user", .content = "Bye"}};
    render(smollm2, NULL, u, 1,
           "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
           "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    render(smollm2, NULL, conv, 2,
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
           "<|im_start|>assistant\n");
    render(qwen2, NULL, u, 1,
           "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi"
           "<|im_end|>\n<|im_start|>assistant\n");
    render(NULL, "llama3", conv, 4,
           "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    render(NULL, "gemma", conv, 4,
           "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!"
           "<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
    render(NULL, "phi3", conv + 1, 3,
           "<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\nBye<|end|>\n"
           "<|assistant|>\n");
    render(NULL, "zephyr", u, 1, "<|user|>\nHi</s>\n<|assistant|>\n");
    render(NULL, "llama2", conv, 4,
           "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]");
    /* A named format overrides the file's template. */
    render(smollm2, "zephyr", u, 1, "<|user|>\nHi</s>\n<|assistant|>\n");
}

int main(void) {
    test_detect();
    test_render();
    return test_done("test_chat");
}
