#!/usr/bin/env python3
"""Corpus, small trained tokenizers and golden outputs for test_hf_tokenizer.

  python3 tests/data/hf_tokenizers/gen.py corpus          # corpus.jsonl
  python3 tests/data/hf_tokenizers/gen.py train           # NAME/tokenizer.json (random configs)
  python3 tests/data/hf_tokenizers/gen.py spm             # unigram-spm only
  python3 tests/data/hf_tokenizers/gen.py fallback        # unigram-fallback only
  python3 tests/data/hf_tokenizers/gen.py o200k           # bpe-o200k only
  python3 tests/data/hf_tokenizers/gen.py stress SEED OUT # a random corpus + goldens (below)
  python3 tests/data/hf_tokenizers/gen.py golden DIR...   # DIR/../NAME.golden for each DIR/tokenizer.json

With no arguments: corpus, train, and goldens for every trained tokenizer
plus the real ones found in build-data/hf_tokenizers (make test-data).
stress writes OUT/tests/data/hf_tokenizers/ with a corpus of random code
points (all of Unicode) and grapheme-like sequences, goldens for every
tokenizer, and links to the tokenizer folders, for an extra run with
  CANDLE_SOURCE_DIR=OUT build/bin/test_hf_tokenizer
Training is not bit-reproducible across runs for every trainer, so
retraining means regenerating the goldens with it (the no-argument run
does both); the committed tokenizer.json files are the fixed inputs.

The reference is the `tokenizers` package (pip install tokenizers).
corpus.jsonl: one JSON object per line, {"t": text} or, for input that is not
valid UTF-8, {"hex": bytes}. The reference sees such bytes decoded with
errors='replace' (what a Python caller gets); Candle's encode of the raw
bytes replaces invalid sequences by U+FFFD the same way (maximal subparts).
NAME.golden: one line per corpus line, "IDS<TAB>DEC<TAB>SKIP". IDS is the
ids of encode(text, add_special_tokens=True), each written in base 47 with
the digits before the last from 'P'..'~' and the last from '!'..'O' (so no
separators are needed); DEC is "=" when decode(ids, skip_special_tokens=False)
equals the input text, else the 32-bit FNV-1a hash of its UTF-8 in 8 hex digits;
SKIP the same for skip_special_tokens=True.
Hashes rather than text keep the files small; gen.py can print the text.
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

SENTENCES = [
    "Hello world! This is a test.", "The quick brown fox jumps over the lazy dog.",
    "I can't believe it's not butter, we'll see, they're here, you've won, I'm done, he'd go.",
    "Don't SHOUT: IT'S FINE, WE'LL MANAGE, THEY'RE OK.",
    "Bonjour, ça va ? Très bien, merci. L'été à Montréal.", "Größe, Straße, Übermäßig, schön.",
    "¿Dónde está la biblioteca? ¡Olé! Año, niño, corazón.", "Ελληνικά: Καλημέρα κόσμε, ΟΔΥΣΣΕΥΣ.",
    "Русский язык: Привет, мир! Съешь же ещё этих мягких булок.", "Українська: Їжак, ґанок, є.",
    "中文测试：你好，世界！我们今天去公园。", "日本語のテキスト：こんにちは、世界。カタカナ、ひらがな。",
    "한국어 문장: 안녕하세요, 세계! 감사합니다.", "العربية: مرحبا بالعالم، كيف حالك؟",
    "עברית: שלום עולם, מה שלומך?", "हिन्दी: नमस्ते दुनिया, आप कैसे हैं?", "தமிழ்: வணக்கம் உலகம்",
    "ไทย: สวัสดีชาวโลก ภาษาไทย", "Tiếng Việt: Xin chào thế giới, cảm ơn.", "ქართული ენა: გამარჯობა",
    "Հայերեն: Բարեւ աշխարհ", "বাংলা: হ্যালো বিশ্ব", "Türkçe: İstanbul, ılık, IŞIK, şeker.",
    "Polski: Zażółć gęślą jaźń.", "Čeština: Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Ἀρχαῖα: ἐν ἀρχῇ ἦν ὁ λόγος", "ᚠᚢᚦᚨᚱᚲ runes", "Ethiopic: ሰላም ዓለም", "Mongolian: ᠮᠣᠩᠭᠣᠯ",
    "math: ∀x∈ℝ, x²≥0; ∑ᵢ aᵢ ≤ ∞ ≠ ∅ ⊂ ∪ √2 ≈ 1.414", "ﬁ ﬂ ﬀ ligatures, ⅓ ½ ¼, ①②③, Ⅻ, ㎏ ㎞ ℃ ™ ℡",
    "full-width: ＡＢＣ１２３！？　spaces", "half-width kana: ｶﾀｶﾅ ﾊﾝｶｸ", "Å Å Ω Ω K K",
    "combining: e\u0301 a\u0308 o\u0302\u0323 n\u0303 u\u031b\u0300 Z\u0335\u0321\u0327",
    "precomposed: é ä ộ ñ ừ", "Hangul jamo: \u1100\u1161\u11a8 \u1112\u1161\u11ab",
    "zero width: a\u200bb\u200cc\u200dd\u2060e\ufeff f", "soft\u00adhyphen and nbsp\u00a0here and\u2009thin",
    "controls: \x01\x02\x07\x1b[0m\x7f\x85 end", "bidi: \u202eabc\u202c \u200fRTL\u200e",
]
EMOJI = [
    "😀", "😂🤣", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇺🇸🇯🇵", "🤷🏻‍♀️", "🧑🏿‍🚀",
    "✨🎉🎊", "🙏🏼", "☕", "🐍🦀", "1️⃣", "#️⃣", "©️®️", "🫠", "🥲",
]
CODE = [
    "def foo(x):\n    return x * 2\n", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
    "if x == None and y != 0:\n        pass", "#include <stdio.h>\nint main(void) { return 0; }",
    "const f = (a, b) => a ?? b; // comment", "SELECT * FROM users WHERE id = 42;",
    "<div class=\"x\">Hi &amp; bye</div>", "{\"key\": [1, 2.5, -3e10, true, null]}",
    "fn main() { println!(\"{}\", 1u64 << 40); }", "x = a->b; y = *p++; z = ~q ^ r | s & t;",
    "https://example.com/path?q=1&r=two#frag", "user@example.org, C:\\Windows\\System32",
    "$ ls -la | grep '^d' > out.txt 2>&1", "    indented\n\n\n  \t mixed \t\t tabs",
]
SPECIAL = [
    "<s>", "</s>", "<unk>", "<pad>", "[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]",
    "<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|notimestamps|>", "<mask>",
    "<|begin_of_text|>", "<|eot_id|>", "<start_of_turn>", "<eos>", "<bos>", "<0x41>", "▁",
    "<|im_start|>", "<s", "</s", "[CLS", "<|endoftext|", "##ing", "Ġhello",
]
WORDS = [
    "the", "of", "and", "token", "tokenizer", "encoding", "model", "inference", "unbelievable",
    "antidisestablishmentarianism", "pneumonoultramicroscopicsilicovolcanoconiosis", "naïve",
    "café", "résumé", "coöperate", "hello", "HELLO", "Hello", "hElLo", "isn't", "o'clock",
    "rock'n'roll", "e-mail", "state-of-the-art", "U.S.A.", "Ph.D.", "3.14159", "1,000,000",
    "2024-01-15", "12:30:45", "$100.00", "€50", "£20", "¥1000", "100%", "#hashtag", "@mention",
    "snake_case_name", "camelCaseName", "PascalCase", "SCREAMING_CASE", "x86_64", "v1.2.3-rc1",
]
PUNCT = ["...", "!!!", "???", "?!", "--", "---", "—", "–", "…", "«»", "“quoted”", "‘single’",
         "(parens)", "[brackets]", "{braces}", "<angle>", "***", "___", "~~~", "^^", "||", "::",
         ";;", ",,", "..", "''", "\"\"", "``", "'", "\"", "/", "\\", "%", "&", "+", "=", "*"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n ", "\t\t", "    ", "\u3000", "\u00a0",
          " \t\n", "\n    ", "\r", "\x0b", "\x0c"]
INVALID = [b"\xff", b"\xfe\xfe", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80", b"\xc0\xaf",
           b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\xaf", b"abc\xffdef", b"\xc3\x28"]


def rand_piece(r):
    k = r.random()
    if k < 0.25:
        return r.choice(SENTENCES)
    if k < 0.45:
        return r.choice(WORDS)
    if k < 0.55:
        return r.choice(PUNCT)
    if k < 0.65:
        return r.choice(SPACES)
    if k < 0.72:
        return r.choice(EMOJI)
    if k < 0.80:
        return r.choice(CODE)
    if k < 0.86:
        return r.choice(SPECIAL)
    if k < 0.93:
        return str(r.choice([0, 7, 42, 123, 1234, 12345, 1234567, 3.5, -17, 10 ** 15, 2 ** 31]))
    # random code points from a few blocks
    blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x4e00, 0x4fff),
              (0x3040, 0x30ff), (0xac00, 0xad00), (0x600, 0x6ff), (0x900, 0x97f), (0x1f300, 0x1f5ff),
              (0x2000, 0x206f), (0x300, 0x36f), (0x2100, 0x22ff), (0xff00, 0xffef)]
    lo, hi = r.choice(blocks)
    return "".join(chr(r.randint(lo, hi)) for _ in range(r.randint(1, 4)))


def make_corpus():
    r = random.Random(1234)
    out = []
    # Every fixed fragment alone, then random mixtures.
    for pool in (SENTENCES, EMOJI, CODE, SPECIAL, WORDS, PUNCT, SPACES):
        out += [{"t": s} for s in pool]
    out += [{"t": ""}, {"t": " "}, {"t": "a"}, {"t": " a"}, {"t": "a "}, {"t": "   leading"},
            {"t": "trailing   "}, {"t": "x" * 300}, {"t": "ab" * 150 + " " + "z" * 120},
            {"t": "1234567890" * 10}, {"t": "a" + "\u0301" * 20}, {"t": " " * 40},
            {"t": "\n" * 10}, {"t": "word " * 60}]
    for b in INVALID:
        out.append({"hex": b.hex()})
    while len(out) < 5100:
        n = r.choice([1, 1, 2, 2, 3, 4])
        parts = []
        for _ in range(n):
            parts.append(rand_piece(r))
            if r.random() < 0.6:
                parts.append(r.choice([" ", " ", " ", "", "\n", "  "]))
        s = "".join(parts)
        if r.random() < 0.03:
            b = bytearray(s.encode())
            b.insert(r.randint(0, len(b)), r.choice(INVALID)[0])
            out.append({"hex": bytes(b).hex()})
        else:
            out.append({"t": s})
    with open(os.path.join(HERE, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for o in out:
            f.write(json.dumps(o, ensure_ascii=False) + "\n")


def load_corpus():
    texts = []
    with open(os.path.join(HERE, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            texts.append(o["t"] if "t" in o else bytes.fromhex(o["hex"]).decode("utf-8", "replace"))
    return texts


# ---- trained tokenizers (random configurations, small) ----

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def train_texts():
    return load_corpus()


def save(tok, name, config=None):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    if config is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(config, f, indent=1)


def train_bytelevel_llama3():
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, processors, trainers, Regex
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    tr = trainers.BpeTrainer(vocab_size=1500, special_tokens=specials,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(train_texts(), tr)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    save(tok, "bpe-llama3", {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                             "model_max_length": 8192})


def train_roberta():
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, processors, trainers, AddedToken
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(train_texts(), tr)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    tok.add_tokens([AddedToken("hello world", single_word=True), AddedToken(" xyz", rstrip=True)])
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")))
    save(tok, "bpe-roberta", {"bos_token": {"content": "<s>"}, "eos_token": {"content": "</s>"},
                              "model_max_length": 512})


def train_wordpiece():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, processors, trainers
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=30))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tr = trainers.WordPieceTrainer(vocab_size=1500, show_progress=False,
                                   special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(train_texts(), tr)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    save(tok, "wordpiece-bert", {"model_max_length": 512})


def train_wordpiece_mix():
    """Other normalizers and pre-tokenizers, over a WordPiece model."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, trainers, Regex
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"\d{4,}"), "#"), normalizers.Replace("``", "\""), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[aeiou]"), behavior="merged_with_next"),
        pre_tokenizers.Split("x", behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"q+"), behavior="removed"),
        pre_tokenizers.Split(Regex(r"z+"), behavior="isolated", invert=True)])
    tok.decoder = decoders.WordPiece(cleanup=False)
    tr = trainers.WordPieceTrainer(vocab_size=1000, show_progress=False, special_tokens=["[UNK]"])
    tok.train_from_iterator(train_texts(), tr)
    save(tok, "wordpiece-mix")


