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
reproduce the float64 logits stored in the fixture's oracle.

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
    return report("oracle_f64", fails)


if __name__ == "__main__":
    sys.exit(main())
