"""snug generate against onnxruntime-genai itself (PyPI onnxruntime-genai 0.18,
tests/requirements-genai.txt) on the SmolLM2 genai-layout folders: greedy text
of the same prompts, 64 new tokens or up to EOS.

Per fixture and prompt, onnxruntime-genai runs the folder as its users run it
(og.Model(dir), og.Tokenizer, apply_chat_template for a chat prompt, encode for
raw text, GeneratorParams do_sample=False, max_length = prompt + 64, 2 intra-op
threads), keeping the logits of every step; snug runs `snug generate DIR -p
TEXT --temp 0 -n 64 --threads 2` (with --no-chat for raw text). Then:

- both prompts have the same token count (the figures line), and the same stop
  reason (EOS or the length);
- the rule, per fixture:
  - exact: the text is identical. Fixtures computed in float in both runtimes
    but for an int8 step where they agree: genai-q41's int4 layers have float
    zero points (float products in both, summed in other orders: logits
    within about 1e-6 relative, far below any top-2 gap met in 64 tokens),
    and only its 8-bit head quantizes activations, where snug and ORT agree
    (docs/accuracy.md).
  - tie: the text is identical, or it parts at a near tie: at the first token
    where snug's text leaves onnxruntime-genai's, onnxruntime-genai's own
    logits put snug's token within TIE of its top-1. For int8-activation
    fixtures (genai: accuracy_level 4 everywhere), where ORT's int8 rounding
    on an AVX-512 VNNI machine is not snug's (which follows ORT's AVX2 path)
    and neither is the reference (docs/accuracy.md: both are within 1.1x of
    each other against float64, RMS logit error 0.22); after the first
    difference the two texts continue from different contexts and are not
    compared. TIE = 0.5 (about twice that RMS error): a step whose top-2 gap
    is wider than that is one where the two runtimes must agree.
  snug prints text, not ids: its token at the parting step is the candidate
  (onnxruntime-genai's 20 most likely there, and the id `tokenizers` gives
  encoding snug's text) whose text continues the common part as snug's does,
  the most likely one; none fitting counts as an infinite margin.

Prints one line per prompt: same, or the step where the texts part, the two
tokens and the margin there.

    tests/models/py.sh tests/models/check_genai_parity.py --snug build/snug
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_checks import report  # noqa: E402

FIXTURES = {"smollm2-135m/genai-q41": "exact", "smollm2-135m/genai": "tie"}
TIE = 0.5
NEW = 64
CHAT = ("What is the capital of France? Answer in one sentence.",
        "Why is the sky blue?",
        "Write a haiku about the sea.",
        "Give me three tips for learning to program.")
RAW = ("The capital of France is",
       "Once upon a time, there was a little girl who",
       "def fibonacci(n):\n",
       "Once upon a time")
FIGURES = re.compile(r"\[prompt (\d+) tokens \((\d+) prefilled\).*generated (\d+) tokens.*stop: ([a-z ]+)\]")


def ensure_genai():
    """Re-executes in the venv with onnxruntime-genai (scripts/venv.sh --genai) if it is not importable here."""
    try:
        import onnxruntime_genai  # noqa: F401
        return
    except ImportError:
        if os.environ.get("SNUG_GENAI_REEXEC"):
            sys.exit("check_genai_parity: onnxruntime_genai not importable even in the --genai venv")
    venv = subprocess.run(["bash", os.path.join(ROOT, "scripts", "venv.sh"), "--genai"], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip()
    py = os.path.join(venv, "bin", "python")
    os.environ["SNUG_GENAI_REEXEC"] = "1"
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


class Genai:
    """One folder opened by onnxruntime-genai, greedy with the logits of every step kept."""

    def __init__(self, d, threads):
        import onnxruntime_genai as og
        self.og = og
        cfg = og.Config(d)
        cfg.overlay(json.dumps({"model": {"decoder": {"session_options": {
            "intra_op_num_threads": threads, "inter_op_num_threads": 1}}}}))
        self.model = og.Model(cfg)
        self.tok = og.Tokenizer(self.model)

    def prompt_ids(self, text, chat):
        if chat:
            text = self.tok.apply_chat_template(json.dumps([{"role": "user", "content": text}]),
                                                add_generation_prompt=True)
        return [int(x) for x in self.tok.encode(text)]

    def greedy(self, ids, new):
        """-> (generated ids without EOS, logits [n, V] per step, stopped on EOS)."""
        import numpy as np
        p = self.og.GeneratorParams(self.model)
        p.set_search_options(do_sample=False, max_length=len(ids) + new)
        g = self.og.Generator(self.model, p)
        g.append_tokens(ids)
        out, logits = [], []
        eos = set(int(x) for x in self.tok.eos_token_ids)
        while not g.is_done():
            logits.append(np.asarray(g.get_logits(), dtype=np.float32).reshape(-1).copy())
            g.generate_next_token()
            out.append(int(g.get_next_tokens()[0]))
        stopped = bool(out) and out[-1] in eos
        if stopped:
            out.pop()
        return out, logits, stopped


def common_tokens(decode, ids, text):
    """The largest k such that the decoded ids[:k] is a prefix of text."""
    k = 0
    while k < len(ids) and text.startswith(decode(ids[:k + 1])):
        k += 1
    return k


def snug_token(decode, tk, prefix, lg, got):
    """The id snug chose after prefix, as far as its text tells: of onnxruntime-genai's 20 most likely
    ids and the one `tokenizers` gives when encoding snug's text, those that continue the decoded
    prefix as snug's text does, the most likely in onnxruntime-genai's logits (snug's greedy pick is
    the argmax of logits within rounding of these). Not the longest: snug's ' Wick' 'in' 'j' 'ack'
    encodes as ' Wick' 'inj' 'ack'. None when no candidate fits."""
    import numpy as np
    cand = [int(t) for t in np.argsort(lg)[-20:]]
    sid = tk.encode(got, add_special_tokens=False).ids
    if len(sid) > len(prefix) and sid[:len(prefix)] == prefix:
        cand.append(sid[len(prefix)])
    fit = [(t, float(lg[t])) for t in set(cand)
           if got.startswith(decode(prefix + [t])) and len(decode(prefix + [t])) > len(decode(prefix))]
    return max(fit, key=lambda f: f[1])[0] if fit else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--snug", required=True)
    ap.add_argument("--models", default=os.environ.get("SNUG_MODELS", os.path.expanduser("~/.cache/snug/models")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="also write the per-prompt results to this file")
    a = ap.parse_args()
    ensure_genai()
    import numpy as np
    import onnxruntime_genai as og
    from tokenizers import Tokenizer
    print(f"onnxruntime-genai {og.__version__}, {NEW} new tokens, {a.threads} threads, tie margin {TIE}")
    fails, rows = [], []
    for fx, rule in FIXTURES.items():
        d = os.path.join(a.models, fx)
        if not os.path.isfile(os.path.join(d, "genai_config.json")):
            fails.append(f"{fx}: no genai_config.json (tests/models/fetch_and_build.sh --preset ci builds it)")
            continue
        try:
            g = Genai(d, a.threads)
        except Exception as e:  # noqa: BLE001 - onnxruntime-genai refusing the folder is the finding
            fails.append(f"{fx}: onnxruntime-genai cannot open the folder: {e}")
            continue
        tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        decode = g.tok.decode
        for chat, texts in ((True, CHAT), (False, RAW)):
            for text in texts:
                what = f"{fx} {'chat' if chat else 'raw'} {text!r}"
                ids = g.prompt_ids(text, chat)
                out, logits, eos = g.greedy(ids, NEW)
                want = decode(out)
                cmd = [a.snug, "generate", d, "-p", text, "--temp", "0", "-n", str(NEW),
                       "--threads", str(a.threads)] + ([] if chat else ["--no-chat"])
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                m = FIGURES.search(p.stderr)
                if p.returncode != 0 or not m or not p.stdout.endswith("\n"):
                    fails.append(f"{what}: snug exit {p.returncode}\n{p.stderr[-400:]}")
                    continue
                got = p.stdout[:-1]
                row = {"fixture": fx, "chat": chat, "prompt": text, "rule": rule, "prompt_tokens": len(ids),
                       "genai_tokens": len(out), "snug_tokens": int(m.group(3)), "genai_eos": eos,
                       "snug_stop": m.group(4), "genai_text": want, "snug_text": got}
                rows.append(row)
                if int(m.group(1)) != len(ids):
                    fails.append(f"{what}: snug's prompt has {m.group(1)} tokens, onnxruntime-genai's {len(ids)}")
                if got == want:
                    row["same"] = True
                    if (m.group(4) == "eos") != eos:
                        fails.append(f"{what}: snug stopped on {m.group(4)}, onnxruntime-genai "
                                     f"{'on EOS' if eos else 'at the length'}")
                    print(f"same     {what}: {len(out)} tokens{' + EOS' if eos else ''}")
                    continue
                row["same"] = False
                k = common_tokens(decode, out, got)
                lg = logits[k] if k < len(logits) else None
                if lg is None:
                    # onnxruntime-genai stopped (EOS) where snug went on, or the reverse
                    margin, gap, top, mine = float("inf"), float("inf"), None, None
                else:
                    top = int(np.argmax(lg))
                    srt = np.sort(lg)
                    gap = float(srt[-1] - srt[-2])
                    mine = snug_token(decode, tk, out[:k], lg, got)
                    margin = float(lg[top] - lg[mine]) if mine is not None else float("inf")
                row.update({"parting_step": k, "genai_token": top, "snug_token": mine, "margin": margin,
                            "top2_gap": gap})
                ok = rule == "tie" and margin <= TIE
                print(f"{'tie' if ok else 'DIFFER':<8} {what}: parts at step {k} of {len(out)}: "
                      f"onnxruntime-genai {top} {decode([top]) if top is not None else 'EOS'!r}, "
                      f"snug {mine} {tk.decode([mine]) if mine is not None else '?'!r}, margin {margin:.3f} "
                      f"(top-2 gap {gap:.3f})\n         genai {want!r}\n         snug  {got!r}")
                if not ok:
                    fails.append(f"{what}: differs at step {k} ({rule} rule, margin {margin:.3f}):\n"
                                 f"  onnxruntime-genai {want!r}\n  snug              {got!r}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    same = sum(r.get("same", False) for r in rows)
    return report(f"snug generate against onnxruntime-genai: {same}/{len(rows)} identical", fails)


if __name__ == "__main__":
    sys.exit(main())
