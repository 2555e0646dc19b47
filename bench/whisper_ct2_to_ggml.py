#!/usr/bin/env python3
"""Convert a CTranslate2 Whisper directory (model.bin float16, vocabulary.txt)
into whisper.cpp's ggml .bin, so that whisper.cpp runs the SAME weights as
Candle and faster-whisper in bench/whisper_compare.sh.

    python3 bench/whisper_ct2_to_ggml.py CT2_DIR OUT.bin

Needs numpy only (the faster-whisper venv has it).

The output is laid out as whisper.cpp's models/convert-pt-to-ggml.py writes it
and src/whisper.cpp's whisper_model_load reads it:
  u32 magic 'ggml'; 11 x i32 hparams (n_vocab, n_audio_ctx, n_audio_state,
  n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head,
  n_text_layer, n_mels, ftype=1 (f16));
  mel filters: i32 n_mel, i32 201, f32 [n_mel][201] (Slaney, as librosa's
  filters.mel(sr=16000, n_fft=400) that openai-whisper ships);
  vocabulary: i32 count, then each token's raw bytes (i32 length, bytes) for
  the ids below <|endoftext|> (whisper.cpp names the special tokens itself);
  tensors: i32 n_dims, i32 name length, i32 type (0 f32, 1 f16), dims
  innermost first, the name, the data.
Weight matrices are f16 as in the reference files; biases, norms, the
positional embeddings and the conv biases (shape [n, 1]) are f32.

CTranslate2 fuses projections (self-attention linear_0 = Q|K|V, cross-attention
linear_1 = K|V); they are split here. Whisper's key projection has no bias:
CTranslate2 stores zeros there, which is checked, since whisper.cpp has no key
bias to put it in.
"""
import math
import os
import struct
import sys

import numpy as np

CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ct2(path):
    """model.bin (DESIGN.md section 4): name -> numpy array, aliases resolved."""
    buf = open(path, "rb").read()
    o = 0

    def take(fmt):
        nonlocal o
        v = struct.unpack_from(fmt, buf, o)
        o += struct.calcsize(fmt)
        return v

    def string():
        nonlocal o
        (n,) = take("<H")
        s = buf[o:o + n].decode("utf-8").rstrip("\0")
        o += n
        return s

    (version,) = take("<I")
    if version < 5:
        raise SystemExit(f"{path}: model.bin version {version}, expected 5 or 6")
    spec = string()
    if spec != "WhisperSpec":
        raise SystemExit(f"{path}: {spec}, not a WhisperSpec model")
    take("<I")  # revision
    (n_vars,) = take("<I")
    v = {}
    for _ in range(n_vars):
        name = string()
        (rank,) = take("<B")
        dims = take(f"<{rank}I")
        (dt,) = take("<B")
        (nbytes,) = take("<I")
        if dt not in CT2_DTYPES:
            raise SystemExit(f"{path}: {name} has dtype {dt}, unsupported here")
        a = np.frombuffer(buf, dtype=CT2_DTYPES[dt], count=nbytes // np.dtype(CT2_DTYPES[dt]).itemsize, offset=o)
        v[name] = a.reshape(dims) if rank else a.reshape(())
        o += nbytes
    (n_alias,) = take("<I")
    for _ in range(n_alias):
        a, b = string(), string()
        v[a] = v[b]
    return v


def hz_to_mel(f):
    f_sp, min_log_hz, min_log_mel, logstep = 200.0 / 3, 1000.0, 15.0, math.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, f / f_sp)


