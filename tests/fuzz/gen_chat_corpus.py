#!/usr/bin/env python3
"""Write the seed corpus for fuzz_chat: the Jinja chat templates of the
families Candle renders (shaped like those in the models' GGUF files), one
unknown, and conversations. An input is
  [u8 flags][template] \\0 [format name] \\0 [role] \\0 [content] \\0 ...
(flags bit 0 add_generation_prompt, bit 1 use the name instead of detecting).

usage: python3 tests/fuzz/gen_chat_corpus.py [OUT_DIR]   (default:
corpus/chat/ beside this script). The output is committed; rerun after
changing this."""
import os
import sys

SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}")
QWEN25 = (
    "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + "
    "messages[0]['content'] + '<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\n"
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
    "{%- endif %}\n{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
    "message.content + '<|im_end|>' + '\\n' }}{%- endfor %}\n{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n")
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + "
    "messages[0]['content'] | trim + '\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in "
    "messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content | trim + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + content | trim + ' ' + "
    "eos_token }}{% endif %}{% endfor %}")
ZEPHYR = (
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
    "'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
    "{% endfor %}")
GEMMA = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}"
    "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
PHI3 = (
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}")
UNKNOWN = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"

TEMPLATES = [("smollm2", SMOLLM2), ("qwen25", QWEN25), ("llama3", LLAMA3), ("llama2", LLAMA2),
             ("zephyr", ZEPHYR), ("gemma", GEMMA), ("phi3", PHI3), ("unknown", UNKNOWN),
             ("empty", "")]

CONVS = [
    [("user", "Hi")],
    [("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello!"), ("user", "Who are you?")],
    [("user", "Caf\u00e9 \u4f60\u597d <|im_end|> [INST]"), ("assistant", ""), ("tool", "{}")],
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "chat")
    os.makedirs(out, exist_ok=True)
    for k, (name, tmpl) in enumerate(TEMPLATES):
        for j, conv in enumerate(CONVS):
            flags = (j & 1) | (2 if name == "unknown" and j == 0 else 0)
            fields = [tmpl, "chatml" if flags & 2 else ""]
            for role, content in conv:
                fields += [role, content]
            data = bytes([flags]) + b"\0".join(f.encode() for f in fields)
            with open(os.path.join(out, "%s_%d.bin" % (name, j)), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
