#!/usr/bin/env python3
"""Issue-5 guarantees on the LLM fixtures, through `snug bench --json`:

  a. decode steps within the planned context allocate nothing (the library's
     allocator counter over every decode step);
  b. the planned arena is at most 1.10 x its lower bound (the largest total of
     tensors alive at one step);
  c. the estimate made before planning (the plan at the bounds run dry: no
     weight read or packed; weights + packed weights + arena with workspace +
     KV cache + the library's heap before planning) is within 5% of the
     measured peak RSS growth (the program's own code pages excluded), and so
     is the accounting made after planning (the same figures from what the
     plan made, with the allocator's high-water mark): the estimate is what
     placement and streaming decide from, the accounting checks that
     residency is tracked.

Each fixture is measured in both weight modes (snug bench --weights):

  load  weights are read from the file into snug's own memory and nothing of
        the file stays mapped: resident memory is what the plan holds, so (c)
        holds whatever the page cache holds. (c) is checked here (--check-c).
  map   weights are read through the file map: what a read fault makes
        resident is the kernel's choice (a 64 KiB fault-around window from a
        cold cache, a whole large folio of up to 2 MiB from a freshly written
        file; see docs/executor.md), so (c) is reported only, measured from a
        cold page cache (the model's files dropped with posix_fadvise first).

(c) is measured with a prefill of the whole planned context (the arena is
planned for it, so that run touches all of it); (a) with a short prompt and
decode steps up to the context. With --ort also ONNX Runtime's peak RSS growth
on the same prefill (default session options: memory pattern and arena on;
peak minus the RSS after importing onnxruntime), through bench/vs_ort's worker
in the project venv.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.environ.get("SNUG_MODELS", os.path.expanduser("~/.cache/snug/models"))


def bench(snug, model, prompt, gen, ctx, weights):
    cmd = [snug, "bench", model, "--prompt", str(prompt), "--gen", str(gen), "--ctx", str(ctx),
           "--rounds", "1", "--warmup", "0", "--threads", "2", "--weights", weights, "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def ort_growth(model, ctx):
    venv_py = os.path.expanduser("~/.cache/snug/venv/bin/python")
    vs_ort = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "vs_ort")
    cmd = [venv_py, vs_ort, "--ort-worker", "--model", model, "--threads", "2", "--prompt", str(ctx), "--gen", "0",
           "--warmup", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return None
    d = json.loads(r.stdout)
    return d["peak_rss_bytes"] - d["rss_after_import_bytes"]


def drop_page_cache(model):
    """Drops the clean page-cache pages of the model's files (its folder)."""
    folder = os.path.dirname(model)
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isfile(path):  # the model and its external data, whatever their names
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)  # a freshly built model may still be dirty: those pages are not dropped
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def mib(b):
    return f"{b / 2**20:9.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snug", required=True)
    ap.add_argument("--fixture", action="append", default=[], help="e.g. tiny/genai (repeatable)")
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--check-c", action="store_true",
                    help="fail when (c) under --weights load is off by more than --tolerance")
    ap.add_argument("--warm", action="store_true", help="keep the page cache as it is (default: drop it first)")
    ap.add_argument("--ort", action="store_true", help="add ONNX Runtime's peak RSS growth (not checked)")
    a = ap.parse_args()
    if not a.fixture:
        ap.error("no --fixture given")
    failures = []
    print(f"{'':28} {'':>9} {'':>9} {'--- weights=load ------------------':>39} "
          f"{'--- weights=map (cold) ------------':>39}")
    print(f"{'fixture':28} {'arena MiB':>9} {'lower MiB':>9}" +
          f" {'meas MiB':>9} {'est MiB':>9} {'est/meas':>9} {'acct/meas':>9}" * 2 +
          f" {'allocs':>6}" + (f" {'ORT MiB':>9}" if a.ort else ""))
    for fx in a.fixture:
        model = os.path.join(ROOT, fx, "model.onnx")
        if not os.path.exists(model):
            failures.append(f"{fx}: {model} is missing (models.build builds it)")
            continue
        row = {}
        try:
            for mode in ("load", "map"):
                if not a.warm:
                    drop_page_cache(model)
                peak = bench(a.snug, model, a.ctx, 0, a.ctx, mode)
                dec = bench(a.snug, model, 8, a.ctx - 8, a.ctx, mode)
                p, meas = peak["accounted"], peak["rss_growth_bytes"]
                e = peak.get("estimate")
                if e is None:
                    raise RuntimeError(f"weights={mode}: no estimate before planning (planned per step?)")
                ratio = (lambda x: x["total"] / meas if meas else float("inf"))
                row[mode] = (p, meas, ratio(p), dec["decode_allocations"], e, ratio(e))
        except Exception as e:  # noqa: BLE001 - report and go on with the next fixture
            failures.append(f"{fx}: {e}")
            continue
        p = row["load"][0]
        allocs = max(row["load"][3], row["map"][3])
        print(f"{fx:28} {mib(p['arena'])} {mib(p['lower_bound'])}", end="")
        for mode in ("load", "map"):
            pm, meas, ratio, _, em, eratio = row[mode]
            print(f" {mib(meas)} {mib(em['total'])} {eratio:9.3f} {ratio:9.3f}", end="")
        print(f" {allocs:6d}", end="")
        if a.ort:
            og = ort_growth(model, a.ctx)
            print(f" {mib(og) if og is not None else '        -'}", end="")
        print()
        for mode in ("load", "map"):
            pm, meas, ratio, n_alloc, _, _ = row[mode]
            if n_alloc != 0:
                failures.append(f"{fx}: (a) weights={mode}: {n_alloc} allocations during {a.ctx - 8} decode steps")
            if pm["arena"] > 1.10 * pm["lower_bound"]:
                failures.append(f"{fx}: (b) arena {pm['arena']} > 1.10 x lower bound {pm['lower_bound']}")
        pl, ml, rl, _, el, erl = row["load"]
        if a.check_c and abs(erl - 1) > a.tolerance:
            failures.append(f"{fx}: (c) weights=load: estimated before planning {el['total']} vs measured {ml} "
                            f"bytes ({erl:.3f}); components {el}")
        if a.check_c and abs(rl - 1) > a.tolerance:
            failures.append(f"{fx}: (c) weights=load: accounted after planning {pl['total']} vs measured {ml} "
                            f"bytes ({rl:.3f}); components {pl}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
