"""Weights in Hugging Face layout (Linear weights are [out_features, in_features], fp32),
from random numbers or from a GGUF file."""
from __future__ import annotations

import dataclasses

import numpy as np

from .config import LlmConfig


@dataclasses.dataclass
class LayerWeights:
    input_norm: np.ndarray   # [H]
    q: np.ndarray            # [heads*hd, H]
    k: np.ndarray            # [kv*hd, H]
    v: np.ndarray            # [kv*hd, H]
    o: np.ndarray            # [H, heads*hd]
    post_norm: np.ndarray    # [H]
    gate: np.ndarray         # [I, H]
    up: np.ndarray           # [I, H]
    down: np.ndarray         # [H, I]


@dataclasses.dataclass
class Weights:
    embed: np.ndarray        # [V, H]
    layers: list[LayerWeights]
    final_norm: np.ndarray   # [H]
    lm_head: np.ndarray      # [V, H]; the same array as embed when tied
    # GGUF block quantization of a weight, when the source had one, keyed like
    # "layers.3.q" / "lm_head": (kind, codes uint8/int8 [out, in], d f32 [out, in/32],
    # m f32 [out, in/32] or None); value = d*q + m (q4_1), d*(q - 8) (q4_0), d*q (q8_0).
    # Rows already un-permuted.
    gguf_quant: dict = dataclasses.field(default_factory=dict)


def random_weights(cfg: LlmConfig) -> Weights:
    """Deterministic random weights (seeded by cfg.seed). Scaled so activations stay
    O(1) through the layers and logits spread over a few units: greedy choices are
    then well separated and comparisons between runtimes are meaningful."""
    cfg.validate()
    rng = np.random.default_rng(cfg.seed)
    h, i, hd = cfg.hidden, cfg.intermediate, cfg.head_dim

    def lin(out_f: int, in_f: int, gain: float = 1.0) -> np.ndarray:
        w = rng.standard_normal((out_f, in_f), dtype=np.float32)
        w *= np.float32(gain / np.sqrt(in_f))
        return w

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    embed = rng.standard_normal((cfg.vocab, h), dtype=np.float32)
    layers = []
    for _ in range(cfg.layers):
        layers.append(LayerWeights(
            input_norm=norm(h),
            q=lin(cfg.heads * hd, h, 2.0), k=lin(cfg.kv_heads * hd, h, 2.0),
            v=lin(cfg.kv_heads * hd, h), o=lin(h, cfg.heads * hd, 0.5),
            post_norm=norm(h),
            gate=lin(i, h), up=lin(i, h), down=lin(h, i, 0.5)))
    final_norm = norm(h)
    lm_head = embed if cfg.tie_embeddings else lin(cfg.vocab, h, 4.0)
    if cfg.tie_embeddings:
        # A tied head with unit-variance embeddings makes each token its own best
        # successor (the residual stream is mostly the input embedding). Smaller
        # embeddings let the layers steer; a larger final norm gain keeps the logits
        # a few units wide.
        embed *= np.float32(1.0 / np.sqrt(h))
        final_norm *= np.float32(3.0)
    return Weights(embed=embed, layers=layers, final_norm=final_norm, lm_head=lm_head)


# ---------------------------------------------------------------------------- GGUF


