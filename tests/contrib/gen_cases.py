#!/usr/bin/env python3
"""Generates single-op test cases for snug's LLM operators with ONNX Runtime
as the oracle, in the ONNX backend-test layout:

    OUT/test_<name>/model.onnx
    OUT/test_<name>/test_data_set_0/input_<i>.pb, output_<i>.pb

OUT defaults to ${SNUG_CACHE:-~/.cache/snug}/contrib-cases. Inputs are random
(seeded per case, so runs repeat) with deliberately odd sizes. Where ORT
leaves values unspecified (GroupQueryAttention's padded query rows and cache
rows past each sequence's end) the expected values are zeroed, which is what
snug writes there.

usage: gen_cases.py [--out DIR] [--filter SUBSTR] [--list]
"""
import argparse
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
F32 = TensorProto.FLOAT

CASES = []
FILTER = ""


def case(fn):
    CASES.append(fn)
    return fn


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def np_type(arr):
    return helper.np_dtype_to_tensor_dtype(arr.dtype)


def make_model(name, op, domain, inputs, outputs, attrs, opset=21, out_types=None):
    """inputs: list of (name, array or None for absent). outputs: names ('' absent)."""
    in_names = [n if a is not None else "" for n, a in inputs]
    while in_names and in_names[-1] == "":
        in_names.pop()
    node = helper.make_node(op, in_names, outputs, domain=domain, **attrs)
    g_in = [helper.make_tensor_value_info(n, np_type(a), list(a.shape))
            for n, a in inputs if a is not None]
    out_types = out_types or {}
    g_out = [helper.make_tensor_value_info(o, out_types.get(o, np_type(inputs[0][1])), None)
             for o in outputs if o]
    graph = helper.make_graph([node], name, g_in, g_out)
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


def run_ort(model, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(names, feeds)


def save(out_dir, name, model, inputs, outputs, fix=None):
    if FILTER and FILTER not in name:
        return {"Y": np.zeros(0, np.float32)}
    feeds = {n: a for n, a in inputs if a is not None}
    names, results = run_ort(model, feeds)
    if fix:
        results = fix(dict(zip(names, results)))
        results = [results[n] for n in names]
    d = os.path.join(out_dir, "test_" + name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    for i, (n, a) in enumerate((n, a) for n, a in inputs if a is not None):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    for i, (n, a) in enumerate(zip(names, results)):
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(a), n).SerializeToString())
    return dict(zip(names, results))


def randn(r, *shape, dtype=np.float32, scale=1.0):
    return (r.standard_normal(shape) * scale).astype(dtype)


# ---------------------------------------------------------------- MatMulNBits


def pack_codes(codes, bits):
    """codes [..., n] (ints < 2^bits) -> bytes packed low bits first."""
    per = 8 // bits
    n = codes.shape[-1]
    pad = (-n) % per
    c = np.concatenate([codes, np.zeros(codes.shape[:-1] + (pad,), codes.dtype)], -1)
    c = c.reshape(codes.shape[:-1] + (-1, per)).astype(np.uint32)
    out = np.zeros(c.shape[:-1], np.uint32)
    for i in range(per):
        out |= c[..., i] << (i * bits)
    return out.astype(np.uint8)


def to_initializers(model, names):
    """Turns the graph inputs `names` into initializers (with their arrays
    from {name: array}): constant weights, which ORT may prepack."""
    g = model.graph
    keep = [i for i in g.input if i.name not in names]
    del g.input[:]
    g.input.extend(keep)
    for n, a in names.items():
        g.initializer.append(numpy_helper.from_array(a, n))
    return model


