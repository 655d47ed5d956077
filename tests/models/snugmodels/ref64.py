"""A float64 reference evaluator for the fixtures' graphs, quantized ones included.

ONNX Runtime has no double kernels for the com.microsoft ops the genai style uses
(MatMulNBits, GroupQueryAttention, SkipSimplifiedLayerNormalization), so a float64
answer for an int4/int8 model cannot come from it. This evaluator runs the graph in
numpy float64 instead: every float initializer widened, MatMulNBits' weights
dequantized exactly ((q - zero_point) * scale, in float64) and the activations never
quantized. That is the reference the accuracy rule for MatMulNBits accuracy_level 4
measures both runtimes against (tests/models/accuracy.py).

It implements the ops of the genai and optimum-free styles' graphs (see OPS) and
nothing else: an op it does not know is an error naming it. It is validated against
ONNX Runtime on the float paths of the same graphs (tests/models/accuracy.py
--validate: genai-fp32 and genai-acc0, whose ORT kernels compute in float32 without
quantizing activations, must agree with it within float32 error).

Semantics follow ONNX Runtime's ContribOperators.md (com.microsoft, 1.32):
  MatMulNBits: B [N, k_blocks, blob] uint8, bits 4 or 8 packed low bits first;
    scales [N * k_blocks]; zero_points packed like B (uint8) or as float, default
    2^(bits-1); Y = A @ dequant(B).T (+ bias, input 5).
  GroupQueryAttention: query/key/value packed [B, S, H*D], or query [B, S, (H+2Hkv)*D]
    holding all three (key and value absent); past [B, Hkv, P, D];
    seqlens_k = total - 1 per batch row; rotary (non-interleaved halves or
    interleaved pairs) on q and k at positions total-S..total-1 when do_rotary;
    causal; kv head h // (H / Hkv) for query head h; present = past ++ new.
  SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization: RMS norm over the
    last axis, y = x / sqrt(mean(x^2) + eps) * gamma; the skip form's output 3 is
    input + skip (+ bias).
"""
from __future__ import annotations

import numpy as np

ONNX_TO_NP = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64,
              9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
FLOATS = (1, 10, 11, 16)


class _Input:
    def __init__(self, name, shape):
        self.name, self.shape = name, shape