def train_bpe_fallback():
    """Llama 2 style: SentencePiece normalizer as Prepend + Replace, BPE with
    byte fallback, decoder chain Replace/ByteFallback/Fuse/Strip."""
    from tokenizers import Tokenizer, models, normalizers, decoders, processors, trainers, Regex
    import tempfile
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    specials = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    tr = trainers.BpeTrainer(vocab_size=1400, special_tokens=specials, show_progress=False,
                             limit_alphabet=200)
    tok.train_from_iterator(train_texts(), tr)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    # The byte tokens belong to the vocabulary, not the added tokens, as in
    # Llama 2's file.
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "t.json")
        tok.save(p)
        j = json.load(open(p))
    j["added_tokens"] = [a for a in j["added_tokens"] if not a["content"].startswith("<0x")]
    d = os.path.join(HERE, "bpe-fallback")
    os.makedirs(d, exist_ok=True)
    json.dump(j, open(os.path.join(d, "tokenizer.json"), "w"), ensure_ascii=False, indent=1)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True,
                   "model_max_length": 4096}, f, indent=1)
    # Gemma-like variant: Metaspace pre-tokenizer instead of the normalizer.
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                          "split": False}
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"}, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                                   "split": False}, {"type": "Fuse"}]}
    d = os.path.join(HERE, "bpe-metaspace")
    os.makedirs(d, exist_ok=True)
    json.dump(j, open(os.path.join(d, "tokenizer.json"), "w"), ensure_ascii=False, indent=1)


