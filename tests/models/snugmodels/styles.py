"""Writers for the three export conventions.

optimum     torch.onnx (TorchScript) as Optimum runs it: standard ops, opset 14, fp32,
            '/model/layers.0/self_attn/q_proj/MatMul', MatMul weights pre-transposed
            into 'onnx::MatMul_N' initializers, explicit causal+padding mask, rotary
            with rotate_half, repeat_kv by Expand+Reshape, position_ids input.
onnxscript  torch.onnx dynamo / onnxscript: standard ops, opset 18 (ReduceMean axes as
            an input), node names 'model/layers.0/self_attn/q_proj/MatMul', values
            'val_N', weights kept in HF layout under their parameter names with a
            Transpose before each MatMul (the tied lm_head reuses the embedding).
genai       onnxruntime-genai's model builder: GroupQueryAttention with rotary from
            cos/sin caches, seqlens_k/total_sequence_length from the attention mask,
            SimplifiedLayerNormalization + SkipSimplifiedLayerNormalization,
            MatMulNBits int4 (block 32, zero points) named '<MatMul>_Q4', opset 21.
genai-sym   what onnxruntime-genai 0.18.0's builder writes for `-p int4 -e cpu` (its
            defaults: accuracy_level 4, block 32, symmetric, MatMul quantized): Q/K/V
            packed into one qkv_proj MatMul, blocks from onnxruntime 1.32.0's
            MatMulNBitsQuantizer (symmetric: no zero_points input, the default 8),
            weights in model.onnx.data. A tied model's embedding is the builder's
            default (shared_embeddings follows tie_word_embeddings): the lm_head's int4
            B reshaped to [vocab, padded_hidden/2] (/model/embed_tokens/Reshape) and
            com.microsoft GatherBlockQuantized over it with the lm_head's scales (bits 4,
            block 32, gather_axis 0, quantize_axis 1, no zero points), a Slice when the
            hidden size is not a multiple of the block (builders/base.py
            make_embedding_lookup); an untied one keeps the fp32 Gather. Differs from
            the builder: tensors under 1 KB stay in model.onnx (the builder
            externalizes all).
"""
from __future__ import annotations

import numpy as np

from .config import LlmConfig
from .graph import FLOAT, INT32, INT64, GenaiNaming, Graph, Naming, OnnxscriptNaming
from .quant import quantize_int4, quantize_int4_sym_ort
from .weights import Weights

F32_MIN = float(np.finfo(np.float32).min)


def rope_inv_freq(cfg: LlmConfig) -> np.ndarray:
    hd = cfg.head_dim
    return (1.0 / (np.float32(cfg.rope_theta) ** (np.arange(0, hd, 2, dtype=np.float32) / np.float32(hd)))).astype(np.float32)


