"""Hugging Face tokenizer files rebuilt from GGUF metadata."""
from __future__ import annotations

import json

from .config import LlmConfig
from .weights import GgufTokenizer

# tokenizer.ggml.pre -> the pre-tokenizer the original tokenizer.json used
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
_PRE = {
    # GPT-2 regex only
    "default": _BYTE_LEVEL,
    "gpt-2": _BYTE_LEVEL,
    # StarCoder/SmolLM: every digit alone, then the GPT-2 regex
    "smollm": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, _BYTE_LEVEL]},
    "starcoder": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, _BYTE_LEVEL]},
}

CONTROL, USER_DEFINED = 3, 4


def tokenizer_json(tok: GgufTokenizer) -> dict:
    if tok.model != "gpt2":
        raise ValueError(f"tokenizer model {tok.model!r}: only byte-level BPE ('gpt2') is supported")
    if tok.pre not in _PRE:
        raise ValueError(f"pre-tokenizer {tok.pre!r} is not mapped")
    added = []
    for i, (t, ty) in enumerate(zip(tok.tokens, tok.token_types)):
        if ty in (CONTROL, USER_DEFINED):
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": ty == USER_DEFINED, "special": ty == CONTROL})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": _PRE[tok.pre],
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tok.tokens)},
            "merges": list(tok.merges),
        },
    }


def tokenizer_config(tok: GgufTokenizer, cfg: LlmConfig) -> dict:
    def name(i):
        return None if i is None else tok.tokens[i]
    added = {}
    for i, (t, ty) in enumerate(zip(tok.tokens, tok.token_types)):
        if ty in (CONTROL, USER_DEFINED):
            added[str(i)] = {"content": t, "lstrip": False, "normalized": ty == USER_DEFINED,
                             "rstrip": False, "single_word": False, "special": ty == CONTROL}
    out = {
        "add_bos_token": tok.add_bos,
        "add_prefix_space": tok.add_space_prefix,
        "added_tokens_decoder": added,
        "additional_special_tokens": [tok.tokens[i] for i, ty in enumerate(tok.token_types)
                                      if ty == CONTROL and i not in (tok.bos_token_id, tok.eos_token_id,
                                                                     tok.unk_token_id, tok.pad_token_id)],
        "bos_token": name(tok.bos_token_id),
        "eos_token": name(tok.eos_token_id),
        "unk_token": name(tok.unk_token_id),
        "pad_token": name(tok.pad_token_id),
        "clean_up_tokenization_spaces": False,
        "model_max_length": cfg.context,
        "tokenizer_class": "GPT2Tokenizer",
        "vocab_size": len(tok.tokens),
    }
    if tok.chat_template:
        out["chat_template"] = tok.chat_template
    return out


def genai_config(cfg: LlmConfig, filename: str = "model.onnx") -> dict:
    """genai_config.json as onnxruntime-genai's model builder writes it for a llama model."""
    return {
        "model": {
            "bos_token_id": cfg.bos_token_id,
            "context_length": cfg.context,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": filename,
                "head_size": cfg.head_dim,
                "hidden_size": cfg.hidden,
                "inputs": {
                    "input_ids": "input_ids",
                    "attention_mask": "attention_mask",
                    "past_key_names": "past_key_values.%d.key",
                    "past_value_names": "past_key_values.%d.value",
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value",
                },
                "num_attention_heads": cfg.heads,
                "num_hidden_layers": cfg.layers,
                "num_key_value_heads": cfg.kv_heads,
            },
            "eos_token_id": cfg.eos_token_id,
            "pad_token_id": cfg.pad_token_id,
            "type": "llama",
            "vocab_size": cfg.vocab,
        },
        "search": {
            "diversity_penalty": 0.0, "do_sample": False, "early_stopping": True, "length_penalty": 1.0,
            "max_length": cfg.context, "min_length": 0, "no_repeat_ngram_size": 0, "num_beams": 1,
            "num_return_sequences": 1, "past_present_share_buffer": True, "repetition_penalty": 1.0,
            "temperature": 1.0, "top_k": 1, "top_p": 1.0,
        },
    }


def write_json(path: str, obj) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


# ------------------------------------------------------ synthetic models' tokenizer

SYNTH_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
                   "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
                   "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def _byte_symbols() -> list[str]:
    """The 256 printable stand-ins byte-level BPE uses for bytes (GPT-2's table)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def synthetic_tokenizer(vocab_size: int, texts: list[str], pad_token_id: int = 0) -> tuple[dict, "GgufTokenizer"]:
    """A byte-level BPE tokenizer for random-weight models: 3 ChatML specials, the 256
    byte symbols, then merges learned deterministically from `texts` (most frequent
    pair first, ties by the pair's text) until vocab_size or no pair repeats.
    Returns (tokenizer.json, the token table)."""
    from tokenizers import pre_tokenizers

    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    words: dict[tuple[str, ...], int] = {}
    for t in texts:
        for piece, _ in pre.pre_tokenize_str(t):
            key = tuple(piece)
            words[key] = words.get(key, 0) + 1
    vocab = {s: i for i, s in enumerate(SYNTH_SPECIALS)}
    for s in _byte_symbols():
        vocab[s] = len(vocab)
    merges = []
    while len(vocab) < vocab_size:
        pairs: dict[tuple[str, str], int] = {}
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < 2:
            break
        merged = best[0] + best[1]
        merges.append(f"{best[0]} {best[1]}")
        vocab.setdefault(merged, len(vocab))
        new_words = {}
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + n
        words = new_words
    tok = GgufTokenizer(model="gpt2", pre="default", tokens=list(vocab), token_types=[3] * 3 + [1] * (len(vocab) - 3),
                        merges=merges, bos_token_id=1, eos_token_id=2, unk_token_id=0,
                        pad_token_id=pad_token_id if pad_token_id < 3 else 0,
                        add_bos=False, add_space_prefix=False, chat_template=CHATML_TEMPLATE)
    return tokenizer_json(tok), tok