def _attrs(node):
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Unsigned codes of `bits` bits, low bits first in each byte, last axis to count."""
    p = packed.astype(np.uint8)
    if bits == 8:
        return p[..., :count].astype(np.int64)
    if bits == 4:
        lo, hi = p & 0x0F, p >> 4
        codes = np.stack([lo, hi], axis=-1).reshape(*p.shape[:-1], p.shape[-1] * 2)
        return codes[..., :count].astype(np.int64)
    if bits == 2:
        codes = np.stack([(p >> s) & 3 for s in (0, 2, 4, 6)], axis=-1).reshape(*p.shape[:-1], p.shape[-1] * 4)
        return codes[..., :count].astype(np.int64)
    raise ValueError(f"MatMulNBits: bits={bits} not supported by the float64 reference")


def dequant_matmulnbits(b, scales, zp, attrs) -> np.ndarray:
    """The exact float64 weight [N, K] of a MatMulNBits node."""
    N, K, bits, bs = attrs["N"], attrs["K"], attrs["bits"], attrs["block_size"]
    kb = (K + bs - 1) // bs
    q = _unpack(b.reshape(N, kb, -1), bits, bs)              # [N, kb, bs]
    s = scales.astype(np.float64).reshape(N, kb)
    if zp is None:
        z = np.full((N, kb), float(1 << (bits - 1)))
    elif zp.dtype == np.uint8:
        z = _unpack(zp.reshape(N, -1), bits, kb).astype(np.float64)
    else:
        z = zp.astype(np.float64).reshape(N, kb)
    w = (q.astype(np.float64) - z[:, :, None]) * s[:, :, None]
    return w.reshape(N, kb * bs)[:, :K]


def _rms(x, gamma, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma


def _rotary(x, pos, cos, sin, interleaved):
    """x [B, H, S, D]; pos [S]; cos/sin [max_pos, R/2], R = 2 * cos.shape[1] <= D."""
    r = cos.shape[1] * 2
    c, s = cos[pos][None, None], sin[pos][None, None]
    out = x.copy()
    if interleaved:
        x1, x2 = x[..., 0:r:2], x[..., 1:r:2]
        out[..., 0:r:2] = x1 * c - x2 * s
        out[..., 1:r:2] = x2 * c + x1 * s
    else:
        x1, x2 = x[..., : r // 2], x[..., r // 2: r]
        out[..., : r // 2] = x1 * c - x2 * s
        out[..., r // 2: r] = x2 * c + x1 * s
    return out


def _gqa(ins, a):
    q, k, v, pk, pv, seqlens, total = ins[:7]
    cos = ins[7] if len(ins) > 7 else None
    sin = ins[8] if len(ins) > 8 else None
    H, Hkv = a["num_heads"], a["kv_num_heads"]
    if len(ins) > 9 and ins[9] is not None:
        raise ValueError("GroupQueryAttention: position_ids input not supported by the float64 reference")
    if a.get("local_window_size", -1) not in (-1, 0) or a.get("softcap", 0.0):
        raise ValueError("GroupQueryAttention: local_window_size / softcap not supported by the float64 reference")
    B, S, _ = q.shape
    if k is None:  # packed QKV: query [B, S, (H + 2 Hkv) * D], key and value absent
        D = q.shape[2] // (H + 2 * Hkv)
        q, k, v = q[..., :H * D], q[..., H * D:(H + Hkv) * D], q[..., (H + Hkv) * D:]
    D = q.shape[2] // H
    q = q.reshape(B, S, H, D).transpose(0, 2, 1, 3)
    k = k.reshape(B, S, Hkv, D).transpose(0, 2, 1, 3)
    v = v.reshape(B, S, Hkv, D).transpose(0, 2, 1, 3)
    if B != 1:
        raise ValueError("GroupQueryAttention: the float64 reference runs batch 1")
    tot = int(np.asarray(seqlens).reshape(-1)[0]) + 1
    past = tot - S
    if pk is not None and pk.shape[2] < past:
        raise ValueError(f"GroupQueryAttention: past holds {pk.shape[2]} positions, seqlens_k says {past}")
    pos = np.arange(past, tot)
    if a.get("do_rotary", 0):
        il = bool(a.get("rotary_interleaved", 0))
        q = _rotary(q, pos, cos, sin, il)
        k = _rotary(k, pos, cos, sin, il)
    keys = np.concatenate([pk[:, :, :past], k], axis=2) if pk is not None else k
    vals = np.concatenate([pv[:, :, :past], v], axis=2) if pv is not None else v
    scale = a.get("scale", 0.0) or 1.0 / np.sqrt(D)
    rep = H // Hkv
    kk = np.repeat(keys, rep, axis=1)
    vv = np.repeat(vals, rep, axis=1)
    att = np.einsum("bhsd,bhtd->bhst", q, kk) * scale
    mask = np.arange(tot)[None, :] > pos[:, None]             # [S, tot]: future keys
    att = np.where(mask[None, None], -np.inf, att)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att /= att.sum(axis=-1, keepdims=True)
    out = np.einsum("bhst,bhtd->bhsd", att, vv).transpose(0, 2, 1, 3).reshape(B, S, H * D)
    return [out, keys, vals]


class Ref64:
    """A session-like object (get_inputs(), run(names, feeds)) that evaluates an ONNX
    model in float64. Float graph inputs may be fed as float32 or float64; float
    outputs come back as float64."""

    OPS = ("Gather", "ReduceSum", "Sub", "Add", "Mul", "Div", "Sigmoid", "Cast", "Shape",
           "MatMul", "MatMulNBits", "GroupQueryAttention", "SimplifiedLayerNormalization",
           "SkipSimplifiedLayerNormalization", "Softmax", "Reshape", "Transpose", "Unsqueeze",
           "Squeeze", "Concat", "Identity", "Constant", "Neg", "Sqrt", "Pow", "ReduceMean",
           "GatherBlockQuantized")

    def __init__(self, model_path: str):
        import onnx
        from onnx import numpy_helper
        m = onnx.load(model_path)
        g = m.graph
        self.nodes = list(g.node)
        unknown = sorted({n.op_type for n in self.nodes if n.op_type not in self.OPS})
        if unknown:
            raise ValueError(f"float64 reference: op(s) {', '.join(unknown)} not implemented")
        self.consts = {}
        for t in g.initializer:
            a = numpy_helper.to_array(t)
            self.consts[t.name] = a.astype(np.float64) if t.data_type in FLOATS else a
        inits = set(self.consts)
        self._inputs = [_Input(i.name, [d.dim_value if d.HasField("dim_value") else d.dim_param
                                        for d in i.type.tensor_type.shape.dim])
                        for i in g.input if i.name not in inits]
        self._w = {}  # dequantized MatMulNBits weights, by node index

    def get_inputs(self):
        return self._inputs

    def run(self, names, feeds):
        env = dict(self.consts)
        for k, v in feeds.items():
            env[k] = v.astype(np.float64) if v.dtype.kind == "f" else v
        for idx, n in enumerate(self.nodes):
            ins = [env[x] if x else None for x in n.input]
            outs = self._op(idx, n, ins, _attrs(n))
            for name, val in zip(n.output, outs):
                if name:
                    env[name] = val
        return [env[x] for x in names]

    def _gbq(self, idx, ins, a):
        """GatherBlockQuantized (uint8 data, bits 4 packed low nibble first or 8; the default
        axes): rows gathered from the table dequantized exactly, (q - zero_point) * scale,
        zero point 2^(bits-1) when absent, blocks of block_size along the last axis."""
        if a.get("gather_axis", 0) != 0 or a.get("quantize_axis", 1) not in (1, -1) or ins[0].ndim != 2:
            raise ValueError("GatherBlockQuantized: only gather_axis 0, quantize_axis 1 of a 2-D table "
                             "in the float64 reference")
        if ins[0].dtype != np.uint8:
            raise ValueError(f"GatherBlockQuantized: data of {ins[0].dtype} not in the float64 reference")
        if idx not in self._w:
            bits, bs = a.get("bits", 4), a.get("block_size", 128)
            rows = ins[0].shape[0]
            cols = ins[0].shape[1] * 8 // bits
            kb = (cols + bs - 1) // bs
            q = _unpack(ins[0], bits, cols).astype(np.float64)                    # [rows, cols]
            s = ins[2].astype(np.float64).reshape(rows, kb)
            zp = ins[3] if len(ins) > 3 and ins[3] is not None else None
            z = (np.full((rows, kb), float(1 << (bits - 1))) if zp is None
                 else _unpack(zp.reshape(rows, -1), bits, kb).astype(np.float64))
            blk = np.arange(cols) // bs
            self._w[idx] = (q - z[:, blk]) * s[:, blk]
        return np.take(self._w[idx], ins[1].astype(np.int64), axis=0)

    def _op(self, idx, n, ins, a):
        op = n.op_type
        if op == "Gather":
            return [np.take(ins[0], ins[1].astype(np.int64), axis=a.get("axis", 0))]
        if op == "GatherBlockQuantized":
            return [self._gbq(idx, ins, a)]
        if op in ("ReduceSum", "ReduceMean"):
            axes = tuple(int(x) for x in ins[1]) if len(ins) > 1 and ins[1] is not None else a.get("axes")
            f = np.sum if op == "ReduceSum" else np.mean
            return [f(ins[0], axis=tuple(axes) if axes is not None else None, keepdims=bool(a.get("keepdims", 1)))
                    .astype(ins[0].dtype)]
        if op in ("Sub", "Add", "Mul", "Div", "Pow"):
            f = {"Sub": np.subtract, "Add": np.add, "Mul": np.multiply, "Div": np.divide, "Pow": np.power}[op]
            r = f(ins[0], ins[1])
            return [r.astype(ins[0].dtype) if ins[0].dtype.kind in "iu" else r]
        if op == "Sigmoid":
            return [1.0 / (1.0 + np.exp(-ins[0]))]
        if op == "Neg":
            return [-ins[0]]
        if op == "Sqrt":
            return [np.sqrt(ins[0])]
        if op == "Softmax":
            x = ins[0] - ins[0].max(axis=a.get("axis", -1), keepdims=True)
            e = np.exp(x)
            return [e / e.sum(axis=a.get("axis", -1), keepdims=True)]
        if op == "Cast":
            to = a["to"]
            return [ins[0].astype(np.float64 if to in FLOATS else ONNX_TO_NP[to])]
        if op == "Shape":
            s = np.array(ins[0].shape, np.int64)
            return [s[a.get("start", 0): a.get("end", len(s))]]
        if op == "Identity":
            return [ins[0]]
        if op == "Constant":
            from onnx import numpy_helper
            t = numpy_helper.to_array(n.attribute[0].t)
            return [t.astype(np.float64) if t.dtype.kind == "f" else t]
        if op == "Reshape":
            shape = [int(d) for d in ins[1]]
            shape = [ins[0].shape[i] if d == 0 and not a.get("allowzero", 0) else d for i, d in enumerate(shape)]
            return [ins[0].reshape(shape)]
        if op == "Transpose":
            return [np.transpose(ins[0], a.get("perm"))]
        if op in ("Unsqueeze", "Squeeze"):
            axes = [int(x) for x in ins[1]] if len(ins) > 1 and ins[1] is not None else a.get("axes")
            if op == "Unsqueeze":
                r = ins[0]
                for ax in sorted(x % (r.ndim + len(axes)) for x in axes):
                    r = np.expand_dims(r, ax)
                return [r]
            return [np.squeeze(ins[0], axis=tuple(axes) if axes else None)]
        if op == "Concat":
            return [np.concatenate(ins, axis=a["axis"])]
        if op == "MatMul":
            return [np.matmul(ins[0], ins[1])]
        if op == "MatMulNBits":
            if idx not in self._w:
                if len(ins) > 4 and ins[4] is not None:
                    raise ValueError("MatMulNBits: g_idx not supported by the float64 reference")
                self._w[idx] = dequant_matmulnbits(ins[1], ins[2], ins[3] if len(ins) > 3 else None, a)
            y = np.matmul(ins[0], self._w[idx].T)
            if len(ins) > 5 and ins[5] is not None:
                y = y + ins[5]
            return [y]
        if op == "SimplifiedLayerNormalization":
            if a.get("axis", -1) not in (-1, ins[0].ndim - 1):
                raise ValueError("SimplifiedLayerNormalization: only the last axis in the float64 reference")
            return [_rms(ins[0], ins[1], a.get("epsilon", 1e-5))]
        if op == "SkipSimplifiedLayerNormalization":
            s = ins[0] + ins[1]
            if len(ins) > 3 and ins[3] is not None:
                s = s + ins[3]
            return [_rms(s, ins[2], a.get("epsilon", 1e-5)), None, None, s]
        if op == "GroupQueryAttention":
            return _gqa(ins, a)
        raise ValueError(f"float64 reference: op {op} not implemented")


def int8_activations(model_path: str) -> bool:
    """True when some MatMulNBits node quantizes its activations to int8
    (accuracy_level 4): the accuracy rule applies instead of ORT's rounding."""
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    for n in m.graph.node:
        if n.op_type == "MatMulNBits":
            for a in n.attribute:
                if a.name == "accuracy_level" and a.i == 4:
                    return True
    return False


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def error_sums(ref: np.ndarray, got: np.ndarray) -> dict:
    """Sums over positions (rows) of logits [P, V] against the float64 reference:
    squared error (and the count of logits), max |error|, KL(softmax(ref) || softmax(got))
    and top-1 agreement. Sums, so prompts and steps add up; see summarize()."""
    ref = np.asarray(ref, np.float64).reshape(-1, ref.shape[-1])
    got = np.asarray(got, np.float64).reshape(ref.shape)
    d = got - ref
    lp, lq = _log_softmax(ref), _log_softmax(got)
    return {"sq_err": float((d * d).sum()), "n": int(d.size), "max": float(np.abs(d).max()) if d.size else 0.0,
            "kl": float((np.exp(lp) * (lp - lq)).sum()), "top1": int((ref.argmax(-1) == got.argmax(-1)).sum()),
            "positions": int(ref.shape[0])}


def add_sums(a: dict | None, b: dict) -> dict:
    if a is None:
        return dict(b)
    return {k: (max(a[k], b[k]) if k == "max" else a[k] + b[k]) for k in b}


def summarize(s: dict) -> dict:
    """RMS and max logit error, mean KL per position, top-1 agreement."""
    return {"rms": (s["sq_err"] / s["n"]) ** 0.5 if s["n"] else 0.0, "max": s["max"],
            "kl": s["kl"] / s["positions"] if s["positions"] else 0.0, "top1": s["top1"],
            "positions": s["positions"]}
