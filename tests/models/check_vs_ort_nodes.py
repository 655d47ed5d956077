"""bench/vs_ort --nodes on a fixture: both runtimes' per-node times come back
(snug bench --nodes, ORT's profiler), matched by node name, and the table
prints; each node keeps its smallest time over the profiled passes; the
per-round ratios (paired_ratio) are reported, and with one round equal the
ratios of the medians. One round of a tiny model: checks the
plumbing, not the speed.

    tests/models/py.sh tests/models/check_vs_ort_nodes.py --snug build/snug
"""
import json
import os
import subprocess
import sys

from bench_checks import ROOT, fixture_args, report


def main() -> int:
    a, model = fixture_args(__doc__)
    base = [sys.executable, os.path.join(ROOT, "bench", "vs_ort"), "--model", model, "--snug", a.snug,
            "--rounds", "1", "--prompt", "8", "--gen", "2", "--nodes", "4"]
    fails = []
    p = subprocess.run(base + ["--json"], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL vs_ort --json: exit {p.returncode}\n{p.stderr}")
        return 1
    d = json.loads(p.stdout)
    sn, on = d["snug"].get("nodes", {}), d["ort"].get("nodes", {})
    if not sn or not on:
        fails.append(f"per-node times missing: snug {len(sn)} nodes, ORT {len(on)}")
    common = set(sn) & set(on)
    if not any(sn[n][0] == "MatMulNBits" for n in common):
        fails.append(f"no MatMulNBits node matched by name ({len(common)} common names)")
    for side, nodes in (("snug", sn), ("ORT", on)):
        bad = [n for n, (op, pre, dec) in nodes.items() if not (pre >= 0 and dec >= 0 and op)]
        if bad:
            fails.append(f"{side}: bad figures for {bad[:3]}")
    if sum(v[1] for v in sn.values()) <= 0 or sum(v[1] for v in on.values()) <= 0:
        fails.append("a runtime's prefill node times sum to zero")
    for k in ("prefill_tok_s", "decode_tok_s"):
        pr = d.get("paired_ratio", {}).get(k, {})
        if not pr or abs(pr["median"] - d["ratio"][k]) > 1e-9 * abs(d["ratio"][k]) or pr["min"] != pr["max"]:
            fails.append(f"paired_ratio {k}: {pr} against the ratio of medians {d['ratio'][k]}")
    # load figures defined alike: snug's covers its set-up up to the first token's readiness
    # (open, then planning and packing, which its old figure left out), and both sides'
    # cold start adds the first prefill
    sj = d["snug"]
    if not 0 < sj.get("open_s", -1) < sj["load_s"]:
        fails.append(f"snug load_s {sj['load_s']} does not cover open_s {sj.get('open_s')} plus planning")
    for side in ("snug", "ort"):
        x = d[side]
        if not x.get("cold_s", 0) > x["load_s"] > 0:
            fails.append(f"{side}: load+1st prefill {x.get('cold_s')} against load {x['load_s']}")
    p = subprocess.run(base, capture_output=True, text=True)
    if "load+1st prefill s" not in p.stdout or "InferenceSession creation" not in p.stdout:
        fails.append("no definition of the load figures in the table")
    if "snug/ORT within each round" not in p.stdout:
        fails.append("no per-round ratio line")
    # the rows between the column heads and the total (a long name is shown
    # with its start cut to "...")
    lines = p.stdout.splitlines()
    head = next((i for i, l in enumerate(lines) if "prefill ms" in l and "decode ms/token" in l), None)
    tot = next((i for i, l in enumerate(lines) if l.startswith("  all nodes")), None)
    rows = lines[head + 2:tot] if head is not None and tot is not None else []
    if p.returncode != 0 or "the 4 slowest on either side" not in p.stdout or len(rows) != 4:
        fails.append(f"table: exit {p.returncode}, {len(rows)} node rows\n{p.stdout[-800:]}{p.stderr}")
    p = subprocess.run(base[:-1] + ["-1"], capture_output=True, text=True)
    if p.returncode != 2 or "must not be negative" not in p.stderr:
        fails.append(f"--nodes -1: exit {p.returncode}, {p.stderr.strip()[-200:]}")
    p = subprocess.run(base + ["--node-passes", "0"], capture_output=True, text=True)
    if p.returncode != 2 or "--node-passes must be at least 1" not in p.stderr:
        fails.append(f"--node-passes 0: exit {p.returncode}, {p.stderr.strip()[-200:]}")
    if d.get("node_passes") != 3:
        fails.append(f"node_passes {d.get('node_passes')}, want the default 3")
    # the per-node minimum over passes, on its own
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("vs_ort", os.path.join(ROOT, "bench", "vs_ort"))
    spec = importlib.util.spec_from_loader("vs_ort", loader)
    vs = importlib.util.module_from_spec(spec)
    loader.exec_module(vs)
    got = vs.min_nodes([{"a": ["MatMul", 2.0, 0.5], "b": ["Add", 1.0, 0.1]},
                        {"a": ["MatMul", 1.5, 0.7], "c": ["Mul", 3.0, 0.3]}])
    if got != {"a": ["MatMul", 1.5, 0.5], "b": ["Add", 1.0, 0.1], "c": ["Mul", 3.0, 0.3]}:
        fails.append(f"min_nodes: {got}")
    return report(f"vs_ort --nodes: {len(common)} nodes in both", fails)


if __name__ == "__main__":
    sys.exit(main())
