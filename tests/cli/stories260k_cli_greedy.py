"""Drives stories260K token by token through the `snug run` CLI, feeding
present.* back as past_key_values.* via the .pb files --output-dir writes, and
checks the 60 greedy ids against ../shared/fixtures/stories260K/greedy_ids.txt.

usage: python stories260k_cli_greedy.py SNUG_BINARY  (from the repository root)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

FIX = "../shared/fixtures/stories260K"


def main():
    snug = sys.argv[1]
    model = f"{FIX}/stories260K_kv.onnx"
    lines = dict(l.split(" ", 1) for l in open(f"{FIX}/greedy_ids.txt").read().strip().splitlines())
    prompt = [int(x) for x in lines["PROMPT"].split()]
    gold = [int(x) for x in lines["GEN"].split()]
    got = []
    with tempfile.TemporaryDirectory() as tmp:
        feed, past = prompt, None
        for step in range(len(gold)):
            ids = os.path.join(tmp, "ids.npy")
            np.save(ids, np.array([feed], dtype=np.int64))
            out = os.path.join(tmp, f"out{step}")
            cmd = [snug, "run", model, "--input", f"input_ids={ids}", "--output-dir", out]
            if past is None:
                cmd += ["--dim", "past_sequence_length=0"]
            else:
                for l in range(5):
                    cmd += ["--input", f"past_key_values.{l}.key={past}/output_{1 + 2 * l}.pb",
                            "--input", f"past_key_values.{l}.value={past}/output_{2 + 2 * l}.pb"]
            subprocess.run(cmd, check=True, capture_output=True)
            logits = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb")))
            tok = int(np.argmax(logits[0, -1]))
            got.append(tok)
            feed, past = [tok], out
    ok = got == gold
    print(f"snug run, token by token: {sum(a == b for a, b in zip(got, gold))} of {len(gold)} greedy ids match")
    if not ok:
        print("got ", got)
        print("want", gold)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
