"""tests/models/oracle_f64.py on tiny/optimum: the float64 oracle is written
next to a link to the model, near ONNX Runtime's float32 oracle, and snug
(libsnug beside --snug) matches it; a model ONNX Runtime cannot run in
float64 (MatMulNBits: tiny/genai) is refused with a message.

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
        p = subprocess.run([sys.executable, tool, "--models", a.models, "--fixture", "tiny/genai", "--out", out],
                           capture_output=True, text=True)
        if p.returncode == 0 or "cannot run tiny/genai in float64" not in p.stderr:
            fails.append(f"tiny/genai: exit {p.returncode}, {p.stderr.strip()[-300:]}")
    return report("oracle_f64", fails)


if __name__ == "__main__":
    sys.exit(main())