def rope_cache(cfg: LlmConfig) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin caches [context, head_dim/2], computed in fp32 as the explicit graph does."""
    pos = np.arange(cfg.context, dtype=np.float32)[:, None]
    freqs = (pos * rope_inv_freq(cfg)[None, :]).astype(np.float32)
    return np.cos(freqs).astype(np.float32), np.sin(freqs).astype(np.float32)


# --------------------------------------------------------------------- standard ops


class _Standard:
    """Shared by the optimum and onnxscript writers."""

    def __init__(self, cfg: LlmConfig, w: Weights, onnxscript: bool):
        self.cfg, self.w, self.os = cfg, w, onnxscript
        self.opset = 18 if onnxscript else 14
        self.g = Graph(OnnxscriptNaming() if onnxscript else Naming())
        self._mm = 0

    def c(self, v, dtype=np.int64):
        return self.g.const(v, dtype)

    def cf(self, v):
        return self.g.const(v, np.float32)

    def linear(self, x: str, w_hf: np.ndarray, param: str) -> str:
        """y = x @ W^T for an HF Linear weight W [out, in]."""
        g = self.g
        if self.os:
            name = param if param in g._init_names else g.initializer(param, w_hf)
            wt = g.op("Transpose", [name], perm=[1, 0])
            return g.op("MatMul", [x, wt])
        self._mm += 1
        init = g.initializer(f"onnx::MatMul_{9000 + self._mm}", np.ascontiguousarray(w_hf.T))
        return g.op("MatMul", [x, init])

    def rmsnorm(self, x: str, weight: np.ndarray, param: str) -> str:
        g = self.g
        p = g.op("Pow", [x, self.cf(2.0)])
        if self.opset >= 18:
            m = g.op("ReduceMean", [p, self.c([-1])], keepdims=1)
        else:
            m = g.op("ReduceMean", [p], axes=[-1], keepdims=1)
        a = g.op("Add", [m, self.cf(self.cfg.rms_eps)])
        s = g.op("Sqrt", [a])
        r = g.op("Reciprocal", [s])
        y = g.op("Mul", [x, r])
        return g.op("Mul", [g.initializer(param, weight), y])

    def rotate(self, x: str, cos: str, sin: str) -> str:
        g, hd = self.g, self.cfg.head_dim
        half = hd // 2
        x1 = g.op("Slice", [x, self.c([0]), self.c([half]), self.c([-1])])
        x2 = g.op("Slice", [x, self.c([half]), self.c([hd]), self.c([-1])])
        rot = g.op("Concat", [g.op("Neg", [x2]), x1], axis=-1)
        return g.op("Add", [g.op("Mul", [x, cos]), g.op("Mul", [rot, sin])])

    def build(self) -> Graph:
        cfg, w, g = self.cfg, self.w, self.g
        hd, nh, kvh = cfg.head_dim, cfg.heads, cfg.kv_heads
        if self.os:
            b, s, p, t = "batch", "seq_len", "past_seq_len", "total_seq_len"
        else:
            b, s, p, t = ("batch_size", "sequence_length", "past_sequence_length",
                          "past_sequence_length + sequence_length")
        ids = g.input("input_ids", INT64, [b, s])
        mask_in = g.input("attention_mask", INT64, [b, t])
        pos = g.input("position_ids", INT64, [b, s])
        past = []
        for i in range(cfg.layers):
            past.append((g.input(f"past_key_values.{i}.key", FLOAT, [b, kvh, p, hd]),
                         g.input(f"past_key_values.{i}.value", FLOAT, [b, kvh, p, hd])))

        embed_name = "model.embed_tokens.weight"
        with g.scope("model", "embed_tokens"):
            h = g.op("Gather", [g.initializer(embed_name, w.embed), ids])

        # causal + padding mask [B, 1, S, T]: query i (absolute past+i) sees key j <= past+i
        with g.scope("model"):
            if self.opset >= 15:
                seq = g.op("Squeeze", [g.op("Shape", [ids], start=1, end=2), self.c([0])])
                pastlen = g.op("Squeeze", [g.op("Shape", [past[0][0]], start=2, end=3), self.c([0])])
                total = g.op("Squeeze", [g.op("Shape", [mask_in], start=1, end=2), self.c([0])])
            else:
                seq = g.op("Gather", [g.op("Shape", [ids]), self.c(1)], axis=0)
                pastlen = g.op("Gather", [g.op("Shape", [past[0][0]]), self.c(2)], axis=0)
                total = g.op("Gather", [g.op("Shape", [mask_in]), self.c(1)], axis=0)
            qpos = g.op("Add", [g.op("Range", [self.c(0), seq, self.c(1)]), pastlen])
            kpos = g.op("Range", [self.c(0), total, self.c(1)])
            causal = g.op("LessOrEqual", [g.op("Unsqueeze", [kpos, self.c([0])]),
                                          g.op("Unsqueeze", [qpos, self.c([1])])])
            pad = g.op("Cast", [g.op("Unsqueeze", [mask_in, self.c([1, 2])])], to=9)  # BOOL
            allowed = g.op("And", [causal, pad])
            mask = g.op("Where", [allowed, self.cf(0.0), self.cf(F32_MIN)])

        with g.scope("model", "rotary_emb"):
            posf = g.op("Cast", [g.op("Unsqueeze", [pos, self.c([2])])], to=FLOAT)
            freqs = g.op("Mul", [posf, g.initializer("model.rotary_emb.inv_freq", rope_inv_freq(cfg))
                                 if not self.os else self.cf(rope_inv_freq(cfg))])
            emb = g.op("Concat", [freqs, freqs], axis=-1)
            cos = g.op("Unsqueeze", [g.op("Cos", [emb]), self.c([1])])
            sin = g.op("Unsqueeze", [g.op("Sin", [emb]), self.c([1])])

        n_rep = nh // kvh
        scale = np.float32(1.0 / np.sqrt(hd))
        for i, lw in enumerate(w.layers):
            pre = f"model.layers.{i}"
            with g.scope("model", f"layers.{i}"):
                residual = h
                with g.scope("input_layernorm"):
                    x = self.rmsnorm(h, lw.input_norm, f"{pre}.input_layernorm.weight")
                with g.scope("self_attn"):
                    with g.scope("q_proj"):
                        q = self.linear(x, lw.q, f"{pre}.self_attn.q_proj.weight")
                    with g.scope("k_proj"):
                        k = self.linear(x, lw.k, f"{pre}.self_attn.k_proj.weight")
                    with g.scope("v_proj"):
                        v = self.linear(x, lw.v, f"{pre}.self_attn.v_proj.weight")
                    q = g.op("Transpose", [g.op("Reshape", [q, self.c([0, 0, nh, hd])])], perm=[0, 2, 1, 3])
                    k = g.op("Transpose", [g.op("Reshape", [k, self.c([0, 0, kvh, hd])])], perm=[0, 2, 1, 3])
                    v = g.op("Transpose", [g.op("Reshape", [v, self.c([0, 0, kvh, hd])])], perm=[0, 2, 1, 3])
                    q = self.rotate(q, cos, sin)
                    k = self.rotate(k, cos, sin)
                    k_all = g.op("Concat", [past[i][0], k], axis=2, outputs=[f"present.{i}.key"])
                    v_all = g.op("Concat", [past[i][1], v], axis=2, outputs=[f"present.{i}.value"])
                    if n_rep > 1:
                        rep = self.c([1, 1, n_rep, 1, 1])
                        shp = self.c([0, nh, -1, hd])
                        k_all = g.op("Reshape", [g.op("Expand", [g.op("Unsqueeze", [k_all, self.c([2])]), rep]), shp])
                        v_all = g.op("Reshape", [g.op("Expand", [g.op("Unsqueeze", [v_all, self.c([2])]), rep]), shp])
                    scores = g.op("MatMul", [q, g.op("Transpose", [k_all], perm=[0, 1, 3, 2])])
                    scores = g.op("Mul", [scores, self.cf(scale)])
                    scores = g.op("Add", [scores, mask])
                    probs = g.op("Softmax", [scores], axis=-1)
                    ctx = g.op("MatMul", [probs, v_all])
                    ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), self.c([0, 0, nh * hd])])
                    with g.scope("o_proj"):
                        o = self.linear(ctx, lw.o, f"{pre}.self_attn.o_proj.weight")
                h = g.op("Add", [residual, o])
                residual = h
                with g.scope("post_attention_layernorm"):
                    x = self.rmsnorm(h, lw.post_norm, f"{pre}.post_attention_layernorm.weight")
                with g.scope("mlp"):
                    with g.scope("gate_proj"):
                        gate = self.linear(x, lw.gate, f"{pre}.mlp.gate_proj.weight")
                    with g.scope("act_fn"):
                        act = g.op("Mul", [gate, g.op("Sigmoid", [gate])])
                    with g.scope("up_proj"):
                        up = self.linear(x, lw.up, f"{pre}.mlp.up_proj.weight")
                    prod = g.op("Mul", [act, up])
                    with g.scope("down_proj"):
                        down = self.linear(prod, lw.down, f"{pre}.mlp.down_proj.weight")
                h = g.op("Add", [residual, down])
        with g.scope("model", "norm"):
            x = self.rmsnorm(h, w.final_norm, "model.norm.weight")
        with g.scope("lm_head"):
            if self.os:
                head = embed_name if cfg.tie_embeddings else g.initializer("lm_head.weight", w.lm_head)
                logits = g.op("MatMul", [x, g.op("Transpose", [head], perm=[1, 0])], outputs=["logits"])
            else:
                self._mm += 1
                init = g.initializer(f"onnx::MatMul_{9000 + self._mm}", np.ascontiguousarray(w.lm_head.T))
                logits = g.op("MatMul", [x, init], outputs=["logits"])
        del logits
        g.output("logits", FLOAT, [b, s, cfg.vocab])
        for i in range(cfg.layers):
            tt = "total_seq_len" if self.os else t
            g.output(f"present.{i}.key", FLOAT, [b, kvh, tt, hd])
            g.output(f"present.{i}.value", FLOAT, [b, kvh, tt, hd])
        return g


# --------------------------------------------------------------------------- genai


def gguf_to_nbits(raw) -> tuple[int, np.ndarray, np.ndarray, np.ndarray | None]:
    """Re-encode GGUF blocks losslessly as MatMulNBits (block 32): Q4_1 (d*q + m) as
    4 bits with float zero points -m/d; Q4_0 (d*(q - 8)) as 4 bits with the default
    zero point 8; Q8_0 (d*q, q int8) as 8 bits with the default zero point 128.
    Returns (bits, B, scales, zero_points or None)."""
    kind, codes, d, m = raw
    n, k = codes.shape
    kb = k // 32
    if kind == "q4_1":
        q = codes.reshape(n, kb, 32).copy()
        scale = d.copy()
        flat = scale == 0.0
        zp = np.where(flat, 0.0, -m / np.where(flat, 1.0, d)).astype(np.float32)
        # a constant block (d == 0) is m everywhere: code 1, zero point 0, scale m
        q[flat] = 1
        scale[flat] = m[flat]
        b = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
        return 4, b, scale.reshape(-1).astype(np.float32), zp.reshape(-1)
    if kind == "q4_0":
        q = codes.reshape(n, kb, 32)
        b = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
        return 4, b, d.reshape(-1).astype(np.float32), None
    if kind == "q8_0":
        b = (codes.astype(np.int16) + 128).astype(np.uint8).reshape(n, kb, 32)
        return 8, b, d.reshape(-1).astype(np.float32), None
    raise ValueError(kind)


class _Genai:
    """sym: as onnxruntime-genai 0.18.0's builder writes `-p int4 -e cpu` (write_model's
    genai-sym): Q, K and V in one qkv_proj MatMul into GroupQueryAttention's query (key
    and value absent), the blocks quantized by onnxruntime's MatMulNBitsQuantizer
    (symmetric, no zero points), scales [N, k_blocks] as it stores them, and for a tied
    model the embedding a GatherBlockQuantized over the lm_head's blocks."""

    def __init__(self, cfg: LlmConfig, w: Weights, quant: bool, accuracy_level: int, block: int,
                 from_gguf: bool = False, sym: bool = False):
        self.cfg, self.w = cfg, w
        self.quant, self.acc, self.block = quant, accuracy_level, block
        self.from_gguf = from_gguf
        self.sym = sym
        self.head_q = None  # (B, scales) initializer names of the lm_head, shared by a tied embedding
        self.g = Graph(GenaiNaming())

    def linear(self, x: str, w_hf: np.ndarray, key: str = "", outputs=None) -> str:
        """MatMul (fp32) or MatMulNBits; the node is named in the current scope."""
        g = self.g
        base = g.naming.node_name(g._scope, "MatMul", 0).lstrip("/").replace("/", ".")
        if self.from_gguf:
            raw = self.w.gguf_quant.get(key)
            if raw is None:
                raise ValueError(f"no GGUF quantization for {key}")
            bits, b, scales, zp = gguf_to_nbits(raw)
            n, k = w_hf.shape
            ins = [x, g.initializer(base + ".qweight", b), g.initializer(base + ".scales", scales)]
            if zp is not None:
                ins.append(g.initializer(base + ".qzeros", zp))
            # ORT's CPU kernel for 8 bits is a slow reference loop unless accuracy_level
            # is 4 (int8 activations, as llama.cpp's q8 dot products): the head uses 4.
            return g.op("MatMulNBits", ins, domain="com.microsoft", name_op="MatMulNBits", outputs=outputs,
                        K=k, N=n, bits=bits, block_size=32, accuracy_level=4 if bits == 8 else self.acc)
        w_kn = np.ascontiguousarray(w_hf.T)
        k, n = w_kn.shape
        if not self.quant:
            return g.op("MatMul", [x, g.initializer(base + ".weight", w_kn)], outputs=outputs)
        if self.sym:
            # MatMulNBitsQuantizer's names: <weight>_Q4, <weight>_scales, node <MatMul>_Q4
            if key == "lm_head" and self.head_q:  # shared with the embedding (tied_embedding)
                ins = [x, *self.head_q]
            else:
                b, scales = quantize_int4_sym_ort(w_kn, self.block)
                ins = [x, g.initializer(base + ".weight_Q4", b), g.initializer(base + ".weight_scales", scales)]
            return g.op("MatMulNBits", ins, domain="com.microsoft", name_op="MatMul_Q4", outputs=outputs,
                        K=k, N=n, bits=4, block_size=self.block, accuracy_level=self.acc)
        b, scales, zp, _ = quantize_int4(w_kn, self.block)
        ins = [x, g.initializer(base + ".weight_Q4", b), g.initializer(base + ".weight_scales", scales),
               g.initializer(base + ".weight_zero_points", zp)]
        return g.op("MatMulNBits", ins, domain="com.microsoft", name_op="MatMul_Q4", outputs=outputs,
                    K=k, N=n, bits=4, block_size=self.block, accuracy_level=self.acc)

    def tied_embedding(self, ids: str) -> str:
        """The builder's shared embedding (0.18.0 builders/base.py make_embedding_lookup,
        tied and quantized): the lm_head's int4 B reshaped to [vocab, padded_hidden/2]
        bytes, GatherBlockQuantized over it with the lm_head's scales (symmetric: no zero
        points), Slice to hidden when the rows are padded to whole blocks. The lm_head
        (linear) reuses these initializers."""
        cfg, g, bs = self.cfg, self.g, self.block
        b, scales = quantize_int4_sym_ort(np.ascontiguousarray(self.w.lm_head.T), bs)
        self.head_q = (g.initializer("lm_head.MatMul.weight_Q4", b),
                       g.initializer("lm_head.MatMul.weight_scales", scales))
        padded = (cfg.hidden + bs - 1) // bs * bs
        flat = padded * 4 // 8
        shape = g.initializer(f"/model/constants/INT64/[{cfg.vocab}, {flat}]", np.array([cfg.vocab, flat], np.int64))
        table = g.op("Reshape", [self.head_q[0], shape])
        h = g.op("GatherBlockQuantized", [table, ids, self.head_q[1]], domain="com.microsoft",
                 bits=4, block_size=bs, gather_axis=0, quantize_axis=1)
        if padded != cfg.hidden:
            h = g.op("Slice", [h, g.const([0]), g.const([cfg.hidden]), g.const([-1])])
        return h

    def skip_norm(self, x: str, skip: str, weight: np.ndarray, param: str):
        out = self.g.op("SkipSimplifiedLayerNormalization", [x, skip, self.g.initializer(param, weight)],
                        domain="com.microsoft", name_op="SkipLayerNorm",
                        outputs=[None, "", "", "{node}/output_3"], epsilon=self.cfg.rms_eps)
        return out[0], out[3]

    def build(self) -> Graph:
        cfg, w, g = self.cfg, self.w, self.g
        hd, nh, kvh = cfg.head_dim, cfg.heads, cfg.kv_heads
        b, s, p, t = "batch_size", "sequence_length", "past_sequence_length", "total_sequence_length"
        ids = g.input("input_ids", INT64, [b, s])
        mask_in = g.input("attention_mask", INT64, [b, t])
        past = []
        for i in range(cfg.layers):
            past.append((g.input(f"past_key_values.{i}.key", FLOAT, [b, kvh, p, hd]),
                         g.input(f"past_key_values.{i}.value", FLOAT, [b, kvh, p, hd])))
        with g.scope("model", "embed_tokens"):
            if self.sym and cfg.tie_embeddings:
                h = self.tied_embedding(ids)
            else:
                h = g.op("Gather", [g.initializer("model.embed_tokens.weight", w.embed), ids])
        with g.scope("model", "attn_mask_reformat", "attn_mask_subgraph"):
            rs = g.op("ReduceSum", [mask_in, g.const([1])], keepdims=0)
            seqlens_k = g.op("Cast", [g.op("Sub", [rs, g.const([1])])], to=INT32)
            total = g.op("Cast", [g.op("Gather", [g.op("Shape", [mask_in]), g.const(1)], axis=0)], to=INT32)
        cos, sin = rope_cache(cfg)
        cos_name = g.initializer("cos_cache", cos)
        sin_name = g.initializer("sin_cache", sin)

        residual = None
        mlp_out = None
        for i, lw in enumerate(w.layers):
            pre = f"model.layers.{i}"
            with g.scope("model", f"layers.{i}"):
                with g.scope("input_layernorm"):
                    if i == 0:
                        x = g.op("SimplifiedLayerNormalization",
                                 [h, g.initializer(f"{pre}.input_layernorm.weight", lw.input_norm)],
                                 name_op="LayerNorm", axis=-1, epsilon=cfg.rms_eps, stash_type=1)
                        residual = h
                    else:
                        x, residual = self.skip_norm(mlp_out, residual, lw.input_norm,
                                                     f"{pre}.input_layernorm.weight")
                with g.scope("attn"):
                    if self.sym:  # the builder's packed MatMul: rows q, then k, then v
                        with g.scope("qkv_proj"):
                            q = self.linear(x, np.concatenate([lw.q, lw.k, lw.v]), f"layers.{i}.qkv")
                        k = v = ""
                    else:
                        with g.scope("q_proj"):
                            q = self.linear(x, lw.q, f"layers.{i}.q")
                        with g.scope("k_proj"):
                            k = self.linear(x, lw.k, f"layers.{i}.k")
                        with g.scope("v_proj"):
                            v = self.linear(x, lw.v, f"layers.{i}.v")
                    more = {"softcap": 0.0} if self.sym else {}
                    attn = g.op("GroupQueryAttention",
                                [q, k, v, past[i][0], past[i][1], seqlens_k, total, cos_name, sin_name],
                                domain="com.microsoft",
                                outputs=[None, f"present.{i}.key", f"present.{i}.value"],
                                num_heads=nh, kv_num_heads=kvh, do_rotary=1, rotary_interleaved=0,
                                local_window_size=-1, scale=float(np.float32(1.0 / np.sqrt(hd))), **more)[0]
                    with g.scope("o_proj"):
                        o = self.linear(attn, lw.o, f"layers.{i}.o")
                with g.scope("post_attention_layernorm"):
                    x, residual = self.skip_norm(o, residual, lw.post_norm, f"{pre}.post_attention_layernorm.weight")
                with g.scope("mlp"):
                    with g.scope("gate_proj"):
                        gate = self.linear(x, lw.gate, f"layers.{i}.gate")
                    with g.scope("up_proj"):
                        up = self.linear(x, lw.up, f"layers.{i}.up")
                    with g.scope("act_fn"):
                        act = g.op("Mul", [gate, g.op("Sigmoid", [gate])])
                    prod = g.op("Mul", [act, up])
                    with g.scope("down_proj"):
                        mlp_out = self.linear(prod, lw.down, f"layers.{i}.down")
        L = cfg.layers
        with g.scope("model", f"layers.{L}", "final_norm_layernorm"):
            x, _ = self.skip_norm(mlp_out, residual, w.final_norm, f"model.layers.{L}.final_norm_layernorm.weight")
        with g.scope("lm_head"):
            self.linear(x, w.lm_head, "lm_head", outputs=["logits"])
        g.output("logits", FLOAT, [b, s, cfg.vocab])
        for i in range(cfg.layers):
            g.output(f"present.{i}.key", FLOAT, [b, kvh, t, hd])
            g.output(f"present.{i}.value", FLOAT, [b, kvh, t, hd])
        return g


