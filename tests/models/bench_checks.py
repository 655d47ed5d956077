"""What the checks of the bench/ scripts and tools (check_vs_ort_nodes.py,
check_ab_builds.py, check_mnb_cache.py, check_oracle_f64.py) share: their
command line and the fixture they run."""
import argparse
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fixture_args(doc: str, fixture: str = "tiny/genai"):
    """Parses --snug (required), --models, --fixture (default: fixture);
    returns the arguments and the fixture's model.onnx."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--snug", required=True)
    ap.add_argument("--models", default=os.environ.get("SNUG_MODELS", os.path.expanduser("~/.cache/snug/models")))
    ap.add_argument("--fixture", default=fixture)
    a = ap.parse_args()
    return a, os.path.join(a.models, a.fixture, "model.onnx")


def report(what: str, fails: list) -> int:
    """Prints each failure and a last line 'WHAT: ok' or 'WHAT: FAILED'; the exit status."""
    for f in fails:
        print("FAIL", f)
    print(f"{what}: {'ok' if not fails else 'FAILED'}")
    return 1 if fails else 0