def train_unigram():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tr = trainers.UnigramTrainer(vocab_size=4000, show_progress=False, unk_token="<unk>",
                                 special_tokens=["<pad>", "</s>", "<unk>"])
    tok.train_from_iterator(train_texts(), tr)
    save(tok, "unigram-nfkc")


def spm_rules():
    import unicodedata
    out = []

    def rule(src, dst):
        out.append("%s\t%s\n" % (" ".join("%X" % ord(c) for c in src), " ".join("%X" % ord(c) for c in dst)))

    for lo, hi in ((0xA0, 0x2FF), (0x2000, 0x215F), (0x2460, 0x24FF), (0x3000, 0x30FF), (0xFB00, 0xFB4F),
                   (0xFF00, 0xFFEF)):
        for cp in range(lo, hi + 1):
            c = chr(cp)
            t = unicodedata.normalize("NFKC", c)
            if t != c and t:
                rule(c, t)
    for base in "aeiouyAEIOUYnNcCsSzZ":
        for comb in range(0x300, 0x30D):
            src = base + chr(comb)
            t = unicodedata.normalize("NFC", src)
            if t != src:
                rule(src, t)
    return "".join(out)


def train_spm_unigram():
    """A SentencePiece Unigram model converted the way transformers'
    SpmConverter does: Precompiled charsmap + collapsing of space runs,
    Metaspace, Unigram with the model's scores. The charsmap is built from
    NFKC rules for a few blocks and some base + combining mark sequences
    (multi-character keys), as nmt_nfkc's full map would be 320 KB."""
    import tempfile
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
    with tempfile.TemporaryDirectory() as td:
        txt = os.path.join(td, "train.txt")
        with open(txt, "w", encoding="utf-8") as f:
            for t in train_texts():
                t = t.replace("\n", " ").replace("\r", " ")
                if t.strip():
                    f.write(t + "\n")
        rules = os.path.join(td, "rules.tsv")
        with open(rules, "w") as f:
            f.write(spm_rules())
        spm.SentencePieceTrainer.train(input=txt, model_prefix=os.path.join(td, "m"), vocab_size=2000,
                                       model_type="unigram", normalization_rule_tsv=rules,
                                       character_coverage=0.9995, byte_fallback=False,
                                       unk_id=2, bos_id=-1, eos_id=1, pad_id=0, minloglevel=2,
                                       hard_vocab_limit=False)
        m = pb.ModelProto()
        m.ParseFromString(open(os.path.join(td, "m.model"), "rb").read())
    import base64
    charsmap = base64.b64encode(m.normalizer_spec.precompiled_charsmap).decode()
    vocab = [[p.piece, p.score] for p in m.pieces]
    j = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": vocab[i][0], "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True} for i in (0, 1, 2)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": charsmap},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                          "split": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": 2, "vocab": vocab, "byte_fallback": False},
    }
    d = os.path.join(HERE, "unigram-spm")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                   "model_max_length": 512}, f, indent=1)


