"""ONNX Runtime as the reference: prefill + greedy decode with the KV cache carried."""
from __future__ import annotations

import os

import numpy as np

DECODE_STEPS = 16


def session(model_path: str, threads: int | None = None):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    weights = sum(os.path.getsize(os.path.join(os.path.dirname(model_path), f))
                  for f in os.listdir(os.path.dirname(model_path)) if f.startswith("model.onnx"))
    if weights > (2 << 30):
        # multi-GB fp32 models: pre-packed copies of every MatMul weight would double
        # the memory (the oracle then runs on any 24 GB machine)
        so.add_session_config_entry("session.disable_prepacking", "1")
    if threads:
        so.intra_op_num_threads = threads
    return ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])


class Runner:
    """Drives one causal-LM session (any of the styles), batch 1."""

    def __init__(self, sess):
        self.sess = sess
        self.inputs = {i.name: i for i in sess.get_inputs()}
        self.past_names = sorted((n for n in self.inputs if n.startswith("past_key_values.")),
                                 key=lambda n: (int(n.split(".")[1]), n.endswith("value")))
        shp = self.inputs[self.past_names[0]].shape
        self.kv_heads, self.head_dim = int(shp[1]), int(shp[3])
        self.reset()

    def reset(self):
        self.past = {n: np.zeros((1, self.kv_heads, 0, self.head_dim), np.float32) for n in self.past_names}
        self.length = 0

    def step(self, ids: list[int]) -> np.ndarray:
        """Feed tokens; returns logits [len(ids), vocab] and carries the cache."""
        s = len(ids)
        feeds = {"input_ids": np.array([ids], dtype=np.int64),
                 "attention_mask": np.ones((1, self.length + s), dtype=np.int64)}
        if "position_ids" in self.inputs:
            feeds["position_ids"] = np.arange(self.length, self.length + s, dtype=np.int64)[None, :]
        feeds.update(self.past)
        names = ["logits"] + [n.replace("past_key_values.", "present.") for n in self.past_names]
        outs = self.sess.run(names, feeds)
        for n, v in zip(self.past_names, outs[1:]):
            self.past[n] = v
        self.length += s
        return outs[0][0]

    def greedy(self, prompt: list[int], steps: int, eos: int | None = None,
               forced: list[int] | None = None):
        """Prefill, then `steps` decode steps. Returns (prefill logits [S, V],
        decode logits [n, V], tokens [n + 1]) where tokens[j] is fed at decode step j
        and tokens[-1] is the argmax after the last step. With `forced`, those tokens
        are fed instead of the argmax (teacher forcing, for re-checks)."""
        self.reset()
        pre = self.step(prompt)
        tokens = [int(np.argmax(pre[-1]))] if forced is None else [int(forced[0])]
        dec = []
        for j in range(steps):
            if eos is not None and tokens[-1] == eos:
                break
            lg = self.step([tokens[-1]])[-1]
            dec.append(lg)
            tokens.append(int(np.argmax(lg)) if forced is None else int(forced[j + 1]))
        vocab = pre.shape[-1]
        return pre, (np.stack(dec) if dec else np.zeros((0, vocab), np.float32)), tokens


