"""snug generate on the SmolLM2 fixtures against their ONNX Runtime oracles:

- chat: the oracle's conversation (tokenizer_config.json's template rendered by
  jinja2, ORT greedy until EOS) and `snug generate DIR -p QUESTION --temp 0` give
  the same text, and snug stops on EOS;
- raw text: for each oracle prompt with a text, `--no-chat -n 17 --temp 0` gives
  the text of the oracle's 17 greedy ids (the tokenizer adds no BOS here, as the
  oracle's add_special_tokens=False), on the float fixtures (an int8-activation
  one is held to accuracy instead, docs/accuracy.md: its free-running greedy
  text parts from ORT's at the first near tie);
- a chat over stdin keeps the conversation in the KV cache: the second turn
  prefills fewer tokens than its prompt has; one that outgrows --ctx starts
  over from its newest message and says so;
- errors: no such folder, a prompt longer than --ctx, a bad option;
- snug bench --slots --ops (text and JSON): the time per operator type of a
  batched step and of one sequence's, parts of each step's time.

    tests/models/py.sh tests/models/check_generate.py --snug build/snug
"""
import json
import os
import re
import subprocess
import sys

from bench_checks import fixture_args, report

# genai-sym is not here: its chat answer parts from the oracle's at a near tie of the int8
# rounding (" cuisine" for " culture": float64 prefers the oracle's by 0.43, snug's decode its
# own by 0.12), so an exact text would test ORT's rounding; models.snug holds it to accuracy.
FIXTURES = ("smollm2-135m/genai", "smollm2-135m/genai-q41", "smollm2-135m/optimum")
FIGURES = re.compile(r"\[prompt (\d+) tokens \((\d+) prefilled\).*stop: ([a-z ]+)\]")


def run(cmd, stdin=None):
    return subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=600)