@dataclasses.dataclass
class GgufTokenizer:
    model: str                 # tokenizer.ggml.model ("gpt2" = byte-level BPE)
    pre: str                   # tokenizer.ggml.pre (pre-tokenizer flavour)
    tokens: list[str]
    token_types: list[int]     # 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
    merges: list[str]
    bos_token_id: int | None
    eos_token_id: int | None
    unk_token_id: int | None
    pad_token_id: int | None
    add_bos: bool
    add_space_prefix: bool
    chat_template: str | None


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def _unpermute_rope(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter reorders the rows of Q and K within each head from
    HF's rotate_half layout (first half, second half) to adjacent pairs. Undo it."""
    rows, cols = w.shape
    hd = rows // n_head
    return w.reshape(n_head, hd // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _permute_rope(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF's rotate_half rows to llama.cpp's adjacent pairs (its converter's permute):
    the inverse of _unpermute_rope."""
    rows, cols = w.shape
    hd = rows // n_head
    return w.reshape(n_head, 2, hd // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _raw_blocks(t) -> tuple | None:
    """Codes and block constants of a Q4_1 / Q4_0 / Q8_0 tensor (32 values per block)."""
    import gguf
    rows = int(t.data.shape[0])
    if t.tensor_type == gguf.GGMLQuantizationType.Q4_0:
        # d f16, then 16 bytes: values 0..15 in the low nibbles, 16..31 in the high ones
        blk = np.asarray(t.data, dtype=np.uint8).reshape(rows, -1, 18)
        d = blk[:, :, 0:2].copy().view(np.float16)[:, :, 0].astype(np.float32)
        qs = blk[:, :, 2:18]
        codes = np.concatenate([qs & 0x0F, qs >> 4], axis=2).reshape(rows, -1)
        return ("q4_0", codes.astype(np.uint8), d, None)
    if t.tensor_type == gguf.GGMLQuantizationType.Q4_1:
        blk = np.asarray(t.data, dtype=np.uint8).reshape(rows, -1, 20)
        d = blk[:, :, 0:2].copy().view(np.float16)[:, :, 0].astype(np.float32)
        m = blk[:, :, 2:4].copy().view(np.float16)[:, :, 0].astype(np.float32)
        qs = blk[:, :, 4:20]
        codes = np.concatenate([qs & 0x0F, qs >> 4], axis=2).reshape(rows, -1)
        return ("q4_1", codes.astype(np.uint8), d, m)
    if t.tensor_type == gguf.GGMLQuantizationType.Q8_0:
        blk = np.asarray(t.data, dtype=np.uint8).reshape(rows, -1, 34)
        d = blk[:, :, 0:2].copy().view(np.float16)[:, :, 0].astype(np.float32)
        codes = blk[:, :, 2:34].copy().view(np.int8).reshape(rows, -1)
        return ("q8_0", codes, d, None)
    return None


def _raw_dequant(raw) -> np.ndarray:
    kind, codes, d, m = raw
    rows, n = codes.shape
    q = codes.reshape(rows, -1, 32).astype(np.float32)
    if kind == "q4_0":
        q -= np.float32(8)
    v = q * d[:, :, None]
    if m is not None:
        v += m[:, :, None]
    return v.reshape(rows, n)


def read_gguf(path: str) -> tuple[LlmConfig, Weights, GgufTokenizer, dict]:
    """Read a llama-architecture GGUF: config, dequantized fp32 weights, tokenizer."""
    import gguf

    reader = gguf.GGUFReader(path)
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"{path}: architecture {arch!r}, only 'llama' is supported")

    def a(key, default=None):
        return _field(reader, f"{arch}.{key}", default)

    tokens = _field(reader, "tokenizer.ggml.tokens")
    heads = int(a("attention.head_count"))
    kv_heads = int(a("attention.head_count_kv", heads))
    hidden = int(a("embedding_length"))
    if int(a("rope.dimension_count", hidden // heads)) != hidden // heads:
        raise ValueError("partial rotary is not supported")
    tensors = {t.name: t for t in reader.tensors}
    vocab = int(a("vocab_size", len(tokens)))
    tie = "output.weight" not in tensors
    cfg = LlmConfig(
        name="smollm2-135m",
        layers=int(a("block_count")), hidden=hidden, heads=heads, kv_heads=kv_heads,
        intermediate=int(a("feed_forward_length")), vocab=vocab,
        context=int(a("context_length")), rope_theta=float(a("rope.freq_base", 10000.0)),
        rms_eps=float(np.float32(a("attention.layer_norm_rms_epsilon"))),
        tie_embeddings=tie,
        bos_token_id=int(_field(reader, "tokenizer.ggml.bos_token_id", 1)),
        eos_token_id=int(_field(reader, "tokenizer.ggml.eos_token_id", 2)),
        pad_token_id=int(_field(reader, "tokenizer.ggml.padding_token_id",
                                _field(reader, "tokenizer.ggml.eos_token_id", 2))),
    )
    cfg.validate()

    def get(name: str) -> np.ndarray:
        t = tensors[name]
        w = gguf.quants.dequantize(t.data, t.tensor_type)
        # GGUF shapes list the fastest dimension first; numpy's are reversed, which is
        # HF's [out_features, in_features].
        shape = tuple(int(d) for d in reversed(list(t.shape)))
        return np.ascontiguousarray(w.reshape(shape).astype(np.float32, copy=False))

    quant: dict = {}

    def getq(name: str, key: str, rope_heads: int = 0) -> np.ndarray:
        """Dequantized weight; its raw blocks are kept in `quant` (checked against
        gguf's own dequantization)."""
        w = get(name)
        raw = _raw_blocks(tensors[name])
        if raw is not None:
            if not np.array_equal(_raw_dequant(raw), w):
                raise ValueError(f"{name}: block parsing disagrees with gguf.dequantize")
            if rope_heads:
                kind, codes, d, m = raw
                raw = (kind, _unpermute_rope(codes, rope_heads), _unpermute_rope(d, rope_heads),
                       None if m is None else _unpermute_rope(m, rope_heads))
            quant[key] = raw
        return _unpermute_rope(w, rope_heads) if rope_heads else w

    layers = []
    for li in range(cfg.layers):
        p, k = f"blk.{li}.", f"layers.{li}."
        layers.append(LayerWeights(
            input_norm=get(p + "attn_norm.weight"),
            q=getq(p + "attn_q.weight", k + "q", heads),
            k=getq(p + "attn_k.weight", k + "k", kv_heads),
            v=getq(p + "attn_v.weight", k + "v"), o=getq(p + "attn_output.weight", k + "o"),
            post_norm=get(p + "ffn_norm.weight"),
            gate=getq(p + "ffn_gate.weight", k + "gate"), up=getq(p + "ffn_up.weight", k + "up"),
            down=getq(p + "ffn_down.weight", k + "down")))
    embed = getq("token_embd.weight", "embed")
    lm_head = embed if tie else getq("output.weight", "lm_head")
    if tie and "embed" in quant:
        quant["lm_head"] = quant["embed"]
    weights = Weights(embed=embed, layers=layers, final_norm=get("output_norm.weight"),
                      lm_head=lm_head, gguf_quant=quant)
    tt = reader.fields["tokenizer.ggml.token_type"]
    token_types = [int(tt.parts[i][0]) for i in tt.data]

    def opt_int(key):
        v = _field(reader, key)
        return None if v is None else int(v)

    tok = GgufTokenizer(
        model=_field(reader, "tokenizer.ggml.model"), pre=_field(reader, "tokenizer.ggml.pre", "default"),
        tokens=list(tokens), token_types=token_types,
        merges=list(_field(reader, "tokenizer.ggml.merges", [])),
        bos_token_id=opt_int("tokenizer.ggml.bos_token_id"),
        eos_token_id=opt_int("tokenizer.ggml.eos_token_id"),
        unk_token_id=opt_int("tokenizer.ggml.unknown_token_id"),
        pad_token_id=opt_int("tokenizer.ggml.padding_token_id"),
        add_bos=bool(_field(reader, "tokenizer.ggml.add_bos_token", False)),
        add_space_prefix=bool(_field(reader, "tokenizer.ggml.add_space_prefix", False)),
        chat_template=_field(reader, "tokenizer.chat_template"),
    )
    meta = {k: _field(reader, k) for k in ("general.name", "general.license", "general.organization",
                                           "general.file_type")}
    return cfg, weights, tok, meta


def write_gguf_f16(cfg: LlmConfig, w: Weights, path: str) -> None:
    """Write the weights as a llama-architecture GGUF as llama.cpp's convert_hf_to_gguf.py
    would for LlamaForCausalLM (the input of llama-quantize): matrices and the embedding
    F16, norms F32, Q and K rows permuted for llama.cpp's rope. The vocabulary is a
    placeholder of cfg.vocab tokens in Llama 2's layout (SentencePiece: <unk>, <s>, </s>,
    the 256 byte tokens, then "▁t<id>"): the presets have no real tokenizer, and
    llama.cpp only needs one that loads (llama-bench draws token ids, it tokenizes no
    text)."""
    import gguf

    cfg.validate()
    if cfg.vocab < 259:
        raise ValueError(f"{cfg.name}: vocab {cfg.vocab} below the placeholder's 259 fixed tokens")
    g = gguf.GGUFWriter(path, "llama")
    g.add_name(cfg.name)
    g.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    g.add_vocab_size(cfg.vocab)
    g.add_context_length(cfg.context)
    g.add_embedding_length(cfg.hidden)
    g.add_block_count(cfg.layers)
    g.add_feed_forward_length(cfg.intermediate)
    g.add_rope_dimension_count(cfg.head_dim)
    g.add_head_count(cfg.heads)
    g.add_head_count_kv(cfg.kv_heads)
    g.add_layer_norm_rms_eps(cfg.rms_eps)
    g.add_rope_freq_base(cfg.rope_theta)

    T = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [T.UNKNOWN, T.CONTROL, T.CONTROL] + [T.BYTE] * 256
    tokens += [f"\u2581t{i}" for i in range(len(tokens), cfg.vocab)]
    types += [T.NORMAL] * (cfg.vocab - len(types))
    g.add_tokenizer_model("llama")
    g.add_tokenizer_pre("default")
    g.add_token_list(tokens)
    g.add_token_scores([0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(cfg.vocab - 259)])
    g.add_token_types(types)
    g.add_bos_token_id(0 if cfg.bos_token_id is None else cfg.bos_token_id)
    g.add_eos_token_id(cfg.eos_token_id)
    g.add_unk_token_id(0)
    g.add_pad_token_id(cfg.pad_token_id)
    # no BOS: llama-bench's prompt is then all drawn ids, as snug bench's
    g.add_add_bos_token(False)
    g.add_add_eos_token(False)

    def mat(name: str, x: np.ndarray, rope_heads: int = 0) -> None:
        if rope_heads:
            x = _permute_rope(x, rope_heads)
        g.add_tensor(name, np.ascontiguousarray(x, dtype=np.float16))

    mat("token_embd.weight", w.embed)
    for i, lw in enumerate(w.layers):
        p = f"blk.{i}."
        g.add_tensor(p + "attn_norm.weight", np.asarray(lw.input_norm, np.float32))
        mat(p + "attn_q.weight", lw.q, cfg.heads)
        mat(p + "attn_k.weight", lw.k, cfg.kv_heads)
        mat(p + "attn_v.weight", lw.v)
        mat(p + "attn_output.weight", lw.o)
        g.add_tensor(p + "ffn_norm.weight", np.asarray(lw.post_norm, np.float32))
        mat(p + "ffn_gate.weight", lw.gate)
        mat(p + "ffn_up.weight", lw.up)
        mat(p + "ffn_down.weight", lw.down)
    g.add_tensor("output_norm.weight", np.asarray(w.final_norm, np.float32))
    if not cfg.tie_embeddings:
        mat("output.weight", w.lm_head)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
