#!/usr/bin/env python3
"""Seeds for fuzz_hf_tokenizer: small tokenizer.json files trained with the
`tokenizers` package (one per model kind and common pipeline), each with a
text, in the target's [u32 n][json][flags][text] layout.
Usage: python3 tests/fuzz/gen_hf_tokenizer_corpus.py  (writes tests/fuzz/corpus/hf_tokenizer/)
"""
import os
import struct

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "hf_tokenizer")
TEXT = ["Hello world! Ça va? 你好 12345 don't <s> [CLS] 😀👍🏽", "  tabs\tand\nnewlines  ", "x",
        "ﬁ ① ｶﾀｶﾅ e\u0301 a\u0301\u0301 \r\n"]
TRAIN = TEXT * 3 + ["the quick brown fox jumps over the lazy dog", "ÀÉÎÕÜ àéîõü", "print(x[0])"]


def bytelevel():
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                     show_progress=False))
    t.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", pair="$A $B:1",
                                                     special_tokens=[("<|endoftext|>", 0)])
    return t


def wordpiece():
    t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    t.normalizer = normalizers.BertNormalizer()
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.decoder = decoders.WordPiece()
    t.train_from_iterator(TRAIN, trainers.WordPieceTrainer(vocab_size=120, show_progress=False,
                                                           special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
    t.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
    return t


def fallback():
    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 1, 0)])
    t.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=120, show_progress=False,
                                                     special_tokens=["<unk>", "<s>", "<0x41>", "<0xC3>"]))
    return t


def unigram():
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip()])
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(), pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(Regex(r"\p{P}+"), behavior="merged_with_previous")])
    t.decoder = decoders.Metaspace()
    t.train_from_iterator(TRAIN, trainers.UnigramTrainer(vocab_size=150, unk_token="<unk>",
                                                         special_tokens=["<unk>"], show_progress=False))
    return t


def precompiled():
    """A SentencePiece charsmap (from the committed unigram-spm test
    tokenizer) over a tiny Unigram model."""
    import base64
    import json
    path = os.path.join(HERE, "..", "data", "hf_tokenizers", "unigram-spm", "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        charsmap = json.load(f)["normalizer"]["normalizers"][0]["precompiled_charsmap"]
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.Precompiled(base64.b64decode(charsmap))
    t.pre_tokenizer = pre_tokenizers.Metaspace()
    t.decoder = decoders.Metaspace()
    t.train_from_iterator(TRAIN, trainers.UnigramTrainer(vocab_size=150, unk_token="<unk>",
                                                         special_tokens=["<unk>"], show_progress=False))
    return t


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, f in (("bytelevel", bytelevel), ("wordpiece", wordpiece), ("fallback", fallback),
                    ("unigram", unigram), ("precompiled", precompiled)):
        j = f().to_str().encode()
        for k, text in enumerate(TEXT):
            with open(os.path.join(OUT, "%s_%d.bin" % (name, k)), "wb") as fh:
                fh.write(struct.pack("<I", len(j)) + j + bytes([3 if k != 1 else 7]) + text.encode())


if __name__ == "__main__":
    main()
