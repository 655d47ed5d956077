"""bench/ab_builds --nodes on a fixture: two builds (here the same binary
twice) alternated, each node's smallest time over the rounds, grouped with
the layer numbers taken out, the table prints; the minimum and the grouping
on their own; a bad count is refused. Checks the plumbing, not the speed.

    tests/models/py.sh tests/models/check_ab_builds.py --snug build/snug
"""
import importlib.machinery
import importlib.util
import os
import subprocess
import sys

from bench_checks import ROOT, fixture_args, report


def main() -> int:
    a, model = fixture_args(__doc__)
    script = os.path.join(ROOT, "bench", "ab_builds")
    base = [sys.executable, script, "--before", a.snug, "--after", a.snug, "--model", model, "--rounds", "2"]
    small = ["--", "--prompt", "8", "--gen", "2", "--rounds", "1"]
    fails = []
    p = subprocess.run(base + ["--nodes", "3"] + small, capture_output=True, text=True)
    lines = p.stdout.splitlines()
    head = next((i for i, l in enumerate(lines) if "prefill ms" in l and "decode ms/token" in l), None)
    tot = next((i for i, l in enumerate(lines) if l.startswith("  all nodes")), None)
    rows = lines[head + 2:tot] if head is not None and tot is not None else []
    if p.returncode != 0 or len(rows) != 3 or not any("layers.*" in r for r in rows) or \
            not any(l.startswith("after/before") for l in lines):
        fails.append(f"table: exit {p.returncode}, {len(rows)} group rows\n{p.stdout[-1200:]}{p.stderr}")
    p = subprocess.run(base + ["--nodes", "-1"] + small, capture_output=True, text=True)
    if p.returncode != 2 or "--nodes must not be negative" not in p.stderr:
        fails.append(f"--nodes -1: exit {p.returncode}, {p.stderr.strip()[-200:]}")
    loader = importlib.machinery.SourceFileLoader("ab_builds", script)
    spec = importlib.util.spec_from_loader("ab_builds", loader)
    ab = importlib.util.module_from_spec(spec)
    loader.exec_module(ab)
    best = ab.node_minima([[{"name": "/m/layers.0/a", "prefill_ms": 2.0, "decode_ms_per_token": 0.5},
                            {"name": "/m/layers.1/a", "prefill_ms": 1.0, "decode_ms_per_token": 0.4}],
                           [{"name": "/m/layers.0/a", "prefill_ms": 1.5, "decode_ms_per_token": 0.7}]])
    if best != {"/m/layers.0/a": [1.5, 0.5], "/m/layers.1/a": [1.0, 0.4]}:
        fails.append(f"node_minima: {best}")
    groups = dict(ab.node_groups(best))
    if groups != {"/m/layers.*/a": [2.5, 0.9]}:
        fails.append(f"node_groups: {groups}")
    return report("ab_builds --nodes", fails)


if __name__ == "__main__":
    sys.exit(main())
