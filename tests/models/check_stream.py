"""Weight streaming (docs/streaming.md) on the SmolLM2 fixtures:

- under `--mem host=SIZE` budgets that stream some layers and all of them,
  greedy ids identical to the unconstrained run, for the int4 genai fixture
  (MatMulNBits reading its weights where the slot holds them) and the fp32
  Optimum one (MatMul, which packs resident weights but not streamed ones),
  with two and (where some stay resident) three staging slots; the figures
  line says which layers streamed;
- inside a memory cgroup (tests/helpers/cgroup_run.py, when this machine can
  make one: root and a writable hierarchy) of the budget plus the process's
  own needs (code, graph, tokenizer: 64 MiB), the same ids, no OOM kill and
  the cgroup's peak within the limit;
- a budget below the minimum is an error that says the minimum and its parts
  (activations, KV cache, weights that cannot stream, slots), the minimum plans
  (every layer streamed) and the minimum less one byte does not;
- snug plan --mem --stream reports the residency (streamed values inside
  their slots, the total within the budget) and snug bench --mem the
  streaming figures (bytes per token, the I/O bound).

    tests/models/py.sh tests/models/check_stream.py --snug build/snug
"""
import json
import os
import re
import subprocess
import sys

from bench_checks import fixture_args, report

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
import cgroup_run  # noqa: E402

# each fixture runs at two budgets found from its minimum (the error of a budget too small
# says it): the minimum, where every layer streams, and the minimum plus four slots, where
# some of the earliest stay resident (--ctx 512)
CASES = ("smollm2-135m/genai", "smollm2-135m/optimum")
MINIMUM = re.compile(r"too small: with every one of the (\d+) layers streamed through 2 staging slots, the plan "
                     r"needs at least (\d+) bytes \(activations \d+, KV cache \d+, weights that cannot stream "
                     r"and packed or folded constants \d+, slots (\d+);")
PROMPT = "Write a poem about the sea."
STREAMED = re.compile(r"streamed layers (\d+)-(\d+):")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def ids_of(stderr):
    m = re.search(r"\[ids([\d ]*)\]", stderr)
    return [int(x) for x in m.group(1).split()] if m else None