def mnb_case(out_dir, name, M_shape, K, N, bits=4, bs=32, zp="packed", bias=False,
             acc=0, dtype=np.float32, const=False):
    r = rng_for(name)
    kb = (K + bs - 1) // bs
    codes = r.integers(0, 1 << bits, size=(N, kb, bs))
    B = pack_codes(codes, bits).reshape(N, kb, bs * bits // 8)
    scales = (r.random((N * kb,)) * 0.05 + 0.01).astype(dtype)
    A = randn(r, *M_shape, K, dtype=dtype)
    zpa = None
    if zp == "packed":
        zcodes = r.integers(0, 1 << bits, size=(N, kb))
        zpa = pack_codes(zcodes, bits).reshape(N, -1)
    elif zp == "float":
        zpa = (r.random((N * kb,)) * (1 << bits)).astype(dtype)
    biasa = randn(r, N, dtype=dtype) if bias else None
    inputs = [("A", A), ("B", B), ("scales", scales), ("zero_points", zpa), ("g_idx", None),
              ("bias", biasa)]
    attrs = dict(K=K, N=N, bits=bits, block_size=bs, accuracy_level=acc)
    model = make_model(name, "MatMulNBits", MS, inputs, ["Y"], attrs)
    if const:  # B, scales, zero points and bias as initializers (ORT prepacks B)
        model = to_initializers(model, {n: a for n, a in inputs[1:] if a is not None})
        inputs = inputs[:1]
    res = save(out_dir, name, model, inputs, ["Y"])
    # report how far ORT is from a plain fp32 dequantized matmul (int8 path check)
    if zpa is None:
        z = np.full((N, kb), 1 << (bits - 1), np.float32)
    elif zp == "packed":
        z = zcodes.astype(np.float32)
    else:
        z = zpa.reshape(N, kb).astype(np.float32)
    W = ((codes - z[:, :, None]) * scales.reshape(N, kb)[:, :, None].astype(np.float32))
    W = W.reshape(N, kb * bs)[:, :K]
    ref = A.astype(np.float32) @ W.T + (biasa.astype(np.float32) if bias else 0)
    if ref.size == 0:
        return 0.0
    return float(np.max(np.abs(ref - res["Y"].astype(np.float32)) / (1e-4 + 1e-3 * np.abs(ref))))


@case
def mnb(out_dir):
    errs = {}
    specs = [
        ("mnb_m1_k64_n3", (1,), 64, 3, {}),
        ("mnb_m1_k100_n37_bs32", (1,), 100, 37, {}),
        ("mnb_m1_k64_n1", (1,), 64, 1, {}),
        ("mnb_b2s5_k96_n37", (2, 5), 96, 37, {}),
        ("mnb_m5_k130_n17_bias", (5,), 130, 17, {"bias": True}),
        ("mnb_m7_k200_n33_bs16", (7,), 200, 33, {"bs": 16}),
        ("mnb_m3_k256_n20_bs64_nozp", (3,), 256, 20, {"bs": 64, "zp": None}),
        ("mnb_m1_k300_n19_bs128", (1,), 300, 19, {"bs": 128}),
        ("mnb_m9_k512_n40_bs256", (9,), 512, 40, {"bs": 256}),
        ("mnb_m1_k80_n11_b8", (1,), 80, 11, {"bits": 8}),
        ("mnb_m6_k70_n13_b8_nozp", (6,), 70, 13, {"bits": 8, "zp": None}),
        ("mnb_m1_k96_n9_b2", (1,), 96, 9, {"bits": 2}),
        ("mnb_m4_k64_n9_b2_bias", (4,), 64, 9, {"bits": 2, "bias": True}),
        ("mnb_m2_k64_n21_floatzp", (2,), 64, 21, {"zp": "float"}),
        # float zero points at 2 bits: the float paths other than the 4-bit kernels (ORT's CPU
        # kernel refuses 8 bits with float zero points)
        ("mnb_m1_k64_n9_b2_floatzp", (1,), 64, 9, {"bits": 2, "zp": "float"}),
        ("mnb_m6_k96_n9_b2_floatzp", (6,), 96, 9, {"bits": 2, "zp": "float"}),
        ("mnb_m20_k96_n300_bias", (20,), 96, 300, {"bias": True}),
        ("mnb_m1_k128_n8_acc4", (1,), 128, 8, {"acc": 4}),
        ("mnb_m5_k100_n37_acc4", (5,), 100, 37, {"acc": 4}),
        ("mnb_m3_k64_n10_acc4_nozp", (3,), 64, 10, {"acc": 4, "zp": None}),
        ("mnb_m2_k96_n12_b8_acc4", (2,), 96, 12, {"bits": 8, "acc": 4}),
        ("mnb_m1_k64_n5_acc1", (1,), 64, 5, {"acc": 1}),
        ("mnb_m3_k64_n5_f16", (3,), 64, 5, {"dtype": np.float16}),
        ("mnb_m0_k32_n4", (0,), 32, 4, {}),
        # float zero points: ORT dequantizes B (q * s - s * zp) and runs MLAS's
        # SGEMM at every accuracy level (no prepacking); snug takes its float
        # kernels (within the tolerance): M = 1 and M > 1, N tails, K % 8 != 0,
        # several block sizes. _bx: bit-exact (run.sh)
        ("mnb_m1_k100_n37_floatzp", (1,), 100, 37, {"zp": "float"}),
        ("mnb_m1_k77_n38_bs16_floatzp_bias", (1,), 77, 38, {"zp": "float", "bs": 16, "bias": True}),
        ("mnb_m1_k576_n39_floatzp_acc4_const", (1,), 576, 39,
         {"zp": "float", "acc": 4, "const": True}),
        ("mnb_m5_k300_n39_bs128_floatzp_acc4", (5,), 300, 39, {"zp": "float", "bs": 128, "acc": 4}),
        ("mnb_b2s3_k600_n40_floatzp_bias", (2, 3), 600, 40, {"zp": "float", "bias": True}),
        ("mnb_m2_k1000_n20_bs64_floatzp_const", (2,), 1000, 20, {"zp": "float", "bs": 64, "const": True}),
        ("mnb_m7_k576_n130_floatzp_bias_const", (7,), 576, 130,
         {"zp": "float", "bias": True, "const": True}),
        # 8 bits at accuracy_level 4 with B constant: ORT's SQ8BitGemm CompInt8
        # (int8 A, lanes over pairs of blocks, zero points through A's block sums)
        ("mnb_m1_k576_n49_b8_acc4_const_bx", (1,), 576, 49, {"bits": 8, "acc": 4, "zp": None, "const": True}),
        ("mnb_m3_k100_n38_b8_acc4_zp_bias_const_bx", (3,), 100, 38,
         {"bits": 8, "acc": 4, "bias": True, "const": True}),
        ("mnb_m5_k96_n39_b8_acc4_const_bx", (5,), 96, 39, {"bits": 8, "acc": 4, "zp": None, "const": True}),
        ("mnb_m1_k160_n36_b8_acc4_bias_const_bx", (1,), 160, 36,
         {"bits": 8, "acc": 4, "zp": None, "bias": True, "const": True}),
        ("mnb_b2s2_k64_n7_b8_acc4_zp_const_bx", (2, 2), 64, 7, {"bits": 8, "acc": 4, "const": True}),
    ]
    for name, ms, K, N, kw in specs:
        errs[name] = mnb_case(out_dir, name, ms, K, N, **kw)
    return errs


# MatMulNBits with accuracy_level 4 and constant weights. ORT prepacks a
# constant B and then quantizes A to int8 per block (MLAS CompInt8, with its
# own rounding order; M = 1 and M > 1 take different kernels); with B a graph
# input (the cases above) it computes in float. SmolLM2-135M's shapes, an
# activation row like an RMS-normed hidden state (a few large channels), N
# not a multiple of 4, an odd block count, no zero points, a bias.


def llm_activations(r, M, K):
    a = r.standard_normal((M, K)).astype(np.float32)
    hot = r.choice(K, size=max(1, K // 64), replace=False)
    a[:, hot] *= 20.0
    return a


def quant4(r, N, K, bs=32):
    """Random weights quantized like the model builder: (codes, scales, packed zp)."""
    kb = (K + bs - 1) // bs
    w = r.standard_normal((N, kb * bs)).astype(np.float32) * 0.05
    w[:, K:] = 0
    wb = w.reshape(N, kb, bs)
    lo, hi = np.minimum(wb.min(-1), 0), np.maximum(wb.max(-1), 0)
    sc = np.maximum((hi - lo) / 15, 1e-8).astype(np.float32)
    zp = np.clip(np.round(-lo / sc), 0, 15).astype(np.int64)
    codes = np.clip(np.round(wb / sc[:, :, None]) + zp[:, :, None], 0, 15).astype(np.int64)
    return codes, sc, zp


def quant4_float_zp(r, N, K, bs=32):
    """Like GGUF's Q4_1 re-encoded (tests/models/snugmodels/styles.py): codes
    0..15 of w = d * q + m, scale d and the float zero point -m / d."""
    kb = (K + bs - 1) // bs
    w = r.standard_normal((N, kb * bs)).astype(np.float32) * 0.05
    w[:, K:] = 0
    wb = w.reshape(N, kb, bs)
    lo, hi = wb.min(-1), wb.max(-1)
    d = np.maximum((hi - lo) / 15, 1e-8).astype(np.float32)
    codes = np.clip(np.round((wb - lo[:, :, None]) / d[:, :, None]), 0, 15).astype(np.int64)
    return codes, d, (-lo / d).astype(np.float32)


def quant8(r, N, K, bs=32):
    """Q8_0-like: codes 0..255 around the default zero point 128."""
    kb = (K + bs - 1) // bs
    w = r.standard_normal((N, kb * bs)).astype(np.float32) * 0.05
    w[:, K:] = 0
    wb = w.reshape(N, kb, bs)
    d = np.maximum(np.abs(wb).max(-1) / 127, 1e-8).astype(np.float32)
    codes = np.clip(np.round(wb / d[:, :, None]) + 128, 0, 255).astype(np.int64)
    return codes, d, None


def mnb_const_model(name, layers, K, N, M, zp=True, bias=False, norm=False, r=None, kind="q4",
                    acc=4):
    """`layers` MatMulNBits (constant B) in a chain (N == K after the first),
    optionally with a SimplifiedLayerNormalization before each. kind: "q4"
    (packed 4-bit zero points unless zp is False), "q4f" (float zero points),
    "q8" (8 bits, default zero point)."""
    nodes, inits = [], []
    x = "A"
    bits = 8 if kind == "q8" else 4
    for i in range(layers):
        k_i = K if i == 0 else N
        codes, sc, zpc = {"q4": quant4, "q4f": quant4_float_zp, "q8": quant8}[kind](r, N, k_i)
        kb = codes.shape[1]
        inits.append(numpy_helper.from_array(pack_codes(codes, bits).reshape(N, kb, 4 * bits), f"B{i}"))
        inits.append(numpy_helper.from_array(sc.reshape(-1), f"S{i}"))
        ins = [x, f"B{i}", f"S{i}"]
        zp = zp and zpc is not None
        if zp:
            z = zpc.reshape(-1) if kind == "q4f" else pack_codes(zpc, 4).reshape(N, -1)
            inits.append(numpy_helper.from_array(z, f"Z{i}"))
            ins.append(f"Z{i}")
        if bias:
            if not zp:
                ins.append("")
            ins += ["", f"bias{i}"]
            inits.append(numpy_helper.from_array(randn(r, N, scale=0.1), f"bias{i}"))
        if norm:
            inits.append(numpy_helper.from_array((1 + 0.1 * randn(r, k_i)).astype(np.float32), f"g{i}"))
            nodes.append(helper.make_node("SimplifiedLayerNormalization", [x, f"g{i}"], [f"n{i}"],
                                          axis=-1, epsilon=1e-5, stash_type=1))
            ins[0] = f"n{i}"
        y = "Y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMulNBits", ins, [y], domain=MS, K=k_i, N=N, bits=bits,
                                      block_size=32, accuracy_level=acc))
        x = y
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("A", F32, [M, K])],
                              [helper.make_tensor_value_info("Y", F32, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return model


@case
def mnb_const(out_dir):
    specs = [  # name, M, K, N, layers, kw
        ("mnb_const_acc4_m1_q", 1, 576, 576, 1, {}),
        ("mnb_const_acc4_m1_kv", 1, 576, 192, 1, {}),
        ("mnb_const_acc4_m1_down", 1, 1536, 576, 1, {}),
        ("mnb_const_acc4_m5_up", 5, 576, 1536, 1, {}),
        ("mnb_const_acc4_m7_n30", 7, 576, 30, 1, {}),
        ("mnb_const_acc4_m2_k544", 2, 544, 64, 1, {}),
        ("mnb_const_acc4_m1_k544_n7", 1, 544, 7, 1, {}),
        ("mnb_const_acc4_m4_nozp", 4, 576, 40, 1, {"zp": False}),
        ("mnb_const_acc4_m1_nozp", 1, 576, 40, 1, {"zp": False}),
        ("mnb_const_acc4_m3_bias", 3, 576, 36, 1, {"bias": True}),
        # re-quantizing chains: one rounding that differs from ORT's flips an
        # int8 code downstream and grows, as through an LLM's layers
        ("mnb_const_acc4_chain8_m1", 1, 576, 576, 8, {"norm": True}),
        ("mnb_const_acc4_chain8_m6", 6, 576, 576, 8, {"norm": True}),
        # float zero points (float products: within the tolerance down the
        # chain) and 8 bits (int8 A, bit-exact: the same amplification), as
        # through SmolLM2's Q4_1 layers and Q8_0 head
        ("mnb_const_q4f_acc0_chain8_m1", 1, 576, 576, 8, {"norm": True, "kind": "q4f", "acc": 0}),
        ("mnb_const_q4f_acc0_chain8_m6", 6, 576, 576, 8,
         {"norm": True, "kind": "q4f", "acc": 0, "bias": True}),
        ("mnb_const_q4f_acc4_chain4_m3_n192", 3, 576, 192, 4, {"norm": True, "kind": "q4f"}),
        ("mnb_const_q8_acc4_chain8_m1_bx", 1, 576, 576, 8, {"norm": True, "kind": "q8"}),
        ("mnb_const_q8_acc4_chain8_m5_bx", 5, 576, 576, 8, {"norm": True, "kind": "q8", "bias": True}),
    ]
    for name, M, K, N, layers, kw in specs:
        r = rng_for(name)
        model = mnb_const_model(name, layers, K, N, M, r=r, **kw)
        save(out_dir, name, model, [("A", llm_activations(r, M, K))], ["Y"])
    return {}


# ---------------------------------------------------------- GroupQueryAttention


def rope_cache(r, max_pos, half):
    ang = r.random((max_pos, half)).astype(np.float32) * 3.0
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def gqa_case(out_dir, name, B, S, Nq, Nkv, H, past_len, seqlens, packed=False, rotary=False,
             interleaved=False, window=-1, softcap=0.0, scale=None, smooth=False, sink=False,
             bias=False, rot_frac=1.0, no_present=False, fp16=False):
    r = rng_for(name)
    seqlens = np.array(seqlens, np.int32)
    total = int(seqlens.max()) + 1
    if packed:
        q = randn(r, B, S, (Nq + 2 * Nkv) * H)
        k = v = None
    else:
        q = randn(r, B, S, Nq * H)
        k = randn(r, B, S, Nkv * H)
        v = randn(r, B, S, Nkv * H)
    pk = randn(r, B, Nkv, past_len, H) if past_len is not None else None
    pv = randn(r, B, Nkv, past_len, H) if past_len is not None else None
    cos = sin = None
    if rotary:
        cos, sin = rope_cache(r, total + 8, int(H * rot_frac) // 2)
    ab = randn(r, B, 1, S, total) if bias else None
    hs = randn(r, Nq) if sink else None
    if fp16:
        q, k, v, pk, pv, cos, sin, ab, hs = (None if t is None else t.astype(np.float16)
                                             for t in (q, k, v, pk, pv, cos, sin, ab, hs))
    inputs = [("query", q), ("key", k), ("value", v), ("past_key", pk), ("past_value", pv),
              ("seqlens_k", seqlens), ("total_sequence_length", np.array(total, np.int32)),
              ("cos_cache", cos), ("sin_cache", sin), ("position_ids", None),
              ("attention_bias", ab), ("head_sink", hs)]
    attrs = dict(num_heads=Nq, kv_num_heads=Nkv, do_rotary=int(rotary),
                 rotary_interleaved=int(interleaved), local_window_size=window)
    if softcap:
        attrs["softcap"] = softcap
    if scale:
        attrs["scale"] = scale
    if smooth:
        attrs["smooth_softmax"] = 1
    outs = ["output"] if no_present else ["output", "present_key", "present_value"]
    model = make_model(name, "GroupQueryAttention", MS, inputs, outs, attrs)

    def fix(res):
        # rows ORT leaves unspecified: padded query rows, cache rows past T
        for b in range(B):
            T = int(seqlens[b]) + 1
            Q = min(S, T)
            res["output"][b, Q:, :] = 0
            for n in ("present_key", "present_value"):
                if n in res:
                    res[n][b, :, T:, :] = 0
        return res

    save(out_dir, name, model, inputs, outs, fix)


@case
def gqa(out_dir):
    # ORT's CPU kernel wants head_size % 16 == 0
    gqa_case(out_dir, "gqa_prompt_b1_s5", 1, 5, 4, 2, 16, None, [4])
    gqa_case(out_dir, "gqa_prompt_b2_s7_pad", 2, 7, 4, 1, 16, None, [6, 3])
    gqa_case(out_dir, "gqa_prompt_packed_rot", 2, 6, 6, 2, 16, None, [5, 5], packed=True,
             rotary=True)
    gqa_case(out_dir, "gqa_prompt_past0_rot_il", 1, 4, 2, 2, 16, 0, [3], rotary=True,
             interleaved=True)
    gqa_case(out_dir, "gqa_decode_b2", 2, 1, 4, 2, 32, 9, [9, 5])
    gqa_case(out_dir, "gqa_decode_b3_rot", 3, 1, 8, 2, 16, 12, [12, 3, 7], rotary=True)
    gqa_case(out_dir, "gqa_decode_rot_il", 2, 1, 4, 4, 16, 6, [6, 2], rotary=True,
             interleaved=True)
    gqa_case(out_dir, "gqa_decode_shared_buf", 2, 1, 4, 2, 16, 16, [7, 4], rotary=True)
    gqa_case(out_dir, "gqa_decode_packed", 1, 1, 4, 2, 16, 5, [5], packed=True, rotary=True)
    gqa_case(out_dir, "gqa_chunk_b1_s3", 1, 3, 4, 2, 16, 6, [8], rotary=True)
    gqa_case(out_dir, "gqa_window", 1, 9, 2, 1, 16, None, [8], window=3)
    gqa_case(out_dir, "gqa_window_decode", 2, 1, 2, 1, 16, 10, [10, 4], window=4)
    gqa_case(out_dir, "gqa_softcap", 1, 5, 4, 2, 16, None, [4], softcap=2.0)
    gqa_case(out_dir, "gqa_scale", 1, 3, 2, 2, 16, 4, [6], scale=0.3)
    gqa_case(out_dir, "gqa_smooth", 2, 1, 4, 2, 16, 5, [5, 2], smooth=True)
    gqa_case(out_dir, "gqa_head_sink", 1, 4, 4, 2, 16, None, [3], sink=True)
    gqa_case(out_dir, "gqa_attn_bias", 2, 3, 4, 2, 16, None, [2, 2], bias=True)
    gqa_case(out_dir, "gqa_attn_bias_softcap", 1, 4, 2, 1, 16, None, [3], bias=True,
             softcap=1.5)
    gqa_case(out_dir, "gqa_partial_rot", 1, 4, 2, 1, 32, None, [3], rotary=True, rot_frac=0.5)
    gqa_case(out_dir, "gqa_no_present", 1, 4, 2, 1, 16, None, [3], no_present=True)
    gqa_case(out_dir, "gqa_decode_long", 1, 1, 8, 2, 64, 200, [200], rotary=True)
    gqa_case(out_dir, "gqa_decode_fp16", 2, 1, 4, 2, 16, 7, [7, 3], rotary=True, fp16=True)
    gqa_case(out_dir, "gqa_prompt_fp16", 1, 4, 2, 1, 16, None, [3], fp16=True)


# ------------------------------------------------------------ RotaryEmbedding


def rope_ms_case(out_dir, name, shape4, B, S, N, H, interleaved=False, rot=0, scalar_pos=False,
                 give_heads=True, fp16=False):
    r = rng_for(name)
    x = randn(r, B, N, S, H) if shape4 else randn(r, B, S, N * H)
    rd = rot or H
    cos, sin = rope_cache(r, S + 12, rd // 2)
    if fp16:
        x, cos, sin = x.astype(np.float16), cos.astype(np.float16), sin.astype(np.float16)
    if scalar_pos:
        pid = np.array([3], np.int64)
    else:
        pid = r.integers(0, S + 12, size=(B, S)).astype(np.int64)
    inputs = [("input", x), ("position_ids", pid), ("cos_cache", cos), ("sin_cache", sin)]
    attrs = dict(interleaved=int(interleaved))
    if rot:
        attrs["rotary_embedding_dim"] = rot
    if give_heads and not shape4:
        attrs["num_heads"] = N
    model = make_model(name, "RotaryEmbedding", MS, inputs, ["output"], attrs)
    save(out_dir, name, model, inputs, ["output"])


@case
def rope(out_dir):
    rope_ms_case(out_dir, "rope_ms_3d", False, 2, 5, 3, 8)
    rope_ms_case(out_dir, "rope_ms_3d_il", False, 2, 5, 3, 8, interleaved=True)
    rope_ms_case(out_dir, "rope_ms_4d", True, 2, 3, 4, 16)
    rope_ms_case(out_dir, "rope_ms_4d_il_scalar", True, 1, 4, 2, 8, interleaved=True,
                 scalar_pos=True)
    rope_ms_case(out_dir, "rope_ms_3d_partial", False, 1, 3, 2, 16, rot=8)
    rope_ms_case(out_dir, "rope_ms_3d_noheads", False, 2, 3, 4, 8, give_heads=False)
    rope_ms_case(out_dir, "rope_ms_3d_fp16", False, 2, 3, 2, 8, fp16=True)


# ------------------------------------------------------------- normalizations


@case
def norms(out_dir):
    for name, shape, axis, eps in [("sln_3d", (2, 3, 37), -1, 1e-6), ("sln_2d_eps", (5, 16), -1, 1e-3),
                                   ("sln_axis1", (2, 3, 4), 1, 1e-5)]:
        r = rng_for(name)
        x = randn(r, *shape)
        sc = randn(r, *shape[axis:] if axis >= 0 else shape[axis:])
        inputs = [("X", x), ("scale", sc)]
        model = make_model(name, "SimplifiedLayerNormalization", "", inputs, ["Y", "inv_std_var"],
                           dict(axis=axis, epsilon=eps), opset=17)
        save(out_dir, name, model, inputs, ["Y", "inv_std_var"])
    for name, shape, axis in [("ln_v1_3d", (2, 3, 19), -1), ("ln_v1_axis1", (3, 4, 5), 1)]:
        r = rng_for(name)
        x = randn(r, *shape)
        sc = randn(r, *shape[axis:])
        bb = randn(r, *shape[axis:])
        inputs = [("X", x), ("Scale", sc), ("B", bb)]
        model = make_model(name, "LayerNormalization", "", inputs, ["Y", "Mean", "InvStdDev"],
                           dict(axis=axis, epsilon=1e-5), opset=16)
        save(out_dir, name, model, inputs, ["Y", "Mean", "InvStdDev"])
    name = "sln_fp16"
    r = rng_for(name)
    inputs = [("X", randn(r, 3, 40, dtype=np.float16)), ("scale", randn(r, 40, dtype=np.float16))]
    model = make_model(name, "SimplifiedLayerNormalization", "", inputs, ["Y"],
                       dict(axis=-1, epsilon=1e-5), opset=17)
    save(out_dir, name, model, inputs, ["Y"])
    name = "sksln_fp16"
    r = rng_for(name)
    inputs = [("input", randn(r, 2, 3, 32, dtype=np.float16)),
              ("skip", randn(r, 2, 3, 32, dtype=np.float16)),
              ("gamma", randn(r, 32, dtype=np.float16))]
    outs = ["output", "", "", "input_skip_bias_sum"]
    model = make_model(name, "SkipSimplifiedLayerNormalization", MS, inputs, outs,
                       dict(epsilon=1e-6))
    save(out_dir, name, model, inputs, outs)
    for simp in (True, False):
        op = "SkipSimplifiedLayerNormalization" if simp else "SkipLayerNormalization"
        tag = "sksln" if simp else "skln"
        for sub, xs, ss, bias, beta in [("3d", (2, 3, 24), (2, 3, 24), True, True),
                                        ("2d", (5, 17), (5, 17), False, False),
                                        ("bcast", (2, 4, 8), (4, 8), True, False),
                                        ("bcast1", (3, 2, 16), (1, 2, 16), False, True)]:
            name = f"{tag}_{sub}"
            r = rng_for(name)
            H = xs[-1]
            inputs = [("input", randn(r, *xs)), ("skip", randn(r, *ss)), ("gamma", randn(r, H))]
            if not simp:
                inputs.append(("beta", randn(r, H) if beta else None))
            inputs.append(("bias", randn(r, H) if bias else None))
            outs = ["output", "", "", "input_skip_bias_sum"]
            model = make_model(name, op, MS, inputs, outs, dict(epsilon=1e-5))
            save(out_dir, name, model, inputs, outs)


# ---------------------------------------------------------------------- GELUs


@case
def gelus(out_dir):
    for name, op, bias, attrs in [("fastgelu", "FastGelu", False, {}),
                                  ("fastgelu_bias", "FastGelu", True, {}),
                                  ("quickgelu", "QuickGelu", False, {}),
                                  ("quickgelu_alpha", "QuickGelu", False, {"alpha": 1.3}),
                                  ("biasgelu", "BiasGelu", True, {}),
                                  ("gelu_ms", "Gelu", False, {})]:
        r = rng_for(name)
        x = randn(r, 2, 3, 37, scale=3.0)
        names = ("A", "B") if op == "BiasGelu" else ("X", "bias")
        inputs = [(names[0], x)]
        if bias:
            inputs.append((names[1], randn(r, 37)))
        model = make_model(name, op, MS, inputs, ["Y"], attrs)
        save(out_dir, name, model, inputs, ["Y"])


@case
def sigmoids(out_dir):
    # The SiLU gate's Sigmoid (SmolLM2's MLP) at a 16-sequence decode step's
    # shape and an odd one: past the size where snug splits it over threads
    # (EW_GRAIN_MATH) and through its AVX-512 copy. ORT computes MLAS's rational
    # function, as snug does: bit for bit (run.sh), the special values included.
    for name, shape in [("sigmoid_exact_16x1536", (16, 1536)), ("sigmoid_exact_13x1537", (13, 1537))]:
        r = rng_for(name)
        x = randn(r, *shape, scale=6.0)
        x.flat[:9] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 30.0, -30.0]
        inputs = [("X", x)]
        model = make_model(name, "Sigmoid", "", inputs, ["Y"], {})
        save(out_dir, name, model, inputs, ["Y"])


# ----------------------------------------------------------- MultiHeadAttention


def mha_case(out_dir, name, B, S, L, N, H, Hv=None, bias=False, mask=None, ab=False, past=0,
             causal=False, packed=None, bnsh=False):
    r = rng_for(name)
    Hv = Hv or H
    q = randn(r, B, S, N * H)
    k = randn(r, B, L, N * H)
    v = randn(r, B, L, N * Hv)
    if packed == "qkv":
        q = randn(r, B, S, N, 3, H)
        k = v = None
    elif packed == "kv":
        k = randn(r, B, L, N, 2, H)
        v = None
    elif bnsh:
        k = randn(r, B, N, L, H)
        v = randn(r, B, N, L, Hv)
    T = past + L
    bi = randn(r, 2 * N * H + N * Hv) if bias else None
    m = None
    if mask == "2d":
        m = (r.random((B, T)) > 0.3).astype(np.int32)
        m[:, 0] = 1
    elif mask == "1d":
        m = r.integers(1, T + 1, size=(B,)).astype(np.int32)
    elif mask == "3d":
        m = (r.random((B, S, T)) > 0.3).astype(np.int32)
    abias = randn(r, B, N, S, T) if ab else None
    pk = randn(r, B, N, past, H) if past else None
    pv = randn(r, B, N, past, Hv) if past else None
    inputs = [("query", q), ("key", k), ("value", v), ("bias", bi), ("key_padding_mask", m),
              ("attention_bias", abias), ("past_key", pk), ("past_value", pv)]
    outs = ["output", "present_key", "present_value"] if past else ["output"]
    attrs = dict(num_heads=N)
    if causal:
        attrs["unidirectional"] = 1
    model = make_model(name, "MultiHeadAttention", MS, inputs, outs, attrs)
    save(out_dir, name, model, inputs, outs)


@case
def mha(out_dir):
    mha_case(out_dir, "mha_basic", 2, 3, 5, 2, 8)
    mha_case(out_dir, "mha_bias_dv", 1, 4, 6, 3, 8, Hv=4, bias=True)
    mha_case(out_dir, "mha_mask2d", 2, 3, 5, 2, 8, mask="2d")
    mha_case(out_dir, "mha_mask1d", 2, 3, 5, 2, 8, mask="1d")
    mha_case(out_dir, "mha_mask3d", 2, 3, 5, 2, 8, mask="3d")
    mha_case(out_dir, "mha_attn_bias", 2, 3, 4, 2, 8, ab=True)
    mha_case(out_dir, "mha_past", 2, 1, 1, 2, 8, past=6)
    mha_case(out_dir, "mha_past_causal", 1, 3, 3, 2, 8, past=4, causal=True)
    mha_case(out_dir, "mha_causal", 1, 5, 5, 2, 8, causal=True)
    # packed QKV (query 5-D) is not implemented by ORT's CPU kernel
    # packed KV (key 5-D) is not implemented by ORT's CPU kernel either
    mha_case(out_dir, "mha_bnsh_kv", 2, 3, 7, 2, 8, bnsh=True)



# ------------------------------------------------------- GatherBlockQuantized


def gbq_model(name, data, idx, scales, zp, attrs, const=(), pre=None):
    """One GatherBlockQuantized node (after `pre` nodes, if any); the inputs
    named in `const` become initializers. Returns (model, graph inputs)."""
    ins = [("data", data), ("indices", idx), ("scales", scales), ("zero_points", zp)]
    d_name = "data"
    nodes = []
    if pre is not None:  # the builder's tied embedding: Reshape of the lm_head's B
        nodes.append(helper.make_node("Reshape", ["data", "shape"], ["table"], name="/model/embed_tokens/Reshape"))
        d_name = "table"
    names = [d_name if n == "data" else n for n, a in ins if a is not None]
    nodes.append(helper.make_node("GatherBlockQuantized", names, ["Y"], domain=MS,
                                  name="/model/embed_tokens/GatherBlockQuantized", **attrs))
    out = "Y"
    if pre is not None and pre.get("slice"):
        nodes.append(helper.make_node("Slice", ["Y", "s0", "s1", "s2"], ["Ys"], name="/model/embed_tokens/Slice"))
        out = "Ys"
    inits = []
    graph_in = []
    for n, a in ins:
        if a is None:
            continue
        t = numpy_helper.from_array(a, n) if a.dtype != object else a.item()
        if n in const:
            inits.append(t)
        else:
            graph_in.append(helper.make_tensor_value_info(n, t.data_type, list(t.dims)))
    if pre is not None:
        inits.append(numpy_helper.from_array(np.array(pre["shape"], np.int64), "shape"))
        if pre.get("slice"):
            for k, v in zip(("s0", "s1", "s2"), ([0], [pre["slice"]], [-1])):
                inits.append(numpy_helper.from_array(np.array(v, np.int64), k))
    g = helper.make_graph(nodes, name, graph_in,
                          [helper.make_tensor_value_info(out, helper.np_dtype_to_tensor_dtype(scales.dtype), None)],
                          initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return model, [(n, a) for n, a in ins if a is not None and n not in const]


def gbq_case(out_dir, name, rows, hidden, idx_shape, bits=4, bs=32, zp=False, idx_dtype=np.int64,
             sdtype=np.float32, lead=(), pre=False, const=()):
    """uint8 table [*lead, rows, ...] of `hidden` logical codes per row
    (hidden padded to whole blocks, as the builder pads), gathered on axis 0."""
    r = rng_for(name)
    kb = (hidden + bs - 1) // bs
    per = 8 // bits
    codes = r.integers(0, 1 << bits, size=(rows, *lead, kb * bs))
    data = pack_codes(codes, bits)  # [rows, *lead, kb*bs/per]
    scales = (r.random((rows, *lead, kb)) * 0.05 + 0.01).astype(sdtype)
    zpa = pack_codes(r.integers(0, 1 << bits, size=(rows, *lead, kb)), bits) if zp else None
    idx = r.integers(-rows, rows, size=idx_shape).astype(idx_dtype)
    idx.flat[0] = rows - 1
    idx.flat[-1] = -rows
    attrs = dict(bits=bits, block_size=bs, gather_axis=0, quantize_axis=len(lead) + 1)
    pre_d = None
    if pre:  # B as MatMulNBits stores it, [N, k_blocks, blob], reshaped to the table
        pre_d = {"shape": list(data.shape), "slice": hidden if hidden != kb * bs else None}
        data = data.reshape(rows, kb, bs // per)
    model, ins = gbq_model(name, data, idx, scales, zpa, attrs, const=const, pre=pre_d)
    save(out_dir, name, model, ins, ["Ys" if pre_d and pre_d["slice"] else "Y"])


def gbq_int4_case(out_dir, name, dtype, shape, ga, qa, bs=16, zp=False):
    """int4 / uint4 table (logical shape) with any gather and quantize axes:
    the table and its zero points are initializers (the .pb runner inputs
    stay byte types)."""
    r = rng_for(name)
    lo, hi = (-8, 8) if dtype == TensorProto.INT4 else (0, 16)
    codes = r.integers(lo, hi, size=shape)
    sshape = list(shape)
    sshape[qa] = (shape[qa] + bs - 1) // bs
    scales = (r.random(sshape) * 0.05 + 0.01).astype(np.float32)
    data_t = helper.make_tensor("data", dtype, list(shape), codes.flatten().tolist())
    zp_t = helper.make_tensor("zero_points", dtype, sshape, r.integers(lo, hi, size=sshape).flatten().tolist()) \
        if zp else None
    idx = np.array([[shape[ga] - 1, 0, -1], [1, -shape[ga], 2 % shape[ga]]], np.int64)
    to_obj = lambda t: None if t is None else np.array(t, dtype=object)  # noqa: E731
    model, ins = gbq_model(name, to_obj(data_t), idx, scales, to_obj(zp_t),
                           dict(bits=4, block_size=bs, gather_axis=ga, quantize_axis=qa),
                           const=("data", "zero_points"))
    save(out_dir, name, model, ins, ["Y"])


@case
def gbq(out_dir):
    gbq_case(out_dir, "gbq_u4", 37, 64, (2, 3))
    gbq_case(out_dir, "gbq_u4_zp_i32", 37, 64, (5,), zp=True, idx_dtype=np.int32)
    gbq_case(out_dir, "gbq_u4_pad_zp", 29, 40, (1, 4), zp=True)      # 40 of 64: the last block half padding
    gbq_case(out_dir, "gbq_u4_odd_blocks_zp", 11, 80, (3,), bs=16, zp=True)  # 5 blocks: zero points padded per row
    gbq_case(out_dir, "gbq_u4_bs128", 9, 256, (2,), bs=128)
    gbq_case(out_dir, "gbq_u8", 19, 48, (2, 2), bits=8, bs=16)
    gbq_case(out_dir, "gbq_u8_zp_i32", 19, 48, (3,), bits=8, bs=16, zp=True, idx_dtype=np.int32)
    gbq_case(out_dir, "gbq_u2_zp", 13, 64, (4,), bits=2, bs=16, zp=True)
    gbq_case(out_dir, "gbq_u4_f16", 23, 64, (1, 3), sdtype=np.float16)
    gbq_case(out_dir, "gbq_u4_f16_zp", 23, 96, (2,), bs=32, zp=True, sdtype=np.float16)
    gbq_case(out_dir, "gbq_u4_3d", 7, 32, (2,), bs=16, lead=(3,), zp=True)  # [7, 3, 16]: rows of 3 x 32
    gbq_case(out_dir, "gbq_u4_scalar_idx", 17, 64, ())
    # the builder's tied embedding (onnxruntime-genai 0.18 make_embedding_lookup):
    # Reshape(lm_head B) -> GatherBlockQuantized [-> Slice], constants
    gbq_case(out_dir, "gbq_builder", 50, 64, (1, 6), pre=True, const=("data", "scales"))
    gbq_case(out_dir, "gbq_builder_slice", 50, 40, (1, 6), pre=True, const=("data", "scales"))
    gbq_case(out_dir, "gbq_builder_slice_zp", 50, 72, (2, 3), pre=True, zp=True, const=("data", "scales", "zero_points"))
    gbq_int4_case(out_dir, "gbq_i4_q0_g1", TensorProto.INT4, (32, 5), ga=1, qa=0)
    gbq_int4_case(out_dir, "gbq_u4t_zp", TensorProto.UINT4, (6, 48), ga=0, qa=1, zp=True)
    gbq_int4_case(out_dir, "gbq_i4_3d_zp", TensorProto.INT4, (4, 20, 3), ga=2, qa=1, zp=True)
    gbq_errors(out_dir)


def gbq_errors(out_dir):
    """Cases snug must refuse (run.sh checks the message): OUT/errors/<name>/
    with model.onnx, inputs and `expect` (a substring of the error). ONNX
    Runtime 1.32 writes zeros for an index out of range; snug errors, as
    Gather does."""
    r = rng_for("gbq_errors")
    data = pack_codes(r.integers(0, 16, size=(10, 32)), 4)
    scales = (r.random((10, 1)) * 0.05).astype(np.float32)
    for name, idx, expect in (("gbq_index_oob", np.array([[3, 10]], np.int64),
                               "index 10 (at 1 of the indices) out of range [-10, 10)"),
                              ("gbq_index_oob_neg", np.array([-11], np.int32),
                               "index -11 (at 0 of the indices) out of range [-10, 10)")):
        if FILTER and FILTER not in name:
            continue
        model, ins = gbq_model(name, data, idx, scales, None, dict(bits=4, block_size=32), const=("data", "scales"))
        d = os.path.join(out_dir, "errors", name)
        os.makedirs(d, exist_ok=True)
        onnx.save(model, os.path.join(d, "model.onnx"))
        for i, (n, a) in enumerate(ins):
            with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())
        with open(os.path.join(d, "expect"), "w") as f:
            f.write(expect + "\n")

def main():
    ap = argparse.ArgumentParser()
    cache = os.environ.get("SNUG_CACHE", os.path.expanduser("~/.cache/snug"))
    ap.add_argument("--out", default=os.path.join(cache, "contrib-cases"))
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    global FILTER
    FILTER = args.filter
    for fn in CASES:
        try:
            info = fn(args.out)
        except Exception as e:  # a case ORT rejects is a generator bug: report it
            print(f"gen_cases: {fn.__name__}: {type(e).__name__}: {e}", file=sys.stderr)
            failed += 1
            continue
        if info:
            for k, v in info.items():
                print(f"  {k}: ORT vs fp32 dequant, max err/tol = {v:.3g}")
        print(f"gen_cases: {fn.__name__} ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
