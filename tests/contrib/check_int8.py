#!/usr/bin/env python3
"""The accuracy rule for int8-activation chains (issue #22, docs/accuracy.md).

A chain of MatMulNBits nodes with accuracy_level 4 re-quantizes its
activations to int8 at every node: one rounding that differs from ONNX
Runtime's flips a code downstream, and the flip grows. Where snug's kernels
sum in their own order (AVX-512 VNNI), such a case is not held to a float
tolerance against ONNX Runtime but to the rule: against the float64
evaluation of the same quantized model (tests/models/snugmodels/ref64.py),
snug's RMS error at most 1.1x ONNX Runtime's.

    check_int8.py SNUG CASES_DIR SUBSTR
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from snugmodels.ref64 import Ref64  # noqa: E402

RATIO = 1.1


def main() -> int:
    snug, root, sub = sys.argv[1:4]
    import onnxruntime as ort
    cases = sorted(d for d in os.listdir(root) if sub in d)
    if not cases:
        print(f"check_int8: no case in {root} contains {sub!r}", file=sys.stderr)
        return 1
    bad = 0
    for d in cases:
        case = os.path.join(root, d)
        data = os.path.join(case, "test_data_set_0")
        model = onnx.load(os.path.join(case, "model.onnx"), load_external_data=False)
        names = [i.name for i in model.graph.input]
        outs = [o.name for o in model.graph.output]
        feeds = {n: numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f"input_{i}.pb")))
                 for i, n in enumerate(names)}
        ref = Ref64(os.path.join(case, "model.onnx")).run(outs, feeds)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 2
        got_ort = ort.InferenceSession(os.path.join(case, "model.onnx"), so).run(outs, feeds)
        with tempfile.TemporaryDirectory() as t:
            r = subprocess.run([snug, "run", os.path.join(case, "model.onnx"), "--input-dir", data,
                                "--output-dir", t, "--threads", "2"], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {d}: snug run exited {r.returncode}: {r.stderr.strip()}")
                bad += 1
                continue
            got = [numpy_helper.to_array(onnx.load_tensor(os.path.join(t, f"output_{i}.pb")))
                   for i in range(len(outs))]
        for i, name in enumerate(outs):
            e_snug = float(np.sqrt(np.mean((got[i].astype(np.float64) - ref[i]) ** 2)))
            e_ort = float(np.sqrt(np.mean((got_ort[i].astype(np.float64) - ref[i]) ** 2)))
            ok = e_snug <= RATIO * e_ort + 1e-7
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {d} {name}: RMS error against float64 snug {e_snug:.6g}, "
                  f"ONNX Runtime {e_ort:.6g} (ratio {e_snug / max(e_ort, 1e-30):.3f}, at most {RATIO})")
    print(f"check_int8: {len(cases)} case(s), {bad} over the rule")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