def main() -> int:
    a, _ = fixture_args(__doc__, CASES[0])
    fails, checked = [], 0
    bench_mem = None
    why = cgroup_run.available()
    if why:
        print(f"check_stream: no cgroup runs ({why})")
    for fx in CASES:
        d = os.path.join(a.models, fx)
        gen = [a.snug, "generate", d, "-p", PROMPT, "--temp", "0", "-n", "24", "--ctx", "512", "--print-ids"]
        free = run(gen)
        ref = ids_of(free.stderr)
        if free.returncode or not ref:
            fails.append(f"{fx}: the unconstrained run: exit {free.returncode}\n{free.stderr[-400:]}")
            continue
        # below the minimum: the error says it, and its parts
        p = run(gen + ["--mem", "host=4M"])
        m = MINIMUM.search(p.stderr)
        checked += 1
        if p.returncode == 0 or not m:
            fails.append(f"{fx} --mem host=4M: want an error naming the minimum, got exit {p.returncode}: "
                         f"{p.stderr[-300:]}")
            continue
        least, slot = int(m.group(2)), int(m.group(3)) // 2
        budgets = (str(least + 4 * slot), str(least))
        bench_mem = bench_mem or budgets[0]
        for k, mem in enumerate(budgets):
            for slots in ("2", "3") if k == 0 else ("2",):  # at the minimum a third slot does not fit
                p = run(gen + ["--mem", "host=" + mem, "--prefetch", slots])
                m = STREAMED.search(p.stderr)
                what = f"{fx} --mem host={mem} --prefetch {slots}"
                checked += 1
                if p.returncode:
                    fails.append(f"{what}: exit {p.returncode}\n{p.stderr[-400:]}")
                elif not m:
                    fails.append(f"{what}: the figures say nothing streamed\n{p.stderr[-300:]}")
                elif k == 1 and slots == "2" and m.group(1) != "0":
                    fails.append(f"{what}: meant to stream every layer, streamed {m.group(1)}-{m.group(2)}")
                elif k == 0 and m.group(1) == "0":
                    fails.append(f"{what}: meant to keep some layers resident, streamed all")
                elif ids_of(p.stderr) != ref:
                    fails.append(f"{what}: ids {ids_of(p.stderr)} differ from the unconstrained run's {ref}")
            if not why:  # under a real limit
                lim = cgroup_run.parse_size(mem) + (64 << 20)
                with open(os.devnull, "w") as dn:
                    err = open("/tmp/check_stream.err", "w+")
                    r = cgroup_run.run(gen + ["--mem", "host=" + mem], lim, stdout=dn, stderr=err, timeout=600)
                    err.seek(0)
                    text = err.read()
                    err.close()
                checked += 1
                what = f"{fx} --mem host={mem} in a cgroup of {lim >> 20} MiB"
                if r["rc"] or r["oom_kills"]:
                    fails.append(f"{what}: exit {r['rc']}, {r['oom_kills']} OOM kill(s)\n{text[-300:]}")
                elif r["peak_bytes"] > lim:
                    fails.append(f"{what}: peak {r['peak_bytes']} over the limit")
                elif ids_of(text) != ref:
                    fails.append(f"{what}: ids differ from the unconstrained run's")
                else:
                    print(f"{what}: peak {r['peak_bytes'] >> 20} MiB, ok")
        p = run(gen + ["--mem", "host=" + str(least - 1)])
        checked += 1
        if p.returncode == 0 or "too small" not in p.stderr:
            fails.append(f"{fx} --mem host={least - 1} (the minimum less one byte): exit {p.returncode}, "
                         f"{p.stderr[-300:]}")
    # snug plan --stream: the residency without running, the same as generate's
    if bench_mem:
        p = run([a.snug, "plan", os.path.join(a.models, CASES[0], "model.onnx"), "--ctx", "512", "--seq", "512",
                 "--last-logits", "--mem", "host=" + bench_mem, "--stream", "--json"])
        checked += 1
        try:
            j = json.loads(p.stdout)
            st, ps = j["stream"], j["plan"]["stream"]
            streamed = [v for v in j["plan"]["values"] if v["storage"] == "streamed"]
            if not (0 <= st["first_layer"] < st["layers"] and ps["n_values"] == len(streamed) > 0 and
                    all(v["layer"] >= st["first_layer"] and v["slot_offset"] + v["size"] <= ps["slot_bytes"]
                        for v in streamed) and j["devices"][0]["total"] <= int(bench_mem)):
                fails.append(f"snug plan --stream --json: inconsistent residency: {st} {ps}")
        except (ValueError, KeyError) as e:
            fails.append(f"snug plan --stream --json ({e}): exit {p.returncode} {p.stderr[-300:]}")
    # snug bench --mem: the streaming figures in --json
    onnx = os.path.join(a.models, CASES[0], "model.onnx")
    p = run([a.snug, "bench", onnx, "--mem", f"host={bench_mem or '60M'}", "--json", "--rounds", "1", "--warmup", "0", "--prompt",
             "16", "--gen", "8"])
    checked += 1
    try:
        st = json.loads(p.stdout)["stream"]
        if not (st["bytes_per_token"] > 0 and st["io_bound_tok_s"] > 0 and st["sweep_bytes"] > 0):
            fails.append(f"snug bench --mem: streaming figures without substance: {st}")
    except (ValueError, KeyError) as e:
        fails.append(f"snug bench --mem host={bench_mem} --json: no stream figures ({e}): exit {p.returncode} "
                     f"{p.stderr[-300:]}")
    print(f"check_stream: {checked} checks")
    return report("check_stream", fails)


if __name__ == "__main__":
    sys.exit(main())
