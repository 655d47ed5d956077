"""snug's tokenizer (src/genai/tokenizer*.c) against the `tokenizers` package.

For each tokenizer under test, every text of tests/models/corpus.json and
--count generated strings (seeded: random characters of many scripts, emoji
sequences, whitespace runs, digits, code, contractions, special-token text)
are encoded by both (add_special_tokens=False; also True on a share of them
where the tokenizer has a TemplateProcessing post-processor), and the ids
must be equal. The ids are then decoded by both, whole and one token at a
time (snug's sn_tokstream against tokenizers' DecodeStream, step by step),
and so are random id sequences (byte tokens that make invalid UTF-8,
special tokens), with and without skip_special_tokens. Any difference fails.

Tokenizers under test:
  smollm2   the SmolLM2 fixture's tokenizer.json (models.build writes it):
            Digits + ByteLevel (GPT-2 regex), ByteLevel decoder.
  llama2    SentencePiece-style BPE trained here with `tokenizers`, in the
            structure of Llama-2's and TinyLlama's tokenizer.json: normalizer
            Sequence[Prepend "▁", Replace " " -> "▁"], no pre-tokenizer, BPE
            with byte_fallback, fuse_unk and unk "<unk>", the 256 <0xXX> byte
            tokens at ids 3-258 after <unk> <s> </s>, decoder Sequence[Replace
            "▁" -> " ", ByteFallback, Fuse, Strip(" ", 1, 0)], post-processor
            TemplateProcessing "<s> $A".
  mistral   the same model as Mistral-7B's and newer Llama-2 conversions have
            it (legacy=False): no normalizer, Metaspace pre-tokenizer
            (prepend_scheme "first", split false), the same decoder.
  metaspace the same model behind NFKC and Metaspace(prepend_scheme "always",
            split true), decoder Sequence[ByteFallback, Metaspace, Fuse]
            (older SentencePiece conversions).
  llama3    byte-level BPE trained here in Llama-3's structure: Split with
            Llama-3's regex (Isolated) + ByteLevel(use_regex=False),
            ignore_merges, <|begin_of_text|> etc. as special added tokens,
            post-processor Sequence[ByteLevel, TemplateProcessing].
  qwen2     the same in Qwen2's structure: NFC, Qwen2's regex (single
            digits), plus added tokens that exercise single_word, lstrip,
            rstrip and normalized.

  bash tests/models/py.sh tests/models/check_tokenizer.py --tok-ids build/tests/models/tok_ids
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.environ.get("SNUG_MODELS", os.path.expanduser("~/.cache/snug/models"))

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")


# ---- generated strings ------------------------------------------------------

# Blocks of long-assigned characters (Unicode <= 13, which every library here
# agrees on): scripts, marks, spaces, symbols, CJK, compatibility forms.
RANGES = [
    (0x20, 0x7e), (0xa0, 0x24f), (0x250, 0x2af), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff),
    (0x530, 0x58f), (0x590, 0x5ff), (0x600, 0x6ff), (0x900, 0x97f), (0x980, 0x9ff), (0xb80, 0xbff),
    (0xe00, 0xe7f), (0x10a0, 0x10ff), (0x1100, 0x11ff), (0x1680, 0x169f), (0x1e00, 0x1eff),
    (0x2000, 0x206f), (0x2070, 0x209f), (0x20a0, 0x20bf), (0x2100, 0x214f), (0x2150, 0x218f),
    (0x2190, 0x21ff), (0x2200, 0x22ff), (0x2460, 0x24ff), (0x2500, 0x257f), (0x3000, 0x303f),
    (0x3040, 0x309f), (0x30a0, 0x30ff), (0x3130, 0x318f), (0x3200, 0x32ff), (0x4e00, 0x9fff),
    (0xac00, 0xd7a3), (0xfb00, 0xfb4f), (0xfe00, 0xfe0f), (0xff00, 0xffef), (0x1d400, 0x1d7ff),
    (0x1f300, 0x1f64f), (0x1f900, 0x1f9ff),
]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\u00a0", "\u3000", "\u2028", "\u180e", "\u2009",
          "\u200b", "\x0b", "\x0c", "\u0085", "        "]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇫🇷", "🤖", "✨", "🧑🏿‍💻", "☕"]
CODE = ["def f(x):\n    return x**2\n", "int main(void) { return 0; }", "for i in range(10): print(i)",
        "x = {'a': [1, 2, 3]}", "if (a && b || !c) { x += 1; }", "SELECT * FROM t WHERE id = 42;",
        "<div class=\"a\">hi</div>", "#include <stdio.h>", "fn main() -> Result<(), Box<dyn Error>>",
        "λx.λy.x", "a_b_c = 0x1F; b = 1e-5; c = 3.14159"]
PIECES = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "'\u017f", "n't", "I'm", "don't", "▁",
          "▁▁", "ﬁ", "ﬀ", "Å", "e\u0301", "\u1100\u1161\u11a8", "①", "²", "Ⅻ", "¼", "٣", "१२३", "ℌ", "Ｈｅｌｌｏ",
          "ｶﾀｶﾅ", "𝐀𝐁𝐂", "\ufffd", "<0x41>", "<0x0A>", "<|", "|>", "<s", "s>", "</", "_", "__init__"]


def assigned(cp: int) -> bool:
    return unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Co")


def outdated_normalization() -> set[str]:
    """Characters that tokenizers normalizes by older Unicode tables than 14
    (the unicode-normalization-alignments crate predates U+32FF SQUARE ERA
    NAME REIWA, Unicode 12.1, and gives U+09FE BENGALI SANDHI MARK, Unicode
    10, no combining class): found by normalizing each alone and beside
    marks of combining class 1, 230 and 240 with both, tokenizers and
    Python's unicodedata. snug follows utf8proc, which is current; these are
    left out of the generated strings, and the check lists them."""
    from tokenizers import normalizers
    nfc, nfkc = normalizers.NFC(), normalizers.NFKC()
    out = set()
    for lo, hi in RANGES:
        for cp in range(lo, hi + 1):
            c = chr(cp)
            if not assigned(cp):
                continue
            for s in (c, c + "\u0334", "\u0334" + c, c + "\u0301", "\u0301" + c, c + "\u0345", "\u0345" + c):
                if (nfc.normalize_str(s) != unicodedata.normalize("NFC", s)
                        or nfkc.normalize_str(s) != unicodedata.normalize("NFKC", s)):
                    out.add(c)
                    break
    return out


EXCLUDED: set[str] = set()


def rand_char(rng: random.Random) -> str:
    while True:
        lo, hi = rng.choice(RANGES)
        cp = rng.randint(lo, hi)
        if assigned(cp) and chr(cp) not in EXCLUDED:
            return chr(cp)


def gen_strings(n: int, seed: int, words: list[str], specials: list[str]) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 8
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if kind == 0 or r < 0.15:
                parts.append("".join(rand_char(rng) for _ in range(rng.randint(1, 8))))
            elif r < 0.35:
                parts.append(rng.choice(words))
            elif r < 0.5:
                parts.append(rng.choice(SPACES))
            elif r < 0.6:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            elif r < 0.67:
                parts.append(rng.choice(EMOJI))
            elif r < 0.74:
                parts.append(rng.choice(CODE))
            elif r < 0.84:
                parts.append(rng.choice(PIECES))
            elif r < 0.94:
                s = rng.choice(specials)
                parts.append(s if rng.random() < 0.8 else s[: rng.randint(1, len(s))])
            else:
                parts.append(rng.choice(SPACES) * rng.randint(1, 5))
        sep = "" if kind in (1, 5) else rng.choice(["", " ", " ", "\n"])
        out.append(sep.join(parts))
    out += ["", " ", "  ", "\n", "a", "▁", " ▁ ", "\u180e", "'s", "\t\t", "\r\n\r\n", "0", "00000000000000000000"]
    return out


# ---- tokenizers trained here ------------------------------------------------

def training_text(corpus: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    text = list(corpus) * 20
    for _ in range(3000):
        text.append(" ".join(rng.choice(corpus).split()[: rng.randint(1, 12)]))
        text.append("".join(rand_char(rng) for _ in range(rng.randint(1, 20))))
    return text


def sp_family(corpus: list[str], tmp: str) -> dict[str, str]:
    """The SentencePiece-style tokenizers (llama2, mistral, metaspace): one
    BPE trained with a Metaspace pre-tokenizer, rewritten into each
    structure, the byte tokens inserted as Llama-2's vocabulary has them."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120,
                                  show_progress=False)
    tok.train_from_iterator(training_text(corpus, 1), trainer)
    d = json.loads(tok.to_str())
    old = sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {}
    for k, _ in old[:3]:
        vocab[k] = len(vocab)
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for k, _ in old[3:]:
        if k not in vocab:
            vocab[k] = len(vocab)
    m = d["model"]
    m.update(vocab=vocab, byte_fallback=True, fuse_unk=True, unk_token="<unk>", dropout=None)
    # Llama-2 writes its merges as "a b" strings; the trained ones are pairs
    m["merges"] = [" ".join(p) if isinstance(p, list) else p for p in m["merges"]]
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    d["added_tokens"] = added
    bos = {"type": "TemplateProcessing",
           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    sp_dec = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    out = {}
    llama2 = dict(d, normalizer={"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        pre_tokenizer=None, post_processor=bos, decoder=sp_dec)
    # a normalized added token: matched on the normalized text
    llama2["added_tokens"] = added + [{"id": 0, "content": "<extra>", "single_word": False, "lstrip": False,
                                       "rstrip": False, "normalized": True, "special": False}]
    out["llama2"] = llama2
    out["mistral"] = dict(d, normalizer=None, post_processor=bos, decoder=sp_dec, pre_tokenizer={
        "type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False})
    out["metaspace"] = dict(d, normalizer={"type": "NFKC"}, post_processor=None, pre_tokenizer={
        "type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}, decoder={
        "type": "Sequence", "decoders": [{"type": "ByteFallback"}, {
            "type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}, {"type": "Fuse"}]})
    paths = {}
    for name, j in out.items():
        p = os.path.join(tmp, f"{name}.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)
        Tokenizer.from_file(p)  # tokenizers must accept it as written
        paths[name] = p
    return paths


def bytelevel_family(corpus: list[str], tmp: str) -> dict[str, str]:
    """llama3 and qwen2: byte-level BPE trained behind each one's Split regex."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    paths = {}
    for name, rx, seed in (("llama3", LLAMA3_RE, 2), ("qwen2", QWEN2_RE, 3)):
        specials = (["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                     "<|eot_id|>"] if name == "llama3" else ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
        tok = Tokenizer(models.BPE(ignore_merges=name == "llama3"))
        if name == "qwen2":
            tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(rx), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        trainer = trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        tok.train_from_iterator(training_text(corpus, seed), trainer)
        d = json.loads(tok.to_str())
        n = len(d["model"]["vocab"])
        d["added_tokens"] = [{"id": n + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for i, c in enumerate(specials)]
        d["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
        bl = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
        if name == "llama3":
            d["post_processor"] = {"type": "Sequence", "processors": [bl, {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [n],
                                                         "tokens": ["<|begin_of_text|>"]}}}]}
        else:
            d["post_processor"] = bl
            k = n + len(specials)
            # the flags Llama-2/Qwen-style files rarely set, so that they are checked somewhere
            d["added_tokens"] += [
                {"id": k, "content": "<tool>", "single_word": False, "lstrip": True, "rstrip": True,
                 "normalized": False, "special": False},
                {"id": k + 1, "content": "word", "single_word": True, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": False},
                {"id": k + 2, "content": "Å", "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": True, "special": False}]
        p = os.path.join(tmp, f"{name}.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(d, f, ensure_ascii=False)
        Tokenizer.from_file(p)
        paths[name] = p
    return paths


# ---- comparing ----------------------------------------------------------------

def run_snug(tok_ids: str, path: str, requests: list[str]) -> list[str]:
    r = subprocess.run([tok_ids, path], input="".join(q + "\n" for q in requests).encode(), capture_output=True,
                       timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"tok_ids {path} exited {r.returncode}: {r.stderr.decode(errors='replace')}")
    lines = r.stdout.decode().split("\n")
    if len(lines) != len(requests) + 1:
        raise SystemExit(f"tok_ids answered {len(lines) - 1} lines to {len(requests)} requests")
    return lines[:-1]


def unhex(s: str) -> str:
    assert s.startswith("x"), s
    return bytes.fromhex(s[1:]).decode("utf-8")


def hf_stream(tk, ids: list[int]) -> list[str | None]:
    """DecodeStream's answer to each id; "ERR" where it raised (InvalidPrefix:
    the window no longer decodes to what it returned), and it stops there."""
    from tokenizers.decoders import DecodeStream
    ds = DecodeStream(skip_special_tokens=False)
    out: list[str | None] = []
    for i in ids:
        try:
            out.append(ds.step(tk, i))
        except Exception:  # noqa: BLE001 - the Rust error surfaces as a bare Exception
            out.append("ERR")
            break
    return out


def snug_stream(fields: list[str], n: int) -> tuple[list[str | None], str | None]:
    """tok_ids' stream answers: one per id (or up to an error), and the flush."""
    out: list[str | None] = []
    for x in fields[:n]:
        if x == "ERR":
            out.append("ERR")
            return out, None
        out.append(None if x == "-" else unhex(x))
    flush = fields[n] if len(fields) > n else None
    return out, (None if flush in (None, "-") else unhex(flush))


def check_one(name: str, path: str, texts: list[str], tok_ids: str, seed: int, max_show: int) -> tuple[int, list[str]]:
    from tokenizers import Tokenizer
    tk = Tokenizer.from_file(path)
    d = json.load(open(path, encoding="utf-8"))
    has_tmpl = "TemplateProcessing" in json.dumps(d.get("post_processor"))
    problems: list[str] = []

    def bad(msg: str) -> None:
        problems.append(msg)

    # encode: all texts without special tokens, a share with them
    special_idx = list(range(0, len(texts), 7)) if has_tmpl else []
    reqs = ["E " + t.encode().hex() for t in texts] + ["S " + texts[i].encode().hex() for i in special_idx]
    got = run_snug(tok_ids, path, reqs)
    want = [e.ids for e in tk.encode_batch(texts, add_special_tokens=False)]
    want += [e.ids for e in tk.encode_batch([texts[i] for i in special_idx], add_special_tokens=True)]
    all_texts = texts + [texts[i] for i in special_idx]
    n_ids = 0
    for i, (g, w) in enumerate(zip(got, want)):
        gi = None if g.startswith("ERR") else [int(x) for x in g.split()]
        n_ids += len(w)
        if gi != w:
            mode = "add_special_tokens=True" if i >= len(texts) else "add_special_tokens=False"
            bad(f"encode {all_texts[i]!r} ({mode}):\n    tokenizers {w}\n    snug       {g}")

    # decode: the encodings, then random id sequences
    rng = random.Random(seed)
    vocab = tk.get_vocab_size()
    byte_ids = [i for i in (tk.token_to_id(f"<0x{b:02X}>") for b in range(256)) if i is not None]
    added = [a["id"] for a in d.get("added_tokens", [])]
    seqs = [w for w in want[: len(texts)]]
    for _ in range(2000):
        seq = []
        for _ in range(rng.randint(1, 16)):
            r = rng.random()
            if r < 0.3 and byte_ids:
                seq.append(rng.choice(byte_ids))
            elif r < 0.4 and added:
                seq.append(tk.token_to_id(rng.choice(d["added_tokens"])["content"]))
            elif r < 0.55:
                seq.append(rng.randrange(min(vocab, 300)))  # byte-level single bytes, byte tokens
            else:
                seq.append(rng.randrange(vocab))
        seqs.append(seq)
    reqs = ["D " + " ".join(map(str, s)) for s in seqs] + ["K " + " ".join(map(str, s)) for s in seqs]
    got = run_snug(tok_ids, path, reqs)
    n_steps = 0
    for i, s in enumerate(seqs):
        f = got[i].split(" ")
        whole = tk.decode(s, skip_special_tokens=False)
        if f[0].startswith("ERR") or unhex(f[0]) != whole:
            bad(f"decode {s}:\n    tokenizers {whole!r}\n    snug       {got[i][:300]!r}")
            continue
        steps = hf_stream(tk, s)
        n_steps += len(steps)
        mine, flush = snug_stream(f[1:], len(s))
        if mine != steps:
            bad(f"stream {s}:\n    tokenizers {steps}\n    snug       {mine}")
        elif i < len(texts) and "".join(x or "" for x in mine) + (flush or "") != whole:
            # the stream's text and its flush make the whole text (for the
            # encodings; an invalid <0xXX> run decodes differently in pieces)
            bad(f"stream {s}: steps {mine} and flush {flush!r} do not add up to {whole!r}")
        k = got[len(seqs) + i]
        skipped = tk.decode(s, skip_special_tokens=True)
        if k.startswith("ERR") or unhex(k) != skipped:
            bad(f"decode {s} skip_special_tokens=True:\n    tokenizers {skipped!r}\n    snug       {k[:300]!r}")
    print(f"{name}: {len(texts)} strings ({len(special_idx)} also with special tokens, {n_ids} ids), "
          f"{len(seqs)} id sequences decoded ({n_steps} stream steps): {len(problems)} differences")
    for p in problems[:max_show]:
        print("  " + p)
    return len(texts), problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tok-ids", required=True, help="the tok_ids helper (build/tests/models/tok_ids)")
    ap.add_argument("--count", type=int, default=10000, help="generated strings per tokenizer")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--only", action="append", help="check only these tokenizers")
    ap.add_argument("--show", type=int, default=5, help="differences printed per tokenizer")
    args = ap.parse_args()
    import tokenizers
    print(f"tokenizers {tokenizers.__version__}")
    with open(os.path.join(HERE, "corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    smol = os.path.join(MODELS, "smollm2-135m", "tokenizer", "tokenizer.json")
    if not os.path.exists(smol):
        print(f"missing {smol}: run bash tests/models/fetch_and_build.sh --preset ci (models.build)")
        return 1
    words = sorted({w for t in corpus for w in t.split()})
    EXCLUDED.update(outdated_normalization())
    print(f"left out of the generated strings, where tokenizers' normalization tables are older than Unicode 14: "
          f"{' '.join(f'U+{ord(c):04X}' for c in sorted(EXCLUDED)) or 'none'}")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="snug-tok-") as tmp:
        paths = {"smollm2": smol}
        paths.update(sp_family(corpus, tmp))
        paths.update(bytelevel_family(corpus, tmp))
        specials = sorted({a["content"] for p in paths.values()
                           for a in json.load(open(p, encoding="utf-8")).get("added_tokens", [])})
        texts = list(corpus) + gen_strings(args.count, args.seed, words, specials)
        for name, p in paths.items():
            if args.only and name not in args.only:
                continue
            _, problems = check_one(name, p, texts, args.tok_ids, args.seed, args.show)
            failed += bool(problems)
    print("FAILED" if failed else "all tokenizers agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