def train_clip():
    """CLIP's pipeline: NFC, whitespace runs to one space, lowercase; an
    inverted Split keeping the words; byte-level BPE with the "</w>" end of
    word suffix."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, processors, trainers, Regex
    tok = Tokenizer(models.BPE(unk_token="<|endoftext|>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "),
                                           normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|"
                                   r"[^\s\p{L}\p{N}]+"), behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<|startoftext|>", "<|endoftext|>"],
                             end_of_word_suffix="</w>", show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_texts(), tr)
    tok.post_processor = processors.RobertaProcessing(("<|endoftext|>", 1), ("<|startoftext|>", 0))
    save(tok, "bpe-clip", {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>",
                           "model_max_length": 77})


def train_bpe_whitespace():
    """Whitespace pre-tokenizer, NFD + StripAccents, BPE with a continuing
    subword prefix, fused unknowns, the BPE decoder (suffix) and Fuse."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, processors, trainers
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.Sequence([decoders.BPEDecoder(suffix="##"), decoders.Fuse()])
    tr = trainers.BpeTrainer(vocab_size=1200, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                             continuing_subword_prefix="##", limit_alphabet=150, show_progress=False)
    tok.train_from_iterator(train_texts(), tr)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    save(tok, "bpe-whitespace")


def train_unigram_fallback():
    """Unigram with byte_fallback (byte pieces appended to unigram-nfkc's
    vocabulary), Lowercase, contiguous Digits, Metaspace never prepending,
    decoder ByteFallback + Metaspace."""
    with open(os.path.join(HERE, "unigram-nfkc", "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    m = j["model"]
    m["vocab"] = [v for v in m["vocab"] if len(v[0]) > 1 or ord(v[0]) < 0x2000 or v[0] == "\u2581"]
    m["vocab"] += [["<0x%02X>" % b, -30.0] for b in range(256)]
    m["byte_fallback"] = True
    index = {v[0]: i for i, v in enumerate(m["vocab"])}
    for a in j["added_tokens"]:
        a["id"] = index[a["content"]]
    m["unk_id"] = index["<unk>"]
    j["normalizer"] = {"type": "Lowercase"}
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": False},
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": True}]}
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"},
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": True}]}
    d = os.path.join(HERE, "unigram-fallback")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)


O200K_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
               r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")


def train_o200k():
    """GPT-4o's split (two-letter categories, an optional (?i:) group)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, Regex
    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(O200K_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<|endoftext|>"], show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_texts(), tr)
    save(tok, "bpe-o200k")


def train_all():
    train_bytelevel_llama3()
    train_roberta()
    train_wordpiece()
    train_wordpiece_mix()
    train_bpe_fallback()
    train_unigram()
    train_spm_unigram()
    train_clip()
    train_bpe_whitespace()
    train_unigram_fallback()
    train_o200k()


# ---- goldens ----

def enc_id(i):
    digits = []
    while True:
        digits.append(i % 47)
        i //= 47
        if not i:
            break
    digits.reverse()
    return "".join(chr(0x50 + d) for d in digits[:-1]) + chr(0x21 + digits[-1])


def fnv(s):
    h = 0x811c9dc5
    for b in s.encode("utf-8"):
        h = ((h ^ b) * 0x01000193) & 0xffffffff
    return "%08x" % h


def golden(d):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    name = os.path.basename(os.path.normpath(d))
    out = os.path.join(HERE, name + ".golden")
    with open(out, "w", encoding="utf-8") as f:
        for text in load_corpus():
            ids = tok.encode(text, add_special_tokens=True).ids
            dec = tok.decode(ids, skip_special_tokens=False)
            skip = tok.decode(ids, skip_special_tokens=True)
            f.write("%s\t%s\t%s\n" % ("".join(map(enc_id, ids)), "=" if dec == text else fnv(dec),
                                        "=" if skip == text else fnv(skip)))
    print("%s: %d bytes" % (out, os.path.getsize(out)))


def stress(seed, out):
    import unicodedata
    global HERE
    r = random.Random(seed)
    dest = os.path.join(out, "tests", "data", "hf_tokenizers")
    os.makedirs(dest, exist_ok=True)
    for n in TRAINED:
        link = os.path.join(dest, n)
        if not os.path.exists(link):
            os.symlink(os.path.join(HERE, n), link)
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000 and unicodedata.category(chr(cp)) != "Cn"]
    cps += [r.randrange(0x30000, 0xE0000) for _ in range(2000)]

    def cluster():
        k = r.random()
        if k < 0.2:
            return r.choice("aeiouAEIOUnNcCsSzZyY") + "".join(chr(r.randint(0x300, 0x36F)) for _ in range(r.randint(0, 3)))
        if k < 0.3:
            return chr(r.randint(0x1100, 0x1112)) + chr(r.randint(0x1161, 0x1175)) + chr(r.randint(0x11A8, 0x11C2))
        if k < 0.4:
            return chr(r.randint(0x1F1E6, 0x1F1FF)) + chr(r.randint(0x1F1E6, 0x1F1FF))
        if k < 0.5:
            return r.choice(["\U0001F468", "\U0001F44D", "\u2764"]) + r.choice(["", "\U0001F3FB", "\uFE0F", "\u200D\U0001F4BB"])
        if k < 0.6:
            return r.choice(["\r\n", "\r", "\n", "\t", " ", "  ", "\u3000", "\u00a0"])
        if k < 0.7:
            return chr(r.randint(0xFF61, 0xFF9F)) + r.choice(["", "\uFF9E", "\uFF9F"])
        if k < 0.8:
            return r.choice(WORDS + SPECIAL)
        return "".join(chr(r.choice(cps)) for _ in range(r.randint(1, 4)))

    with open(os.path.join(dest, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for _ in range(5000):
            f.write(json.dumps({"t": "".join(cluster() for _ in range(r.randint(1, 10)))}, ensure_ascii=False) + "\n")
    real = os.path.join(ROOT, "build-data", "hf_tokenizers")
    here = HERE
    HERE = dest
    try:
        for n in TRAINED:
            golden(os.path.join(here, n))
        for n in sorted(os.listdir(real)) if os.path.isdir(real) else []:
            golden(os.path.join(real, n))
    finally:
        HERE = here


TRAINED = ["bpe-llama3", "bpe-roberta", "wordpiece-bert", "wordpiece-mix", "bpe-fallback",
           "bpe-metaspace", "unigram-nfkc", "unigram-spm",
           "bpe-clip", "bpe-whitespace", "unigram-fallback", "bpe-o200k"]


def main():
    args = sys.argv[1:]
    if not args or args[0] == "corpus":
        make_corpus()
    if not args or args[0] == "train":
        train_all()
    if args and args[0] == "spm":
        train_spm_unigram()
    if args and args[0] == "fallback":
        train_unigram_fallback()
    if args and args[0] == "o200k":
        train_o200k()
    if not args:
        for n in TRAINED:
            golden(os.path.join(HERE, n))
        real = os.path.join(ROOT, "build-data", "hf_tokenizers")
        for n in sorted(os.listdir(real)) if os.path.isdir(real) else []:
            golden(os.path.join(real, n))
    elif args[0] == "stress":
        stress(int(args[1]), args[2])
    elif args[0] == "golden":
        for d in args[1:]:
            golden(d)


if __name__ == "__main__":
    main()
