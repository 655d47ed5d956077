"""bench/mnb_cache on small chains: both chains run and the summary prints;
a bad count is refused. Checks the plumbing, not the speed.

    tests/models/py.sh tests/models/check_mnb_cache.py --snug build/snug
"""
import os
import subprocess
import sys

from bench_checks import ROOT, fixture_args, report


def main() -> int:
    a, _ = fixture_args(__doc__)
    base = [sys.executable, os.path.join(ROOT, "bench", "mnb_cache"), "--snug", a.snug, "--k", "64", "--n", "96",
            "--small", "1", "--large", "3", "--rounds", "2", "--reps", "200"]  # plumbing: few runs
    fails = []
    p = subprocess.run(base, capture_output=True, text=True)
    lines = p.stdout.splitlines()
    if p.returncode != 0 or sum(l.startswith("round ") for l in lines) != 2 or \
            not any(l.startswith("memory/cache") for l in lines) or \
            not any(l.startswith("cache ") and "products" in l for l in lines):
        fails.append(f"summary: exit {p.returncode}\n{p.stdout[-800:]}{p.stderr[-800:]}")
    p = subprocess.run(base + ["--small", "0"], capture_output=True, text=True)
    if p.returncode != 2 or "--small must be at least 1" not in p.stderr:
        fails.append(f"--small 0: exit {p.returncode}, {p.stderr.strip()[-200:]}")
    return report("mnb_cache", fails)


if __name__ == "__main__":
    sys.exit(main())
