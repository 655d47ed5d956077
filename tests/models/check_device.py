"""Whole models on an accelerator (snug.device=opencl; on PoCL in CI) against
the host alone:

- `snug generate --device opencl --temp 0 -n 16` gives the host's 16 greedy
  ids on every fixture below (SmolLM2 genai and optimum included), the KV
  cache of a GroupQueryAttention export staying on the device when its
  attention runs there (GENERATE says which host run each is held to);
- `snug run --device opencl` on the float fixtures: every output within a
  normalized error of 1e-5 of the host's;
- `snug bench --device opencl --json`: the device memory the plan holds (its
  arenas, the weights' copies, a KV cache there) equals the peak the backend
  counted within 2%, and most nodes run on the device;
- `snug plan --device opencl` names the device and says why each node left on
  the host stayed there;
- errors: a device index that does not exist, a backend not in the build, and
  no OpenCL platform at all are errors naming what is missing, while the host
  path still runs.

Exit 77 (skipped) when snug has no OpenCL backend or the machine no device.

    tests/models/py.sh tests/models/check_device.py --snug build/snug
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

from bench_checks import fixture_args, report

# (on the device, on the host): the device's MatMulNBits sums in float at
# every accuracy_level, so tiny/genai (accuracy_level 4: the host quantizes
# the activations to int8, and its random weights make near ties) is held to
# the host's float path, tiny/genai-acc0 (the same weights at level 0).
GENERATE = (("tiny/genai", "tiny/genai-acc0"), ("tiny/genai-fp32",) * 2, ("tiny/optimum",) * 2,
            ("tiny/onnxscript",) * 2, ("smollm2-135m/genai",) * 2, ("smollm2-135m/optimum",) * 2)
RUN_FLOAT = ("tiny/genai-fp32", "tiny/optimum", "tiny/onnxscript", "tiny/genai-acc0")
PROMPT = "The capital of France is"


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


def ids_of(snug, d, device):
    r = run([snug, "generate", d, "-p", PROMPT, "--no-chat", "--temp", "0", "-n", "16", "--print-ids",
             "--device", device])
    m = re.search(r"\[ids ([0-9 ]+)\]", r.stderr)
    return (m.group(1).split() if m else None), r


def outputs(snug, model, device, out):
    r = run([snug, "run", model, "--device", device, "--output-dir", out])
    if r.returncode:
        return None, r
    res = {}
    for f in sorted(os.listdir(out)):
        res[f] = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, f))).astype(np.float64)
    return res, r


def main() -> int:
    a, _ = fixture_args(__doc__)
    fails = []
    probe = run([a.snug, "run", os.path.join(a.models, "tiny/genai-fp32/model.onnx"), "--device", "opencl"])
    if "no backend 'opencl'" in probe.stderr or "no OpenCL platform" in probe.stderr or \
       "no device" in probe.stderr:
        print("skipped: " + probe.stderr.strip().splitlines()[-1])
        return 77
    if probe.returncode:
        fails.append(f"probe run on opencl failed: {probe.stderr[-400:]}")
    for fx, hx in GENERATE:
        host, rh = ids_of(a.snug, os.path.join(a.models, hx), "cpu")
        dev, rd = ids_of(a.snug, os.path.join(a.models, fx), "opencl")
        if not host or not dev:
            fails.append(f"{fx}: generate failed: {(rh.stderr + rd.stderr)[-600:]}")
        elif host != dev:
            fails.append(f"{fx}: greedy ids on opencl {dev} differ from the host's on {hx} {host}")
        else:
            print(f"{fx}: 16 greedy ids on opencl equal the host's on {hx}")
    for fx in RUN_FLOAT:
        m = os.path.join(a.models, fx, "model.onnx")
        with tempfile.TemporaryDirectory() as t:
            h, rh = outputs(a.snug, m, "cpu", os.path.join(t, "h"))
            o, ro = outputs(a.snug, m, "opencl", os.path.join(t, "o"))
        if h is None or o is None:
            fails.append(f"{fx}: run failed: {(rh.stderr + ro.stderr)[-600:]}")
            continue
        worst = 0.0
        for k in h:
            if k not in o or h[k].shape != o[k].shape:
                fails.append(f"{fx}: output {k} missing or of another shape on opencl")
                continue
            worst = max(worst, float(np.linalg.norm(h[k] - o[k]) / max(np.linalg.norm(h[k]), 1e-30)))
        if worst > 1e-5:
            fails.append(f"{fx}: outputs on opencl differ from the host's by {worst:.2e} (normalized)")
        print(f"{fx}: {len(h)} outputs, worst normalized error {worst:.2e}")
    for fx in ("smollm2-135m/genai", "smollm2-135m/optimum"):
        m = os.path.join(a.models, fx, "model.onnx")
        r = run([a.snug, "bench", m, "--device", "opencl", "--prompt", "8", "--gen", "4", "--rounds", "1",
                 "--warmup", "0", "--ctx", "64", "--json"])
        try:
            j = json.loads(r.stdout)
            dv = j["device"]
        except (ValueError, KeyError):
            fails.append(f"{fx}: bench --device gave no device figures: {r.stderr[-400:]}")
            continue
        planned, peak = dv["planned_bytes"], dv["peak_bytes"]
        if not planned or abs(peak - planned) > 0.02 * planned:
            fails.append(f"{fx}: device peak {peak} bytes is not the plan's {planned} within 2%")
        if dv["nodes"] < 300:
            fails.append(f"{fx}: only {dv['nodes']} nodes on the device")
        # the whole KV cache lives on the device; with GroupQueryAttention there
        # too, what crosses per token is the tokens in and the logits out (12
        # runs here), not the cache (an Optimum export's new rows move from
        # present to the cache on the device, and count as copies)
        if dv["state_bytes"] != j["kv_cache_bytes"]:
            fails.append(f"{fx}: {dv['state_bytes']} bytes of state on the device, the KV cache is "
                         f"{j['kv_cache_bytes']}")
        if fx.endswith("genai") and dv["copied_bytes"] >= j["kv_cache_bytes"]:
            fails.append(f"{fx}: {dv['copied_bytes']} bytes copied between devices: the KV cache "
                         f"({j['kv_cache_bytes']}) crossed")
        print(f"{fx}: {dv['nodes']} nodes on {dv['name']}, planned {planned} bytes, backend's peak {peak}, "
              f"KV {dv['state_bytes']} bytes on the device, {dv['copied_bytes']} bytes copied")
    r = run([a.snug, "plan", os.path.join(a.models, "smollm2-135m/optimum/model.onnx"), "--ctx", "64",
             "--device", "opencl"])
    if r.returncode or not re.search(r"device opencl:0", r.stdout) or "on the host" not in r.stdout and \
       "0 on the host" not in r.stdout:
        fails.append(f"plan --device: no device section: {r.stdout[-600:]} {r.stderr[-300:]}")
    tiny = os.path.join(a.models, "tiny/genai/model.onnx")
    for dev, want in (("opencl:99", "no device '99'"), ("nosuch", "no backend 'nosuch'")):
        r = run([a.snug, "run", tiny, "--device", dev])
        if r.returncode == 0 or want not in r.stderr:
            fails.append(f"--device {dev}: wanted an error saying {want!r}, got rc {r.returncode}: {r.stderr[-300:]}")
    env = dict(os.environ, OCL_ICD_VENDORS="/nonexistent", OCL_ICD_FILENAMES="")
    r = run([a.snug, "run", tiny, "--device", "opencl"], env=env)
    if r.returncode == 0 or "no OpenCL platform" not in r.stderr:
        fails.append(f"no ICD: wanted 'no OpenCL platform', got rc {r.returncode}: {r.stderr[-300:]}")
    r = run([a.snug, "run", tiny], env=env)
    if r.returncode:
        fails.append(f"no ICD: the host path failed: {r.stderr[-300:]}")
    return report("device", fails)


if __name__ == "__main__":
    sys.exit(main())
