#!/usr/bin/env python3
"""snug against the ONNX Runtime oracles of the model fixtures.

For every fixture under the models cache that has an oracle (oracle/oracle.json),
drives snug through libsnug (ctypes, include/snug.h) with the oracle's protocol:
prefill each prompt, then 16 teacher-forced decode steps feeding the stored greedy
tokens with the KV cache carried. Compares every logit with the oracle
(|snug - ort| <= atol + rtol * |ort|, rtol 1e-3, atol 1e-4 by default) and the
greedy argmax at every step; prints a table and exits 1 on any mismatch.

Fixtures whose MatMulNBits quantize activations to int8 (accuracy_level 4) are judged
by accuracy instead (docs/accuracy.md): their oracle also holds the float64 evaluation
of the same quantized model (snugmodels/ref64.py) and ONNX Runtime's error against it;
snug fails when its RMS logit error or its mean KL divergence exceeds RATIO x ONNX
Runtime's, or its top-1 agreement with float64 is more than TOP1_SLACK of the positions
below ONNX Runtime's (on >= 500 positions) by a margin that chance does not explain
(over 2 sigma of a sign test on the positions where only one of the two agrees).

    $(scripts/venv.sh)/bin/python tests/models/check_snug.py [--lib build/libsnug.so]
        [--models DIR] [--fixture PRESET/STYLE ...] [--threads N]
"""
from __future__ import annotations

import argparse
import ctypes as C
import glob
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
MAX_RANK = 12
RATIO = 1.1        # snug's RMS and mean KL against float64 may be at most this x ONNX Runtime's
TOP1_SLACK = 0.01  # top-1 agreement: at most this fraction of the positions below ONNX Runtime's
NP_OF = {1: np.float32, 6: np.int32, 7: np.int64, 10: np.float16, 11: np.float64}
DT_OF = {np.dtype(np.float32): 1, np.dtype(np.int32): 6, np.dtype(np.int64): 7}


class Tensor(C.Structure):
    _fields_ = [("dtype", C.c_int), ("rank", C.c_int), ("dims", C.c_int64 * MAX_RANK),
                ("data", C.c_void_p)]


class Snug:
    def __init__(self, lib: str):
        L = C.CDLL(lib)
        L.snug_options_new.restype = C.c_void_p
        L.snug_options_set.argtypes = [C.c_void_p, C.c_char_p, C.c_char_p]
        L.snug_options_free.argtypes = [C.c_void_p]
        L.snug_session_create.argtypes = [C.c_char_p, C.c_void_p, C.POINTER(C.c_void_p),
                                          C.c_char_p, C.c_size_t]
        L.snug_session_free.argtypes = [C.c_void_p]
        L.snug_session_error.argtypes = [C.c_void_p]
        L.snug_session_error.restype = C.c_char_p
        for f in ("snug_session_input_count", "snug_session_output_count"):
            getattr(L, f).argtypes = [C.c_void_p]
        for f in ("snug_session_input_name", "snug_session_output_name"):
            getattr(L, f).argtypes = [C.c_void_p, C.c_int]
            getattr(L, f).restype = C.c_char_p
        L.snug_session_run.argtypes = [C.c_void_p, C.POINTER(Tensor), C.c_int,
                                       C.POINTER(Tensor), C.c_int]
        self.L = L


class Session:
    def __init__(self, snug: Snug, model: str, threads: int):
        L = self.L = snug.L
        opts = L.snug_options_new()
        if threads:
            L.snug_options_set(opts, b"snug.threads", str(threads).encode())
        h = C.c_void_p()
        err = C.create_string_buffer(4096)
        rc = L.snug_session_create(model.encode(), opts, C.byref(h), err, len(err))
        L.snug_options_free(opts)
        if rc:
            raise RuntimeError(f"snug_session_create: {err.value.decode(errors='replace')}")
        self.h = h
        self.inputs = [L.snug_session_input_name(h, i).decode()
                       for i in range(L.snug_session_input_count(h))]
        self.outputs = [L.snug_session_output_name(h, i).decode()
                        for i in range(L.snug_session_output_count(h))]

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ins = (Tensor * len(self.inputs))()
        keep = []
        for i, name in enumerate(self.inputs):
            a = np.ascontiguousarray(feeds[name])
            keep.append(a)
            ins[i].dtype = DT_OF[a.dtype]
            ins[i].rank = a.ndim
            for d, v in enumerate(a.shape):
                ins[i].dims[d] = v
            ins[i].data = a.ctypes.data
        outs = (Tensor * len(self.outputs))()
        rc = self.L.snug_session_run(self.h, ins, len(ins), outs, len(outs))
        if rc:
            raise RuntimeError(f"snug_session_run: {self.L.snug_session_error(self.h).decode()}")
        res = {}
        for i, name in enumerate(self.outputs):
            t = outs[i]
            shape = tuple(t.dims[d] for d in range(t.rank))
            dt = np.dtype(NP_OF[t.dtype])
            n = int(np.prod(shape)) if shape else 1
            buf = (C.c_char * (n * dt.itemsize)).from_address(t.data) if n else b""
            res[name] = np.frombuffer(buf, dt, n).reshape(shape).copy() if n else np.zeros(shape, dt)
        return res

    def close(self):
        self.L.snug_session_free(self.h)


