"""The model checkers fail on a check they could not make, instead of passing it:

- check_snug.py with a requested fixture that is missing (beside one that exists)
  exits 1 and names it (it used to drop it and pass on the rest);
- check.py --cross, where a requested style of a same-weights pair is missing,
  fails that pair (it used to skip it and pass on the pairs it had).

    tests/models/py.sh tests/models/check_strict.py --snug build/snug
"""
import os
import subprocess
import sys
import tempfile

from bench_checks import ROOT, fixture_args, report

HERE = os.path.join(ROOT, "tests", "models")


def main() -> int:
    a, _ = fixture_args(__doc__, "tiny/optimum")
    fails = []
    lib = os.path.join(os.path.dirname(os.path.abspath(a.snug)), "libsnug.so")
    p = subprocess.run([sys.executable, os.path.join(HERE, "check_snug.py"), "--lib", lib, "--models", a.models,
                        "--fixture", "tiny/optimum", "--fixture", "tiny/no-such-style"], capture_output=True, text=True)
    if p.returncode != 1 or "tiny/no-such-style" not in p.stdout or "requested fixture is missing" not in p.stdout:
        fails.append(f"check_snug.py with a missing fixture: exit {p.returncode}\n{p.stdout[-600:]}{p.stderr[-300:]}")
    # a models folder with two of the tiny styles: the pair they form passes, the pairs
    # with a missing requested style fail
    with tempfile.TemporaryDirectory(prefix="snug-strict-") as d:
        os.makedirs(os.path.join(d, "tiny"))
        for style in ("optimum", "optimum-noname"):
            os.symlink(os.path.join(a.models, "tiny", style), os.path.join(d, "tiny", style))
        env = dict(os.environ, SNUG_MODELS=d)
        p = subprocess.run([sys.executable, os.path.join(HERE, "check.py"), "--preset", "tiny", "--cross"],
                           capture_output=True, text=True, env=env)
        out = p.stdout
        if p.returncode != 1 or "ok   tiny: optimum == optimum-noname" not in out or \
                "FAIL tiny: optimum == optimum-extdata" not in out:
            fails.append(f"check.py --cross with styles missing: exit {p.returncode}\n{out[-800:]}{p.stderr[-300:]}")
    return report("strict checkers", fails)


if __name__ == "__main__":
    sys.exit(main())
