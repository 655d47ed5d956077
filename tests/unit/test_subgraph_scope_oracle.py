"""ONNX Runtime's outputs for test_subgraph_scope's models: run the test with
SNUG_SCOPE_DUMP=DIR (it writes DIR/<case>.onnx and DIR/<case>_<k>.txt, one
line per input: name dtype rank dims... values...), then
python3 test_subgraph_scope_oracle.py DIR, and compare with the numbers in
the test. Needs onnx, onnxruntime, numpy (scripts/venv.sh)."""
import glob
import os
import sys

import numpy as np
import onnxruntime as ort

DT = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32, "bool": np.bool_}


def feeds(path):
    out = {}
    for line in open(path):
        f = line.split()
        name, dt, rank = f[0], f[1], int(f[2])
        dims = [int(v) for v in f[3:3 + rank]]
        vals = [float(v) for v in f[3 + rank:]]
        out[name] = np.array(vals, dtype=np.float64).astype(DT[dt]).reshape(dims)
    return out


def main(d):
    for model in sorted(glob.glob(os.path.join(d, "*.onnx"))):
        case = os.path.basename(model)[:-5]
        # (onnx.checker wants a shape on every typed value: the models leave
        # some out on purpose, so ONNX Runtime's loader is the check)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        k = 0
        while os.path.exists(os.path.join(d, f"{case}_{k}.txt")):
            outs = sess.run(None, feeds(os.path.join(d, f"{case}_{k}.txt")))
            for i, o in enumerate(outs):
                o = np.asarray(o)
                vals = ", ".join(f"{v:.9g}" for v in o.astype(np.float64).ravel())
                print(f"{case} variant {k} output {i}: {o.dtype} [{','.join(map(str, o.shape))}] {{{vals}}}")
            k += 1


if __name__ == "__main__":
    main(sys.argv[1])