def run_fixture(snug: Snug, d: str, threads: int, rtol: float, atol: float) -> dict:
    from snugmodels import ref64
    o = json.load(open(os.path.join(d, "oracle", "oracle.json")))
    acc = o.get("accuracy")  # int8 activations: judged against float64, not ORT's rounding
    sums = None
    agree = []
    t0 = time.time()
    s = Session(snug, os.path.join(d, "model.onnx"), threads)
    past_names = [n for n in s.inputs if n.startswith("past_key_values.")]
    res = {"max_abs": 0.0, "worst_pct": 100.0, "steps": 0, "bad_steps": 0, "argmax_bad": 0,
           "where": ""}
    try:
        # past shape [1, kv_heads, 0, head_dim] from the oracle's own first present
        kv_shape = None
        for pi, p in enumerate(o["prompts"]):
            ids, greedy = p["ids"], p["greedy"]
            want_pre = np.load(os.path.join(d, p["prefill_logits"]))
            want_dec = np.load(os.path.join(d, p["decode_logits"]))
            past = None
            length = 0
            steps = [("prefill", ids, want_pre)]
            steps += [(f"decode {j}", [greedy[j]], want_dec[j:j + 1]) for j in range(len(want_dec))]
            for si, (label, toks, want) in enumerate(steps):
                S = len(toks)
                feeds = {"input_ids": np.array([toks], np.int64),
                         "attention_mask": np.ones((1, length + S), np.int64)}
                if "position_ids" in s.inputs:
                    feeds["position_ids"] = np.arange(length, length + S, dtype=np.int64)[None]
                if past is None:
                    if kv_shape is None:
                        kv_shape = _kv_shape(d, past_names)
                    past = {n: np.zeros(kv_shape, np.float32) for n in past_names}
                feeds.update(past)
                out = s.run(feeds)
                logits = out["logits"][0].astype(np.float32)
                past = {n: out[n.replace("past_key_values.", "present.")] for n in past_names}
                length += S
                if acc is not None:
                    key = "prefill_f64" if si == 0 else "decode_f64"
                    ref = np.load(os.path.join(d, p[key]))
                    ref = ref if si == 0 else ref[si - 1:si]
                    sums = ref64.add_sums(sums, ref64.error_sums(ref, logits))
                    top = ref.argmax(-1)  # per position: snug right, ORT right (its oracle logits)
                    agree.append(np.stack([logits.argmax(-1) == top, want.reshape(ref.shape).argmax(-1) == top]))
                    res["steps"] += 1
                    continue
                err = np.abs(logits.astype(np.float64) - want)
                ok = err <= atol + rtol * np.abs(want)
                pct = ok.mean() * 100
                res["steps"] += 1
                res["max_abs"] = max(res["max_abs"], float(err.max()))
                if pct < res["worst_pct"]:
                    res["worst_pct"], res["where"] = pct, f"p{pi} {label}"
                if not ok.all():
                    res["bad_steps"] += 1
                expect = greedy[si] if si < len(greedy) else None
                if expect is not None and int(np.argmax(logits[-1])) != int(expect):
                    res["argmax_bad"] += 1
    finally:
        s.close()
    res["seconds"] = time.time() - t0
    res["ok"] = res["bad_steps"] == 0 and res["argmax_bad"] == 0
    if acc is not None:
        mine, ort = ref64.summarize(sums), acc["ort"]
        both = np.concatenate(agree, axis=1)
        only_snug, only_ort = int((both[0] & ~both[1]).sum()), int((~both[0] & both[1]).sum())
        # top-1: more than TOP1_SLACK of the positions below ORT, and a deficit that chance
        # does not explain (over 2 sigma of a sign test on the positions where exactly one
        # of the two agrees with float64: equally accurate roundings split those evenly)
        deficit = only_ort - only_snug
        top1_ok = not (deficit > TOP1_SLACK * ort["positions"] and deficit > 2 * (only_snug + only_ort) ** 0.5)
        mine["only"], ort["only"] = only_snug, only_ort
        res["accuracy"] = (mine, ort)
        res["ok"] = (mine["positions"] == ort["positions"] == both.shape[1] and int(both[1].sum()) == ort["top1"]
                     and mine["rms"] <= RATIO * ort["rms"] and mine["kl"] <= RATIO * ort["kl"] and top1_ok)
    return res


