"""What the checks of the bench/ scripts (check_vs_ort_nodes.py,
check_ab_builds.py) share: their command line and the fixture they run."""
import argparse
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fixture_args(doc: str):
    """Parses --snug (required), --models, --fixture (tiny/genai); returns
    the arguments and the fixture's model.onnx."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--snug", required=True)
    ap.add_argument("--models", default=os.environ.get("SNUG_MODELS", os.path.expanduser("~/.cache/snug/models")))
    ap.add_argument("--fixture", default="tiny/genai")
    a = ap.parse_args()
    return a, os.path.join(a.models, a.fixture, "model.onnx")
