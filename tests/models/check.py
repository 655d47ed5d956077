#!/usr/bin/env python3
"""Check the built fixtures: each is up to date, ONNX Runtime loads it, and re-running
it (teacher-forced on the stored greedy tokens) reproduces its oracle logits. Also:
styles that hold the same weights agree with each other, and the `tokenizers` package
still gives the stored ids for the corpus.

    check.py                          # the CI set
    check.py --preset tiny --styles genai
    check.py --fixture smollm2-135m/genai

Prints one line per check and 'N passed, N failed'; exits 1 on any failure."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import build  # noqa: E402
from snugmodels import config as C  # noqa: E402
from snugmodels import oracle  # noqa: E402

# Styles that hold identical fp32 weights and math: their oracles must agree closely.
SAME_MATH = [("optimum", "optimum-noname", 1e-5), ("optimum", "optimum-extdata", 1e-5),
             ("optimum", "onnxscript", 1e-4), ("optimum", "genai-fp32", 1e-3),
             ("optimum", "genai-q41", 2e-2)]


class Results:
    def __init__(self):
        self.passed = self.failed = 0

    def report(self, name: str, fails: list[str], note: str = "") -> None:
        if fails:
            self.failed += 1
            print(f"FAIL {name}")
            for f in fails:
                print(f"     {f}")
        else:
            self.passed += 1
            print(f"ok   {name}{'  ' + note if note else ''}", flush=True)


def check_fixture(root: str, preset: str, style: str, stamps: dict, threads: int | None,
                  prompts: int | None) -> list[str]:
    d = os.path.join(root, preset, style)
    if not os.path.isdir(d):
        return [f"{d} missing: run tests/models/fetch_and_build.sh (or build.py --preset {preset})"]
    if stamps is not None and not build.up_to_date(d, stamps[(preset, style)]):
        return [f"{d} is stale (generator or versions changed): rebuild with build.py --preset {preset}"]
    if style == "tokenizer":
        return check_tokenizer(d)
    if prompts is None:  # a cheap re-run: every prompt of small models, the first of big ones
        prompts = 3 if preset == "tiny" else 1
    fails, _ = oracle.check_oracle(d, threads=threads, max_prompts=prompts)
    return fails


def check_tokenizer(d: str) -> list[str]:
    from tokenizers import Tokenizer
    tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "corpus_ids.json"), encoding="utf-8") as f:
        m = json.load(f)
    fails = []
    for i, e in enumerate(m["entries"]):
        ids = tk.encode(e["text"], add_special_tokens=False).ids
        if ids != e["ids"]:
            fails.append(f"corpus entry {i}: ids differ")
        if e["text"] and tk.decode(ids, skip_special_tokens=False) != e["text"]:
            fails.append(f"corpus entry {i}: decode(encode(text)) != text")
    return fails


def check_same_math(root: str, preset: str, a: str, b: str, rtol: float) -> list[str]:
    da, db = os.path.join(root, preset, a), os.path.join(root, preset, b)
    missing = [d for d in (da, db) if not os.path.isfile(os.path.join(d, "oracle", "oracle.json"))]
    if missing:  # a requested pair that cannot be compared fails: a check not made is not a pass
        return [f"{d} (or its oracle) missing: run tests/models/fetch_and_build.sh" for d in missing]
    with open(os.path.join(da, "oracle", "oracle.json")) as f:
        ma = json.load(f)
    with open(os.path.join(db, "oracle", "oracle.json")) as f:
        mb = json.load(f)
    fails = []
    for i, (pa, pb) in enumerate(zip(ma["prompts"], mb["prompts"])):
        if pa["ids"] != pb["ids"]:
            fails.append(f"prompt {i}: different prompt ids")
            continue
        x = np.load(os.path.join(da, pa["prefill_logits"]))
        y = np.load(os.path.join(db, pb["prefill_logits"]))
        err = float(np.max(np.abs(x - y)))
        scale = max(1.0, float(np.max(np.abs(x))))
        if err > rtol * scale:
            fails.append(f"prompt {i} prefill: max |{a} - {b}| = {err:.3g} > {rtol}*{scale:.3g}")
        # decode logits follow each style's own greedy tokens: compare while they agree
        n = next((j for j, (s, t) in enumerate(zip(pa["greedy"], pb["greedy"])) if s != t), len(pa["greedy"]))
        if n < len(pa["greedy"]):
            fails.append(f"prompt {i}: greedy tokens differ from step {n}")
        xd = np.load(os.path.join(da, pa["decode_logits"]))[:n]
        yd = np.load(os.path.join(db, pb["decode_logits"]))[:n]
        if xd.size and float(np.max(np.abs(xd - yd))) > rtol * scale:
            fails.append(f"prompt {i} decode: max |{a} - {b}| = {float(np.max(np.abs(xd - yd))):.3g}")
    return fails


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", action="append", help="ci (default), all, or a preset")
    ap.add_argument("--styles", help="comma-separated (default: the preset's defaults)")
    ap.add_argument("--fixture", action="append", help="PRESET/STYLE (repeatable)")
    ap.add_argument("--cross", action="store_true", help="only the cross-style consistency checks")
    ap.add_argument("--no-stamp", action="store_true", help="do not require fixtures to be up to date")
    ap.add_argument("--threads", type=int, default=None, help="ORT intra-op threads")
    ap.add_argument("--prompts", type=int, default=None,
                    help="oracle prompts to re-run (default: all for tiny, 1 for bigger models)")
    a = ap.parse_args(argv)
    root = build.cache_dir()
    if a.fixture:
        todo = [tuple(f.split("/", 1)) for f in a.fixture]
    else:
        todo = build.plan(a.preset or ["ci"], a.styles.split(",") if a.styles else None)
    stamps = None
    if not a.no_stamp:
        gen = build.generator_hash()
        stamps = {}
        for p, s in todo:
            ident = (("gguf:" + build.file_sha256(os.path.join(root, "src", build.GGUF_NAME)))
                     if p == C.REAL and os.path.exists(os.path.join(root, "src", build.GGUF_NAME))
                     else (C.PRESETS[p].to_json() if p in C.PRESETS else "missing"))
            stamps[(p, s)] = build.stamp_for(gen, ident, s, 4)
    res = Results()
    if not a.cross:
        for p, s in todo:
            t = time.time()
            try:
                fails = check_fixture(root, p, s, stamps, a.threads, a.prompts)
            except Exception as e:  # a load failure is a test failure, with the reason
                fails = [f"{type(e).__name__}: {e}"]
            res.report(f"{p}/{s}", fails, f"({time.time() - t:.1f}s)")
    if a.cross or not a.fixture:
        # the pairs whose two styles are both in the requested set (a pair with a style not
        # requested is not a check asked for, and is named as such)
        for p in sorted({p for p, _ in todo}):
            styles = {s for q, s in todo if q == p}
            for sa, sb, rtol in SAME_MATH:
                if sa in styles and sb in styles:
                    res.report(f"{p}: {sa} == {sb}", check_same_math(root, p, sa, sb, rtol))
                else:
                    print(f"--   {p}: {sa} == {sb}: not requested ({', '.join(sorted({sa, sb} - styles))} "
                          f"not in this set)")
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed or res.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
