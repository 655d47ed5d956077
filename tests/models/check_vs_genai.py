"""bench/vs_genai on a fixture: both runtimes' figures come back (snug
generate's figures line, the onnxruntime-genai worker's JSON), with the same
prompt token count and GEN generated tokens; on genai-q41, where both round
alike (check_genai_parity.py's exact rule), the same greedy text; with one
round the per-round ratios (paired_ratio) equal the ratios of the medians;
the table prints its per-round line and the RSS baseline; a prompt that ends
at EOS before GEN tokens and a bad --gen are errors. One round, 8 tokens:
checks the plumbing, not the speed.

    tests/models/py.sh tests/models/check_vs_genai.py --snug build/snug
"""
import json
import os
import subprocess
import sys

from bench_checks import ROOT, fixture_args, report


def main() -> int:
    a, _ = fixture_args(__doc__, "smollm2-135m/genai-q41")
    d = os.path.join(a.models, a.fixture)
    base = [sys.executable, os.path.join(ROOT, "bench", "vs_genai"), "--model-dir", d, "--snug", a.snug,
            "--rounds", "1", "--gen", "8"]
    fails = []
    p = subprocess.run(base + ["--json"], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        print(f"FAIL vs_genai --json: exit {p.returncode}\n{p.stderr}")
        return 1
    r = json.loads(p.stdout)
    for side in ("snug", "genai"):
        x = r[side]
        bad = [k for k in ("prompt_tok_s", "ttft_ms", "decode_tok_s", "e2e_tok_s", "peak_rss_bytes", "wall_s")
               if not x.get(k, 0) > 0]
        if bad:
            fails.append(f"{side}: figures missing or not positive: {bad}")
    if not r.get("prompt_tokens", 0) > 8 or not r.get("onnxruntime_genai"):
        fails.append(f"prompt_tokens {r.get('prompt_tokens')}, onnxruntime_genai {r.get('onnxruntime_genai')}")
    if not r.get("same_text") or not r["snug"].get("text"):
        fails.append(f"greedy text: snug {r['snug'].get('text')!r}, ORT-genai {r['genai'].get('text')!r}")
    g = r["genai"]
    if not 0 < g.get("rss_after_import_bytes", 0) < g["peak_rss_bytes"]:
        fails.append(f"ORT-genai's RSS baseline {g.get('rss_after_import_bytes')} against its peak {g['peak_rss_bytes']}")
    for k in ("prompt_tok_s", "decode_tok_s", "e2e_tok_s"):
        pr = r.get("paired_ratio", {}).get(k, {})
        if not pr or abs(pr["median"] - r["ratio"][k]) > 1e-9 * abs(r["ratio"][k]) or pr["min"] != pr["max"]:
            fails.append(f"paired_ratio {k}: {pr} against the ratio of medians {r['ratio'][k]}")
    # snug's end to end adds its prefill (82 tokens, longer than a decode step) to its decode time
    s = r["snug"]
    if not s["e2e_tok_s"] < s["decode_tok_s"]:
        fails.append(f"snug e2e {s['e2e_tok_s']} not below its decode rate {s['decode_tok_s']}")
    p = subprocess.run(base, capture_output=True, text=True, timeout=600)
    for want in ("snug/ORT-genai within each round", "round 1/1:", "e2e gen tok/s", "before the model",
                 "greedy text: same"):
        if want not in p.stdout:
            fails.append(f"table: no {want!r} (exit {p.returncode})\n{p.stdout[-800:]}{p.stderr[-300:]}")
    p = subprocess.run(base[:-1] + ["32", "--chat", "--prompt", "What is the capital of France? Answer in one sentence."],
                       capture_output=True, text=True, timeout=600)
    if p.returncode == 0 or "pick a --prompt that does not end sooner" not in p.stderr:
        fails.append(f"a prompt ending at EOS: exit {p.returncode}, {p.stderr.strip()[-300:]}")
    p = subprocess.run(base[:-1] + ["0"], capture_output=True, text=True)
    if p.returncode != 2 or "--gen must be at least 1" not in p.stderr:
        fails.append(f"--gen 0: exit {p.returncode}, {p.stderr.strip()[-200:]}")
    return report(f"vs_genai: {r['prompt_tokens']} prompt tokens, {r['gen']} generated", fails)


if __name__ == "__main__":
    sys.exit(main())