def _kv_shape(d: str, past_names: list[str]) -> tuple:
    import onnx
    m = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
    for i in m.graph.input:
        if i.name == past_names[0]:
            dims = [x.dim_value if x.dim_value else 0 for x in i.type.tensor_type.shape.dim]
            return (1, dims[1], 0, dims[3])
    raise RuntimeError("no past_key_values input")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libsnug.so"))
    ap.add_argument("--models", default=os.environ.get("SNUG_MODELS",
                                                     os.path.expanduser("~/.cache/snug/models")))
    ap.add_argument("--fixture", action="append", help="PRESET/STYLE (repeatable); default all")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    a = ap.parse_args()
    dirs = sorted(os.path.dirname(os.path.dirname(p))
                  for p in glob.glob(os.path.join(a.models, "*", "*", "oracle", "oracle.json")))
    if a.fixture:
        # a requested fixture that is missing, or has no oracle, is a failure: a check not
        # made must not read as a pass
        have = {os.path.relpath(d, a.models) for d in dirs}
        absent = [f for f in a.fixture if f not in have]
        for f in absent:
            why = "has no oracle (oracle/oracle.json)" if os.path.isdir(os.path.join(a.models, f)) else "is missing"
            print(f"{f:32s} ERROR requested fixture {why} under {a.models} "
                  f"(tests/models/fetch_and_build.sh builds it)")
        dirs = [d for d in dirs if os.path.relpath(d, a.models) in a.fixture]
    else:
        absent = []
    if not dirs and not absent:
        print(f"no fixtures with an oracle under {a.models}")
        return 1
    snug = Snug(a.lib)
    print(f"{'fixture':32s} {'steps':>5s} {'max|err|':>10s} {'worst ok%':>9s} {'bad steps':>9s} "
          f"{'argmax':>6s} {'time':>6s}  worst at")
    failed = len(absent)
    accurate = []
    for d in dirs:
        name = os.path.relpath(d, a.models)
        try:
            r = run_fixture(snug, d, a.threads, a.rtol, a.atol)
        except Exception as e:  # noqa: BLE001 - reported per fixture
            print(f"{name:32s} ERROR {e}")
            failed += 1
            continue
        status = "ok" if r["ok"] else "MISMATCH"
        failed += not r["ok"]
        if "accuracy" in r:
            status = "ok" if r["ok"] else "LESS ACCURATE"
            accurate.append((name, r["accuracy"], status))
            print(f"{name:32s} {r['steps']:5d}  int8 activations: against float64, see below"
                  f"{r['seconds']:5.0f}s  {status}", flush=True)
            continue
        print(f"{name:32s} {r['steps']:5d} {r['max_abs']:10.3g} {r['worst_pct']:8.2f}% "
              f"{r['bad_steps']:9d} {r['steps'] - r['argmax_bad']:3d}/{r['steps']:<3d}"
              f"{r['seconds']:5.0f}s  {r['where'] if not r['ok'] else ''} {status}", flush=True)
    if accurate:
        print(f"\nint8-activation fixtures against float64 (snug fails above {RATIO}x ONNX Runtime's RMS or "
              f"mean KL, or {TOP1_SLACK:.0%} of positions below its top-1):")
        print(f"{'fixture':32s} {'who':5s} {'rms':>9s} {'max':>9s} {'mean KL':>10s} {'top-1':>11s} {'alone':>5s}"
              f"  snug/ORT rms, KL")
        for name, (mine, ort), status in accurate:
            for who, m in (("ORT", ort), ("snug", mine)):
                tail = (f"  {mine['rms'] / ort['rms']:.3f}, {mine['kl'] / ort['kl']:.3f}  {status}"
                        if who == "snug" and ort["rms"] and ort["kl"] else "")
                print(f"{name:32s} {who:5s} {m['rms']:9.4g} {m['max']:9.4g} {m['kl']:10.4g} "
                      f"{m['top1']:5d}/{m['positions']:<5d} {m['only']:5d}{tail}")
        print("(alone: positions where only this runtime's top-1 is float64's)")
    total = len(dirs) + len(absent)
    print(f"{total - failed}/{total} fixtures pass: float ones match ONNX Runtime "
          f"(rtol {a.rtol:g}, atol {a.atol:g}, greedy ids), int8-activation ones are as accurate against float64")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