def synthetic_prompts(vocab: int, seed: int = 7) -> list[list[int]]:
    """Three fixed prompts of random ids: lengths 7, 23 and 1 (a one-token prefill)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(3, vocab, n).tolist() for n in (7, 23, 1)]


REAL_PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little girl who",
    "def fibonacci(n):\n",
]
CHAT_MESSAGES = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
CHAT_MAX_TOKENS = 48


def render_chat(template: str, messages, add_generation_prompt=True) -> str:
    import jinja2
    env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt)


def write_oracle(model_dir: str, prompts: list[dict], chat: dict | None, tol: dict, extra: dict,
                 f64: bool = True) -> dict:
    """Run ORT on model_dir/model.onnx and write model_dir/oracle/: per prompt
    p{i}.prefill.npy (f32 [S, V]), p{i}.decode.npy (f32 [16, V]), ids and greedy
    tokens in oracle.json. f64=False: no float64 reference (reference_f64) even for
    int8 activations."""
    import json

    import onnxruntime as ort

    sess = session(os.path.join(model_dir, "model.onnx"))
    r = Runner(sess)
    out_dir = os.path.join(model_dir, "oracle")
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for i, p in enumerate(prompts):
        pre, dec, toks = r.greedy(p["ids"], DECODE_STEPS)
        np.save(os.path.join(out_dir, f"p{i}.prefill.npy"), pre.astype(np.float32))
        np.save(os.path.join(out_dir, f"p{i}.decode.npy"), dec.astype(np.float32))
        e = dict(p)
        e.update({"prefill_logits": f"oracle/p{i}.prefill.npy", "decode_logits": f"oracle/p{i}.decode.npy",
                  "greedy": toks})
        entries.append(e)
    accuracy = reference_f64(model_dir, entries) if f64 else None
    manifest = {
        "about": "ONNX Runtime reference. For prompt i: prefill(ids) gives prefill_logits [S, V] "
                 "(every position); then decode step j feeds greedy[j] with the KV cache carried and "
                 "gives decode_logits[j]; greedy[j+1] = argmax(decode_logits[j]); greedy[0] = "
                 "argmax(prefill_logits[-1]). Batch 1, attention_mask all ones, position_ids "
                 "past..past+S-1 where the model has that input.",
        "onnxruntime": ort.__version__,
        "decode_steps": DECODE_STEPS,
        "tolerance": tol,
        "prompts": entries,
    }
    if chat is not None:
        _, _, toks = r.greedy(chat["ids"], CHAT_MAX_TOKENS, eos=chat.get("eos"))
        chat = dict(chat)
        chat["greedy"] = toks
        if chat.get("detok"):
            chat["greedy_text"] = chat.pop("detok")(toks)
        manifest["chat"] = chat
    if accuracy is not None:
        manifest["accuracy"] = accuracy
    manifest.update(extra)
    with open(os.path.join(out_dir, "oracle.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
    return manifest


# Top-1 agreement is judged on at least this many positions: 500 for a trained model,
# whose top-1 is mostly clear; a random-weight model's logits are near ties almost
# everywhere, so two equally accurate roundings part on ~3% of positions each way and
# it takes thousands to tell them apart (tiny/genai: 2880 positions split 43 / 41).
ACCURACY_POSITIONS = {"trained": 500, "random": 2000}
ACCURACY_PROMPT_MAX = 480  # + 16 decode steps within the smallest fixture's 512 positions


def accuracy_prompts(vocab: int, prompts: list[list[int]], positions: int, seed: int = 11) -> list[list[int]]:
    """Prompts of random ids that bring an int8-activation fixture's positions (every
    prefill position and decode step, all prompts) to `positions`."""
    rng = np.random.default_rng(seed)
    have = sum(len(p) + DECODE_STEPS for p in prompts)
    out = []
    while have < positions:
        n = min(max(positions - have - DECODE_STEPS, 16), ACCURACY_PROMPT_MAX)
        out.append(rng.integers(3, vocab, n).tolist())
        have += n + DECODE_STEPS
    return out


def reference_f64(model_dir: str, entries: list[dict]) -> dict | None:
    """For a model whose MatMulNBits quantize activations to int8 (accuracy_level 4):
    the float64 reference (snugmodels/ref64.py) along each prompt's teacher-forced path,
    written as oracle/p{i}.{prefill,decode}.f64.npy (stored as float32), and ONNX
    Runtime's error against it per prompt (sums: ref64.error_sums) and in all
    (ref64.summarize). None for other models: their oracle is ONNX Runtime's float32."""
    from snugmodels import ref64
    path = os.path.join(model_dir, "model.onnx")
    if not ref64.int8_activations(path):
        return None
    r = Runner(ref64.Ref64(path))
    total = None
    for i, e in enumerate(entries):
        ort_pre = np.load(os.path.join(model_dir, e["prefill_logits"]))
        ort_dec = np.load(os.path.join(model_dir, e["decode_logits"]))
        pre, dec, _ = r.greedy(e["ids"], len(ort_dec), forced=e["greedy"])
        for key, x in (("prefill", pre), ("decode", dec)):
            np.save(os.path.join(model_dir, "oracle", f"p{i}.{key}.f64.npy"), x.astype(np.float32))
        e["prefill_f64"], e["decode_f64"] = f"oracle/p{i}.prefill.f64.npy", f"oracle/p{i}.decode.f64.npy"
        sums = ref64.add_sums(ref64.error_sums(pre, ort_pre), ref64.error_sums(dec, ort_dec))
        e["ort_vs_f64"] = sums
        total = ref64.add_sums(total, sums)
    return {"about": "MatMulNBits accuracy_level 4 (int8 activations): the reference is the float64 "
                     "evaluation of the same quantized model (tests/models/snugmodels/ref64.py: weights "
                     "dequantized exactly, activations not quantized), prompt i's p{i}.*.f64.npy along the "
                     "same teacher-forced path. A runtime must be at least as accurate as ONNX Runtime "
                     "against it: ort is ONNX Runtime's error (rms and max logit error, mean KL of the "
                     "softmax per position, top-1 agreement over positions), per prompt in ort_vs_f64.",
            "ort": ref64.summarize(total)}


def check_oracle(model_dir: str, threads: int | None = None, max_prompts: int | None = None):
    """Reload model_dir in ORT and re-run the oracle with teacher forcing. Returns a
    list of failures (empty = pass)."""
    import json
    with open(os.path.join(model_dir, "oracle", "oracle.json")) as f:
        m = json.load(f)
    sess = session(os.path.join(model_dir, "model.onnx"), threads)
    r = Runner(sess)
    tol = m["tolerance"]
    fails = []
    stats = []
    for i, p in enumerate(m["prompts"][:max_prompts]):
        ref_pre = np.load(os.path.join(model_dir, p["prefill_logits"]))
        ref_dec = np.load(os.path.join(model_dir, p["decode_logits"]))
        pre, dec, toks = r.greedy(p["ids"], len(ref_dec), forced=p["greedy"])
        for what, got, ref in (("prefill", pre, ref_pre), ("decode", dec, ref_dec)):
            if got.shape != ref.shape:
                fails.append(f"prompt {i} {what}: shape {got.shape} != {ref.shape}")
                continue
            err = float(np.max(np.abs(got - ref))) if got.size else 0.0
            scale = float(np.max(np.abs(ref))) if ref.size else 1.0
            stats.append(err / max(scale, 1.0))
            if err > tol["atol"] + tol["rtol"] * scale:
                fails.append(f"prompt {i} {what}: max |diff| {err:.3g} > {tol['atol']} + {tol['rtol']}*{scale:.3g}")
        mism = [j for j in range(len(ref_dec)) if int(np.argmax(dec[j])) != p["greedy"][j + 1]]
        if int(np.argmax(pre[-1])) != p["greedy"][0]:
            mism.insert(0, -1)
        if len(mism) > tol.get("argmax_mismatches", 0):
            fails.append(f"prompt {i}: greedy argmax differs at steps {mism}")
    return fails, (max(stats) if stats else 0.0)