def main() -> int:
    a, _ = fixture_args(__doc__, FIXTURES[0])
    from tokenizers import Tokenizer
    fails, checked = [], 0
    for fx in FIXTURES:
        d = os.path.join(a.models, fx)
        with open(os.path.join(d, "oracle", "oracle.json")) as f:
            man = json.load(f)
        tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        chat = man["chat"]
        question = chat["messages"][-1]["content"]
        p = run([a.snug, "generate", d, "-p", question, "--temp", "0", "-n", str(chat["max_new_tokens"]),
                 "--threads", "2"])
        m = FIGURES.search(p.stderr)
        if p.returncode != 0 or p.stdout.rstrip("\n") != chat["greedy_text"] or not m or \
                int(m.group(1)) != len(chat["ids"]):
            fails.append(f"{fx} chat: exit {p.returncode}, {p.stdout!r} against the oracle's {chat['greedy_text']!r}"
                         f" ({m.group(1) if m else '?'} prompt tokens, the oracle's {len(chat['ids'])})\n{p.stderr[-300:]}")
        elif chat.get("eos") in chat["greedy"] and m.group(3) != "eos":
            fails.append(f"{fx} chat: stopped on {m.group(3)}, the oracle on EOS")
        checked += 1
        for e in man["prompts"]:
            # int8-activation fixtures are held to accuracy, not to ORT's rounding (docs/accuracy.md):
            # free-running greedy text parts from ORT's at its first near tie
            if "text" not in e or "accuracy" in man:
                continue
            want = tk.decode(e["greedy"], skip_special_tokens=True)
            p = run([a.snug, "generate", d, "--no-chat", "-p", e["text"], "--temp", "0", "-n", str(len(e["greedy"])),
                     "--threads", "2", "-q"])
            if p.returncode != 0 or p.stdout[:-1] != want:
                fails.append(f"{fx} raw {e['text']!r}: {p.stdout!r} against the oracle's {want!r}\n{p.stderr[-300:]}")
            checked += 1
    d = os.path.join(a.models, FIXTURES[0])
    # prompt chunks: a token alone in a step is a decode row, which attention rounds otherwise (as
    # ONNX Runtime does), so no --batch leaves a prompt's last token alone and every --batch gives
    # the answer of one chunk. --batch n - 1 left the last token alone before that was so, and
    # changed the spider's answer at its 24th token (a near tie between "," and EOS)
    for question in ("What is the capital of France? Answer in one sentence.", "How many legs does a spider have?"):
        p = run([a.snug, "generate", d, "-p", question, "--temp", "0", "-n", "40", "--threads", "2"])
        m = FIGURES.search(p.stderr)
        n = int(m.group(1)) if p.returncode == 0 and m else 0
        answers = {512: p.stdout}
        for b in (n - 1, n - 2, 3, 2):
            p = run([a.snug, "generate", d, "-p", question, "--temp", "0", "-n", "40", "--batch", str(b),
                     "--threads", "2", "-q"])
            answers[b] = p.stdout if p.returncode == 0 else f"exit {p.returncode}: {p.stderr[-200:]}"
        if n < 4 or len(set(answers.values())) != 1:
            fails.append(f"{FIXTURES[0]} {question!r}: the answer depends on --batch ({n} prompt tokens): {answers}")
        checked += 1
    p = run([a.snug, "generate", d, "--temp", "0", "-n", "24", "--threads", "2"],
            stdin="What is the capital of France? Answer in one sentence.\nAnd of Italy?\n/bye\n")
    turns = FIGURES.findall(p.stderr)
    if p.returncode != 0 or len(turns) != 2 or not int(turns[1][1]) < int(turns[1][0]):
        fails.append(f"chat over stdin: exit {p.returncode}, turns {turns}\n{p.stdout[-300:]}{p.stderr[-300:]}")
    checked += 1
    # a conversation that outgrows --ctx starts over from the new message, and says so (the third
    # message is long enough that it cannot join the first two turns in 100 tokens however short
    # their answers are, and fits alone)
    p = run([a.snug, "generate", d, "--temp", "0", "-n", "30", "--ctx", "100", "--threads", "2"],
            stdin="Tell me a story.\nMore.\nMore please, and this time make it about a lighthouse keeper who "
                  "finds a message in a bottle on a stormy night.\n")
    turns = FIGURES.findall(p.stderr)
    if p.returncode != 0 or len(turns) != 3 or "no longer fit the context" not in p.stderr or \
            int(turns[2][1]) != int(turns[2][0]):
        fails.append(f"chat beyond --ctx: exit {p.returncode}, turns {turns}\n{p.stderr[-400:]}")
    checked += 1
    # a model whose vocabulary is larger than its tokenizer's (tiny: 1024 ids, 532 tokens; real
    # models pad theirs, as Phi-3 and Qwen2 do): ids without a token give no text, not an error
    p = run([a.snug, "generate", os.path.join(a.models, "tiny/genai"), "--no-chat", "-p", "hello world", "-n", "20",
             "--temp", "0", "--threads", "2"])
    m = FIGURES.search(p.stderr)
    if p.returncode != 0 or not m or m.group(3) != "length":
        fails.append(f"tiny/genai (ids past the tokenizer): exit {p.returncode}\n{p.stderr[-300:]}")
    checked += 1
    # broken folders: a truncated tokenizer.json, a truncated model, a template snug cannot render
    import tempfile
    with tempfile.TemporaryDirectory(prefix="snug-gen-bad-") as tmp:
        def folder(name, **over):
            f = os.path.join(tmp, name)
            os.makedirs(f)
            for part in ("genai_config.json", "tokenizer.json", "tokenizer_config.json", "model.onnx"):
                if part in over:
                    with open(os.path.join(f, part), "wb") as fh:
                        fh.write(over[part])
                else:
                    os.symlink(os.path.join(d, part), os.path.join(f, part))
            return f
        with open(os.path.join(d, "tokenizer.json"), "rb") as fh:
            tok = fh.read()
        with open(os.path.join(d, "model.onnx"), "rb") as fh:
            head = fh.read(100000)
        cases = (
            (folder("tok", **{"tokenizer.json": tok[:5000]}), 1, "truncated?"),
            (folder("mod", **{"model.onnx": head}), 1, "malformed protobuf"),
            (folder("tpl", **{"tokenizer_config.json": b'{"chat_template": "{% frobnicate %}"}'}), 0,
             "unknown tag 'frobnicate'): the prompt goes as raw text"))
        for f, code, msg in cases:
            p = run([a.snug, "generate", f, "-p", "hi", "--temp", "0", "-n", "4", "--threads", "2"])
            if p.returncode != code or msg not in p.stderr:
                fails.append(f"{os.path.basename(f)}: exit {p.returncode} (want {code}), {p.stderr[-300:]!r}")
            checked += 1
    # snug bench --slots --ops: the batched steps' time per operator type, beside one sequence's;
    # the nodes' times are parts of a step's (all nodes together at most the step). No timing is
    # compared with another: the suite runs tests side by side
    p = run([a.snug, "bench", os.path.join(d, "model.onnx"), "--slots", "3", "--prompt", "8", "--gen", "6",
             "--rounds", "1", "--warmup", "0", "--threads", "2", "--ops", "--json"])
    try:
        r = json.loads(p.stdout)
        ops = {o["op"]: o for o in r["ops"]}
        tot1 = sum(o["one_ms_per_step"] for o in r["ops"])
        totn = sum(o["batched_ms_per_step"] for o in r["ops"])
        good = (p.returncode == 0 and r["slots"] == 3 and r["ratio"] > 0 and
                all(ops[o][c] > 0 for o in ("MatMulNBits", "GroupQueryAttention")
                    for c in ("one_ms_per_step", "batched_ms_per_step")) and
                0 < tot1 <= 1.02 * r["one"]["ms_per_step"] and 0 < totn <= 1.02 * r["batched"]["ms_per_step"])
    except (ValueError, KeyError) as e:
        good, r = False, f"{type(e).__name__} {e}"
    if not good:
        fails.append(f"bench --slots --ops --json: exit {p.returncode}, {r}\n{p.stderr[-300:]}")
    checked += 1
    p = run([a.snug, "bench", os.path.join(d, "model.onnx"), "--slots", "2", "--prompt", "4", "--gen", "3",
             "--rounds", "1", "--warmup", "0", "--threads", "2", "--ops"])
    if p.returncode != 0 or not re.search(r"^  MatMulNBits +[0-9.]+ ms +[0-9.]+% +[0-9.]+ ms +[0-9.]+% +[0-9.]+x$",
                                          p.stdout, re.M):
        fails.append(f"bench --slots --ops: exit {p.returncode}\n{p.stdout[-500:]}{p.stderr[-300:]}")
    checked += 1
    p = run([a.snug, "generate", d, "-p", "-"], stdin="  \n")
    if p.returncode != 2 or "the prompt is empty" not in p.stderr:
        fails.append(f"an empty prompt on stdin: exit {p.returncode}, {p.stderr[-200:]!r}")
    checked += 1
    for cmd, code, msg in (
            ([a.snug, "generate", "/no/such/folder", "-p", "hi"], 1, "neither genai_config.json nor config.json"),
            ([a.snug, "generate", d, "-p", "word " * 300, "--ctx", "64"], 1, "leaves no room for an answer"),
            ([a.snug, "generate", d, "--bogus"], 2, "unknown option"),
            ([a.snug, "generate", d, "-p", "hi", "--top-p", "2"], 2, "--top-p wants a number"),
            ([a.snug, "generate", "--help"], 0, "usage: snug generate")):
        p = run(cmd)
        if p.returncode != code or msg not in p.stdout + p.stderr:
            fails.append(f"{' '.join(cmd[1:4])}...: exit {p.returncode} (want {code}), {(p.stdout + p.stderr)[-300:]!r}")
        checked += 1
    return report(f"snug generate: {checked} checks on {len(FIXTURES)} fixtures", fails)


if __name__ == "__main__":
    sys.exit(main())