def mel_to_hz(m):
    f_sp, min_log_hz, min_log_mel, logstep = 200.0 / 3, 1000.0, 15.0, math.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_filters(n_mels, sr=16000, n_fft=400):
    """librosa.filters.mel(sr, n_fft, n_mels) with htk=False, norm='slaney'."""
    fftfreqs = np.linspace(0, sr / 2, 1 + n_fft // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(np.array(0.0)), hz_to_mel(np.array(sr / 2.0)), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    w = np.zeros((n_mels, 1 + n_fft // 2))
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        w[i] = np.maximum(0, np.minimum(lower, upper))
    w *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return w.astype(np.float32)


def byte_decoder():
    """The inverse of GPT-2's bytes_to_unicode (vocabulary.txt is byte-level)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    v = read_ct2(os.path.join(src, "model.bin"))
    vocab = open(os.path.join(src, "vocabulary.txt"), encoding="utf-8").read().split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()

    conv1 = v["encoder/conv1/weight"]  # [n_state, n_mels, 3]
    n_state, n_mels = conv1.shape[0], conv1.shape[1]
    n_audio_layer = sum(1 for k in v if k.startswith("encoder/layer_") and k.endswith("/ffn/linear_0/weight"))
    n_text_layer = sum(1 for k in v if k.startswith("decoder/layer_") and k.endswith("/ffn/linear_0/weight"))
    n_vocab = v["decoder/embeddings/weight"].shape[0]
    n_audio_ctx = v["encoder/position_encodings/encodings"].shape[0]
    n_text_ctx = v["decoder/position_encodings/encodings"].shape[0]
    n_audio_head = int(v["encoder/num_heads"]) if "encoder/num_heads" in v else n_state // 64
    n_text_head = int(v["decoder/num_heads"]) if "decoder/num_heads" in v else n_state // 64
    eot = vocab.index("<|endoftext|>")
    # whisper.cpp's multilingual test is n_vocab >= 51865; its eot is then 50257
    expect_eot = 50257 if n_vocab >= 51865 else 50256
    if eot != expect_eot:
        raise SystemExit(f"{src}: <|endoftext|> is id {eot}, whisper.cpp expects {expect_eot}")

    f = open(out, "wb")
    f.write(struct.pack("<I", 0x67676D6C))
    f.write(struct.pack("<11i", n_vocab, n_audio_ctx, n_state, n_audio_head, n_audio_layer, n_text_ctx, n_state,
                        n_text_head, n_text_layer, n_mels, 1))
    filt = mel_filters(n_mels)
    f.write(struct.pack("<2i", *filt.shape))
    f.write(filt.tobytes())

    dec = byte_decoder()
    f.write(struct.pack("<i", eot))
    for tok in vocab[:eot]:
        b = bytes(dec[c] for c in tok)
        f.write(struct.pack("<i", len(b)))
        f.write(b)

    n_written = 0

    def put(name, a, f16):
        nonlocal n_written
        a = np.ascontiguousarray(a, dtype=np.float16 if f16 else np.float32)
        dims = a.shape[::-1]
        nb = name.encode()
        f.write(struct.pack("<3i", len(dims), len(nb), 1 if f16 else 0))
        f.write(struct.pack(f"<{len(dims)}i", *dims))
        f.write(nb)
        f.write(a.tobytes())
        n_written += 1

    def lin(dst, w, b, f16=True):
        put(dst + ".weight", w, f16)
        if b is not None:
            put(dst + ".bias", b, False)

    def norm(dst, srcn):
        put(dst + ".weight", v[srcn + "/gamma"], False)
        put(dst + ".bias", v[srcn + "/beta"], False)

    def no_key_bias(b, what):
        if np.any(b.astype(np.float32) != 0):
            raise SystemExit(f"{src}: {what} has a non-zero key bias; whisper.cpp has none")

    def self_attn(s, d):
        qkv_w, qkv_b = v[s + "/self_attention/linear_0/weight"], v[s + "/self_attention/linear_0/bias"]
        no_key_bias(qkv_b[n_state:2 * n_state], s)
        norm(d + ".attn_ln", s + "/self_attention/layer_norm")
        lin(d + ".attn.query", qkv_w[:n_state], qkv_b[:n_state])
        lin(d + ".attn.key", qkv_w[n_state:2 * n_state], None)
        lin(d + ".attn.value", qkv_w[2 * n_state:], qkv_b[2 * n_state:])
        lin(d + ".attn.out", v[s + "/self_attention/linear_1/weight"], v[s + "/self_attention/linear_1/bias"])

    put("encoder.positional_embedding", v["encoder/position_encodings/encodings"], False)
    put("encoder.conv1.weight", v["encoder/conv1/weight"], True)
    put("encoder.conv1.bias", v["encoder/conv1/bias"].reshape(-1, 1), False)
    put("encoder.conv2.weight", v["encoder/conv2/weight"], True)
    put("encoder.conv2.bias", v["encoder/conv2/bias"].reshape(-1, 1), False)
    norm("encoder.ln_post", "encoder/layer_norm")
    for i in range(n_audio_layer):
        s, d = f"encoder/layer_{i}", f"encoder.blocks.{i}"
        self_attn(s, d)
        norm(d + ".mlp_ln", s + "/ffn/layer_norm")
        lin(d + ".mlp.0", v[s + "/ffn/linear_0/weight"], v[s + "/ffn/linear_0/bias"])
        lin(d + ".mlp.2", v[s + "/ffn/linear_1/weight"], v[s + "/ffn/linear_1/bias"])

    put("decoder.positional_embedding", v["decoder/position_encodings/encodings"], False)
    put("decoder.token_embedding.weight", v["decoder/embeddings/weight"], True)
    norm("decoder.ln", "decoder/layer_norm")
    for i in range(n_text_layer):
        s, d = f"decoder/layer_{i}", f"decoder.blocks.{i}"
        self_attn(s, d)
        kv_w, kv_b = v[s + "/attention/linear_1/weight"], v[s + "/attention/linear_1/bias"]
        no_key_bias(kv_b[:n_state], s + " cross")
        norm(d + ".cross_attn_ln", s + "/attention/layer_norm")
        lin(d + ".cross_attn.query", v[s + "/attention/linear_0/weight"], v[s + "/attention/linear_0/bias"])
        lin(d + ".cross_attn.key", kv_w[:n_state], None)
        lin(d + ".cross_attn.value", kv_w[n_state:], kv_b[n_state:])
        lin(d + ".cross_attn.out", v[s + "/attention/linear_2/weight"], v[s + "/attention/linear_2/bias"])
        norm(d + ".mlp_ln", s + "/ffn/layer_norm")
        lin(d + ".mlp.0", v[s + "/ffn/linear_0/weight"], v[s + "/ffn/linear_0/bias"])
        lin(d + ".mlp.2", v[s + "/ffn/linear_1/weight"], v[s + "/ffn/linear_1/bias"])
    f.close()
    print(f"{out}: n_vocab {n_vocab}, n_mels {n_mels}, n_state {n_state}, heads {n_audio_head}, "
          f"layers {n_audio_layer}+{n_text_layer}, {eot} vocabulary entries, {n_written} tensors, "
          f"{os.path.getsize(out) / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
