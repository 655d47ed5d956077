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

    layers = []
    for li in range(cfg.layers):
        p = f"blk.{li}."
        layers.append(LayerWeights(
            input_norm=get(p + "attn_norm.weight"),
            q=_unpermute_rope(get(p + "attn_q.weight"), heads),
            k=_unpermute_rope(get(p + "attn_k.weight"), kv_heads),
            v=get(p + "attn_v.weight"), o=get(p + "attn_output.weight"),
            post_norm=get(p + "ffn_norm.weight"),
            gate=get(p + "ffn_gate.weight"), up=get(p + "ffn_up.weight"),
            down=get(p + "ffn_down.weight")))
    embed = get("token_embd.weight")
    lm_head = embed if tie else get("output.weight")
    weights = Weights(embed=embed, layers=layers, final_norm=get("output_norm.weight"),
                      lm_head=lm_head)
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