# ----------------------------------------------------------------------- interface


def write_model(cfg: LlmConfig, w: Weights, style: str, path: str, accuracy_level: int = 4,
                block: int = 32, force_external: bool = False) -> dict:
    """Write one style of the model to `path` (model.onnx). Returns facts for the manifest."""
    base = style.split("-")[0]
    external = style.endswith("-extdata") or force_external
    strip = style.endswith("-noname")
    if base in ("optimum", "onnxscript"):
        g = _Standard(cfg, w, onnxscript=(base == "onnxscript")).build()
        if base == "optimum":
            opsets, ir, producer = {"": 14}, 7, ("pytorch", "2.5.1")
        else:
            opsets, ir, producer = {"": 18}, 10, ("pytorch", "2.7.0")
    elif base == "genai":
        quant = style != "genai-fp32"
        # genai-q41's 4-bit layers at accuracy_level 0, float activations against the blocks
        # dequantized exactly: ORT computes its float zero points in float at any level (it
        # never prepacks them). genai-q40's at 4: llama.cpp's Q4_0 products quantize the
        # activations to Q8_0 (int8 blocks of 32), which is accuracy_level 4's arithmetic, and
        # without zero points ORT takes its int8 kernels too. The 8-bit heads use 4 (linear).
        acc = 0 if style in ("genai-acc0", "genai-q41") else 4 if style == "genai-q40" else accuracy_level
        g = _Genai(cfg, w, quant=quant, accuracy_level=acc, block=block,
                   from_gguf=(style in ("genai-q41", "genai-q40")), sym=(style == "genai-sym")).build()
        opsets, ir, producer = {"": 21, "com.microsoft": 1}, 10, ("onnxruntime-genai", "0.8.0")
        if style == "genai-sym":
            # the builder saves every tensor to model.onnx.data (ours: those of >= 1 KB, packed)
            producer, external = ("onnxruntime-genai", "0.18.0"), True
    else:
        raise ValueError(f"unknown style {style}")
    if style == "genai-q41":
        extra = {"accuracy_level": "0 (4-bit layers), 4 (8-bit head)", "block_size": 32,
                 "bits": "4 (Q4_1 layers, float zero points), 8 (lm_head from the Q8_0 embedding)"}
    elif style == "genai-q40":
        extra = {"accuracy_level": 4, "block_size": 32, "zero_points": False,
                 "bits": "4 (Q4_0 layers, no zero points: the default 8), 8 (lm_head from the Q8_0 output.weight)"}
    elif style == "genai-sym":
        extra = {"accuracy_level": acc, "block_size": block, "bits": 4, "zero_points": False,
                 "qkv": "packed", "quantizer": "onnxruntime MatMulNBitsQuantizer (symmetric)",
                 "embedding": ("GatherBlockQuantized over the lm_head's int4 blocks" if cfg.tie_embeddings
                               else "fp32 Gather")}
    elif base == "genai" and style != "genai-fp32":
        extra = {"accuracy_level": acc, "block_size": block, "bits": 4}
    else:
        extra = {}
    g.save(path, "main_graph", opsets, ir, producer, external_data=external,
           align=4096 if force_external else 0, strip_names=strip)
    return {"style": style, "external_data": external, "node_names": not strip,
            "nodes": len(g.nodes), "initializers": len(g.initializers),
            "opsets": opsets, **extra}
