#!/usr/bin/env python3
"""A float64 reference for a float32 fixture: is a mismatch snug's, or float32's?

Converts the fixture's model to float64 (every float initializer, constant,
Cast to float, graph input and output), runs it in ONNX Runtime with the
oracle's protocol (teacher-forced on the oracle's greedy ids), and writes a
copy of the fixture under OUT whose oracle logits are the float64 ones
(stored as float32) beside the original model. Prints how far ONNX
Runtime's own float32 oracle is from it, counted as check_snug.py counts
(|d| <= atol + rtol |ref| per logit, rtol 1e-3 and atol 1e-4 unless
given; a prefill is one step). Then

    tests/models/py.sh tests/models/check_snug.py --models OUT --fixture PRESET/STYLE

measures snug against the same float64 answer. Models ONNX Runtime cannot
run in float64 (the genai style's com.microsoft ops: MatMulNBits,
GroupQueryAttention, SkipSimplifiedLayerNormalization) are evaluated by
snugmodels/ref64.py instead, in numpy float64 with MatMulNBits' weights
dequantized exactly; tests/models/check_oracle_f64.py validates that
evaluator against ONNX Runtime on the float paths of the same graphs.

    tests/models/py.sh tests/models/oracle_f64.py --fixture smollm2-360m/optimum --out /tmp/f64
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from snugmodels.oracle import Runner  # noqa: E402

F32, F64 = 1, 11


def to_f64(model):
    import onnx
    from onnx import numpy_helper
    g = model.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == F32:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == F32:
                a.i = F64
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F32:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == F32:
            v.type.tensor_type.elem_type = F64
    del g.value_info[:]
    return model


class Runner64(Runner):
    def reset(self):
        self.past = {n: np.zeros((1, self.kv_heads, 0, self.head_dim), np.float64) for n in self.past_names}
        self.length = 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixture", required=True, help="PRESET/STYLE, e.g. smollm2-360m/optimum")
    ap.add_argument("--models", default=os.environ.get("SNUG_MODELS", os.path.expanduser("~/.cache/snug/models")))
    ap.add_argument("--out", required=True, help="folder for the float64 copy (OUT/PRESET/STYLE)")
    ap.add_argument("--rtol", type=float, default=1e-3, help="as check_snug.py (1e-3)")
    ap.add_argument("--atol", type=float, default=1e-4, help="as check_snug.py (1e-4)")
    a = ap.parse_args()
    import onnx
    import onnxruntime as ort
    src = os.path.join(a.models, a.fixture)
    man_path = os.path.join(src, "oracle", "oracle.json")
    if not os.path.isfile(man_path):
        sys.exit(f"oracle_f64: {man_path} missing (tests/models/fetch_and_build.sh builds the fixtures)")
    dst = os.path.join(a.out, a.fixture)
    os.makedirs(os.path.join(dst, "oracle"), exist_ok=True)
    m = to_f64(onnx.load(os.path.join(src, "model.onnx")))
    p64 = os.path.join(dst, "model64.onnx")
    onnx.save(m, p64, save_as_external_data=True, location="model64.onnx.data")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(p64, so, providers=["CPUExecutionProvider"])
        how = "ONNX Runtime in float64"
    except Exception as e:  # ORT raises its own exception types
        from snugmodels.ref64 import Ref64
        try:
            sess = Ref64(os.path.join(src, "model.onnx"))
        except ValueError as e2:
            sys.exit(f"oracle_f64: ONNX Runtime cannot run {a.fixture} in float64 ({str(e).splitlines()[0]}), "
                     f"nor can snugmodels/ref64.py: {e2}")
        how = "snugmodels/ref64.py (ONNX Runtime has no float64 kernels for it)"
        for f in os.listdir(dst):
            if f.startswith("model64.onnx"):
                os.remove(os.path.join(dst, f))
    for f in os.listdir(src):  # the original model (and its data) beside the float64 oracle
        if f.startswith("model.onnx") and not os.path.lexists(os.path.join(dst, f)):
            os.symlink(os.path.join(src, f), os.path.join(dst, f))
    with open(man_path) as f:
        man = json.load(f)
    r = Runner64(sess)
    bad = steps = 0
    worst = 0.0
    for p in man["prompts"]:
        ref_dec = np.load(os.path.join(src, p["decode_logits"]))
        pre, dec, _ = r.greedy(p["ids"], len(ref_dec), forced=p["greedy"])
        for key, exact in (("prefill_logits", pre), ("decode_logits", dec)):
            np.save(os.path.join(dst, p[key]), exact.astype(np.float32))
            o32 = np.load(os.path.join(src, p[key]))
            err = np.abs(o32.astype(np.float64) - exact)
            ok = (err <= a.atol + a.rtol * np.abs(exact)).reshape(len(exact), -1).all(axis=1)
            worst = max(worst, float(err.max()) if err.size else 0.0)
            if key == "prefill_logits":
                bad += int(not ok.all())
                steps += 1
            else:
                bad += int((~ok).sum())
                steps += len(ok)
    with open(os.path.join(dst, "oracle", "oracle.json"), "w") as f:
        json.dump(man, f)
    print(f"{a.fixture}: float64 from {how}")
    print(f"{a.fixture}: ONNX Runtime float32 against float64: max |err| {worst:.3g}, "
          f"{bad} of {steps} steps with a logit outside atol {a.atol} + rtol {a.rtol}")
    print(f"float64 oracle written to {dst}; snug against it: "
          f"tests/models/py.sh tests/models/check_snug.py --models {a.out} --fixture {a.fixture}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
