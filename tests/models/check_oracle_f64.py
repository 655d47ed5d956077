"""tests/models/oracle_f64.py on tiny/optimum: the float64 oracle is written
next to a link to the model, near ONNX Runtime's float32 oracle, and snug
(libsnug beside --snug) matches it. A model ONNX Runtime cannot run in float64
(the genai style's com.microsoft ops) goes through snugmodels/ref64.py, the
float64 reference of the accuracy rule for int8 activations; that evaluator
is validated here against ONNX Runtime on the float paths of the same graphs:
on tiny/genai-fp32 (GroupQueryAttention, the skip norms, float MatMul) and
tiny/genai-acc0 (MatMulNBits with accuracy_level 0: ORT dequantizes and
multiplies in float32) ORT's float32 oracle must be within float32's error of
it (|d| <= 1e-4 + 1e-3 |ref|, the float paths' tolerance; measured max |d| 8e-5
and 5e-5, relative RMS 3e-6); and on tiny/genai (int8 activations) it must
reproduce the float64 logits stored in the fixture's oracle. Its
GatherBlockQuantized (genai-sym's tied embedding) is checked against ONNX
Runtime on small tables of 4 and 8 bits, with and without zero points.

    tests/models/py.sh tests/models/check_oracle_f64.py --snug build/snug
"""
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

from bench_checks import ROOT, fixture_args, report


def main() -> int:
    a, _ = fixture_args(__doc__, "tiny/optimum")
    tool = os.path.join(ROOT, "tests", "models", "oracle_f64.py")
    fails = []
    with tempfile.TemporaryDirectory(prefix="snug-f64-") as out:
        p = subprocess.run([sys.executable, tool, "--models", a.models, "--fixture", a.fixture, "--out", out],
                           capture_output=True, text=True)
        dst = os.path.join(out, a.fixture)
        npys = sorted(glob.glob(os.path.join(dst, "oracle", "*.npy")))
        if p.returncode != 0 or "steps with a logit outside" not in p.stdout or not npys or \
                not os.path.lexists(os.path.join(dst, "model.onnx")):
            fails.append(f"oracle_f64: exit {p.returncode}, {len(npys)} files\n{p.stdout[-600:]}{p.stderr[-600:]}")
        for f in npys:
            ref = np.load(os.path.join(a.models, a.fixture, "oracle", os.path.basename(f)))
            got = np.load(f)
            if got.shape != ref.shape or float(np.max(np.abs(got - ref))) > 1e-3:
                fails.append(f"{os.path.basename(f)}: float64 oracle far from float32's")
        lib = os.path.join(os.path.dirname(os.path.abspath(a.snug)), "libsnug.so")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "check_snug.py"), "--lib", lib,
                            "--models", out, "--fixture", a.fixture], capture_output=True, text=True)
        if p.returncode != 0:
            fails.append(f"check_snug against float64: exit {p.returncode}\n{p.stdout[-600:]}{p.stderr[-300:]}")
        # the float64 evaluator against ORT where ORT computes in float32 without int8
        for fx in ("tiny/genai-fp32", "tiny/genai-acc0"):
            p = subprocess.run([sys.executable, tool, "--models", a.models, "--fixture", fx, "--out", out],
                               capture_output=True, text=True)
            if p.returncode != 0 or "ref64.py" not in p.stdout or " 0 of " not in p.stdout:
                fails.append(f"{fx}: the float64 evaluator against ONNX Runtime: exit {p.returncode}\n"
                             f"{p.stdout[-400:]}{p.stderr[-400:]}")
        p = subprocess.run([sys.executable, tool, "--models", a.models, "--fixture", "tiny/genai", "--out", out],
                           capture_output=True, text=True)
        if p.returncode != 0:
            fails.append(f"tiny/genai: exit {p.returncode}, {p.stderr.strip()[-300:]}")
        else:
            import json
            with open(os.path.join(a.models, "tiny/genai/oracle/oracle.json")) as f:
                man = json.load(f)
            for e in man["prompts"]:
                for key, f64 in (("prefill_logits", "prefill_f64"), ("decode_logits", "decode_f64")):
                    got = np.load(os.path.join(out, "tiny/genai", e[key]))
                    want = np.load(os.path.join(a.models, "tiny/genai", e[f64]))
                    if got.shape != want.shape or not np.array_equal(got, want):
                        fails.append(f"tiny/genai {e[key]}: not the fixture's float64 logits {e[f64]}")
    fails += check_gather_block_quantized()
    return report("oracle_f64", fails)


def check_gather_block_quantized() -> list:
    """The float64 evaluator's GatherBlockQuantized (shared embeddings in today's genai builder)
    against ONNX Runtime: uint8 data of 4 and 8 bits, with and without zero points."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
    from snugmodels.ref64 import Ref64
    rng = np.random.default_rng(0)
    fails = []
    with tempfile.TemporaryDirectory(prefix="snug-gbq-") as d:
        for bits in (4, 8):
            for with_zp in (True, False):
                rows, cols, bs = 40, 64, 32
                pack = (lambda q: (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)) if bits == 4 else (lambda q: q)
                q = rng.integers(0, 1 << bits, (rows, cols)).astype(np.uint8)
                inits = [nh.from_array(pack(q), "D"),
                         nh.from_array((rng.random((rows, cols // bs)) * 0.1 + 0.01).astype(np.float32), "S")]
                ins = ["D", "idx", "S"]
                if with_zp:
                    inits.append(nh.from_array(pack(rng.integers(0, 1 << bits, (rows, cols // bs)).astype(np.uint8)),
                                               "Z"))
                    ins.append("Z")
                node = h.make_node("GatherBlockQuantized", ins, ["y"], domain="com.microsoft", bits=bits,
                                   block_size=bs)
                g = h.make_graph([node], "g", [h.make_tensor_value_info("idx", T.INT64, [5])],
                                 [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
                m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
                m.ir_version = 8
                path = os.path.join(d, f"gbq{bits}{int(with_zp)}.onnx")
                onnx.save(m, path)
                idx = np.array([0, 3, 39, 7, 3], np.int64)
                want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"idx": idx})[0]
                got = Ref64(path).run(["y"], {"idx": idx})[0]
                err = float(np.max(np.abs(got - want) / (1e-6 + np.abs(want))))
                if got.shape != want.shape or err > 1e-5:
                    fails.append(f"GatherBlockQuantized bits {bits} zero points {with_zp}: relative error {err:.3g}")
    return fails


if __name__ == "__main__":
    sys.exit(main())
