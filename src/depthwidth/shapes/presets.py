"""`PRESETS`: named shapes of models people know, one source per row.

Each preset is the `Shape` whose module (`depthwidth.model.Transformer`) has exactly the parameter
count of the real model where the real model fits the conventions of `Shape`; where it does not,
`notes` says what differs and whether the parameter count is affected. `published_params` is set
only where an exact total is public (the size reported by the model's own code or model card),
and tests assert that `count_params(preset.shape).total` reproduces it.

Conventions of the rows:
- GPT-2 / GPT-3: learned positions, tied head, biases everywhere, LayerNorm, GELU, d_ff = 4 d.
- Llama / Mistral / Qwen2 / MobileLLM: RoPE, RMSNorm, SwiGLU, no biases (Qwen2: q/k/v biases).
- GPT-NeoX (Pythia): parallel residual, LayerNorm with bias, biases everywhere, untied head, RoPE.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.serial import Serializable
from depthwidth.shapes.shape import Shape

_NAME = re.compile(r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Preset(Serializable):
    """A named `Shape` with its source.

    Fields:
        name: kebab-case name, e.g. "gpt2-small", "llama-2-7b".
        shape: the architecture.
        source: where the numbers come from (paper table and/or config URL).
        notes: conventions assumed and anything the Shape does not capture.
        published_params: exact published total parameter count, when one exists.
    """

    name: str
    shape: Shape
    source: str
    notes: str = ""
    published_params: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise UserError(f"name={self.name!r} must be kebab case (lowercase letters, digits, '-', '.')")
        if not isinstance(self.shape, Shape):
            raise UserError(f"shape={self.shape!r} must be a Shape")
        if not isinstance(self.source, str) or not self.source.strip():
            raise UserError(f"source={self.source!r} must name where the numbers come from")
        if self.published_params is not None and (
            isinstance(self.published_params, bool)
            or not isinstance(self.published_params, int)
            or self.published_params <= 0
        ):
            raise UserError(f"published_params={self.published_params!r} must be a positive integer or None")


# ---- shape families ------------------------------------------------------------------------
def _gpt2(n_layers: int, d_model: int, n_heads: int, **kw) -> Shape:
    """GPT-2 (Radford et al. 2019; HF GPT2Model): 1024 learned positions, tied head, biases, LayerNorm."""
    base = dict(vocab_size=50257, max_seq_len=1024, ffn="gelu", norm="layernorm", bias="all", pos="learned",
                tie_embeddings=True, norm_eps=1e-5)
    base.update(kw)
    return Shape(n_layers=n_layers, d_model=d_model, n_heads=n_heads, **base)


def _gpt3(n_layers: int, d_model: int, n_heads: int, head_dim: int) -> Shape:
    return _gpt2(n_layers, d_model, n_heads, head_dim=head_dim, d_ff=4 * d_model, max_seq_len=2048)


def _llama(n_layers: int, d_model: int, n_heads: int, *, d_ff: int, n_kv_heads: int | None = None, **kw) -> Shape:
    base = dict(vocab_size=32000, max_seq_len=4096, ffn="swiglu", norm="rmsnorm", bias="none", pos="rope",
                rope_theta=10000.0, tie_embeddings=False, norm_eps=1e-5)
    base.update(kw)
    return Shape(n_layers=n_layers, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, d_ff=d_ff, **base)


def _pythia(n_layers: int, d_model: int, n_heads: int, *, vocab_size: int = 50304) -> Shape:
    return Shape(n_layers=n_layers, d_model=d_model, n_heads=n_heads, vocab_size=vocab_size, d_ff=4 * d_model,
                 ffn="gelu", norm="layernorm", bias="all", pos="rope", rope_theta=10000.0, max_seq_len=2048,
                 parallel_residual=True, tie_embeddings=False, norm_eps=1e-5)


def _nanogpt_char(n_layers: int, d_model: int, n_heads: int, max_seq_len: int) -> Shape:
    return Shape(n_layers=n_layers, d_model=d_model, n_heads=n_heads, vocab_size=65, max_seq_len=max_seq_len,
                 ffn="gelu", norm="layernorm", bias="none", pos="learned", tie_embeddings=True)


_GPT2_SRC = "Radford et al. 2019, 'Language Models are Unsupervised Multitask Learners', Table 2; HF config " \
    "https://huggingface.co/openai-community/{repo}/blob/main/config.json"
_GPT3_SRC = "Brown et al. 2020, 'Language Models are Few-Shot Learners' (arXiv:2005.14165), Table 2.1"
_GPT3_NOTES = ("Table 2.1 gives n_layers, d_model, n_heads, d_head; assumed as in GPT-2 (sec. 2.1 'same model "
               "and architecture as GPT-2'): d_ff = 4 d_model, 2048 learned positions, tied head, biases, "
               "LayerNorm, GELU, vocab 50257. The alternating dense/locally banded sparse attention does not "
               "change parameters or matmul FLOPs per token counted here.")
_LLAMA2_SRC = "Touvron et al. 2023, 'Llama 2' (arXiv:2307.09288), Table 1; HF config " \
    "https://huggingface.co/meta-llama/{repo}/blob/main/config.json"
_PYTHIA_SRC = "Biderman et al. 2023, 'Pythia' (arXiv:2304.01373), Table 1; total parameters from the Models " \
    "table of github.com/EleutherAI/pythia (README); " \
    "HF config https://huggingface.co/EleutherAI/{repo}/blob/main/config.json (vocab_size {vocab})"
_PYTHIA_NOTES = ("GPT-NeoX block: parallel residual, LayerNorm with bias, biases on every Linear, untied head, "
                 "no learned positions. Pythia rotates 25% of each head (rotary_pct=0.25); this model rotates the "
                 "full head, which changes no parameter and no matmul FLOP. The embedding rows are the padded "
                 "size in the released checkpoint (the tokenizer has 50277 tokens).")

_ROWS: list[Preset] = [
    # ---- GPT-2 -----------------------------------------------------------------------------
    Preset(name="gpt2-small", shape=_gpt2(12, 768, 12), source=_GPT2_SRC.format(repo="gpt2"),
           notes="HF GPT2Model parameter count.", published_params=124_439_808),
    Preset(name="gpt2-medium", shape=_gpt2(24, 1024, 16), source=_GPT2_SRC.format(repo="gpt2-medium"),
           notes="HF GPT2Model parameter count.", published_params=354_823_168),
    Preset(name="gpt2-large", shape=_gpt2(36, 1280, 20), source=_GPT2_SRC.format(repo="gpt2-large"),
           notes="HF GPT2Model parameter count.", published_params=774_030_080),
    Preset(name="gpt2-xl", shape=_gpt2(48, 1600, 25), source=_GPT2_SRC.format(repo="gpt2-xl"),
           notes="HF GPT2Model parameter count.", published_params=1_557_611_200),
    Preset(name="gpt2-small-nobias", shape=_gpt2(12, 768, 12, bias="none"),
           source="nanoGPT model.py GPTConfig(bias=False), github.com/karpathy/nanoGPT",
           notes="GPT-2 small without Linear biases and with weight-only LayerNorm (nanoGPT bias=False).",
           published_params=124_337_664),
    # ---- GPT-3 (Brown et al. 2020, Table 2.1) -----------------------------------------------
    Preset(name="gpt3-125m", shape=_gpt3(12, 768, 12, 64), source=_GPT3_SRC, notes=_GPT3_NOTES),
    Preset(name="gpt3-350m", shape=_gpt3(24, 1024, 16, 64), source=_GPT3_SRC, notes=_GPT3_NOTES),
    Preset(name="gpt3-760m", shape=_gpt3(24, 1536, 16, 96), source=_GPT3_SRC, notes=_GPT3_NOTES),
    Preset(name="gpt3-1.3b", shape=_gpt3(24, 2048, 24, 128), source=_GPT3_SRC,
           notes=_GPT3_NOTES + " Taken literally, the table's 24 heads of d_head 128 (attention width 3072, not "
                 "d_model 2048) give 1.52B parameters, not the nominal 1.3B; an attention width of 2048 (e.g. 16 "
                 "heads of 128, as GPT-Neo 1.3B) gives 1.32B. The table is kept as published."),
    Preset(name="gpt3-2.7b", shape=_gpt3(32, 2560, 32, 80), source=_GPT3_SRC, notes=_GPT3_NOTES),
    Preset(name="gpt3-6.7b", shape=_gpt3(32, 4096, 32, 128), source=_GPT3_SRC, notes=_GPT3_NOTES),
    Preset(name="gpt3-13b", shape=_gpt3(40, 5140, 40, 128), source=_GPT3_SRC,
           notes=_GPT3_NOTES + " d_model = 5140 with 40 heads of 128 (5120), as in the table."),
    Preset(name="gpt3-175b", shape=_gpt3(96, 12288, 96, 128), source=_GPT3_SRC, notes=_GPT3_NOTES),
    # ---- Llama family ------------------------------------------------------------------------
    Preset(name="llama-2-7b", shape=_llama(32, 4096, 32, d_ff=11008), source=_LLAMA2_SRC.format(repo="Llama-2-7b-hf"),
           notes="HF LlamaForCausalLM parameter count.", published_params=6_738_415_616),
    Preset(name="llama-2-13b", shape=_llama(40, 5120, 40, d_ff=13824),
           source=_LLAMA2_SRC.format(repo="Llama-2-13b-hf"), notes="HF LlamaForCausalLM parameter count.",
           published_params=13_015_864_320),
    Preset(name="llama-2-70b", shape=_llama(80, 8192, 64, n_kv_heads=8, d_ff=28672),
           source=_LLAMA2_SRC.format(repo="Llama-2-70b-hf"),
           notes="Grouped-query attention with 8 key/value heads; HF LlamaForCausalLM parameter count.",
           published_params=68_976_648_192),
    Preset(name="llama-3-8b", shape=_llama(32, 4096, 32, n_kv_heads=8, d_ff=14336, vocab_size=128256,
                                           max_seq_len=8192, rope_theta=500000.0),
           source="Meta Llama 3 model card; HF config "
                  "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
           notes="HF LlamaForCausalLM parameter count.", published_params=8_030_261_248),
    Preset(name="mistral-7b", shape=_llama(32, 4096, 32, n_kv_heads=8, d_ff=14336, max_seq_len=32768),
           source="Jiang et al. 2023, 'Mistral 7B' (arXiv:2310.06825), Table 1; HF config "
                  "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
           notes="HF MistralForCausalLM parameter count; max_seq_len is the HF config's 32768 (the paper's "
                 "context_len is 8192). The 4096-token sliding window is not modelled: it changes no parameter "
                 "but caps the KV cache and attention span at 4096 tokens.",
           published_params=7_241_732_096),
    Preset(name="qwen2.5-0.5b", shape=_llama(24, 896, 14, n_kv_heads=2, d_ff=4864, vocab_size=151936, bias="qkv",
                                             tie_embeddings=True, max_seq_len=32768, rope_theta=1_000_000.0,
                                             norm_eps=1e-6),
           source="Qwen2.5 technical report (arXiv:2412.15115), Table 1; HF config "
                  "https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json",
           notes="Biases on the q, k, v projections only; tied head.", published_params=494_032_768),
    # ---- Pythia (GPT-NeoX) ---------------------------------------------------------------------
    *[
        Preset(name=name, shape=_pythia(L, d, h, vocab_size=v), source=_PYTHIA_SRC.format(repo=name, vocab=v),
               notes=_PYTHIA_NOTES, published_params=published)
        for name, L, d, h, v, published in (
            ("pythia-14m", 6, 128, 4, 50304, 14_067_712),
            ("pythia-31m", 6, 256, 8, 50304, 30_494_720),
            ("pythia-70m", 6, 512, 8, 50304, 70_426_624),
            ("pythia-160m", 12, 768, 12, 50304, 162_322_944),
            ("pythia-410m", 24, 1024, 16, 50304, 405_334_016),
            ("pythia-1b", 16, 2048, 8, 50304, 1_011_781_632),
            ("pythia-1.4b", 24, 2048, 16, 50304, 1_414_647_808),
            ("pythia-2.8b", 32, 2560, 32, 50304, 2_775_208_960),
            ("pythia-6.9b", 32, 4096, 32, 50432, 6_857_302_016),
            ("pythia-12b", 36, 5120, 40, 50688, 11_846_072_320),
        )
    ],
    # ---- deep-and-thin small models --------------------------------------------------------------
    Preset(name="mobilellm-125m", shape=_llama(30, 576, 9, n_kv_heads=3, d_ff=1536, tie_embeddings=True,
                                               max_seq_len=2048),
           source="Liu et al. 2024, 'MobileLLM' (arXiv:2402.14905); HF config "
                  "https://huggingface.co/facebook/MobileLLM-125M/blob/main/config.json",
           notes="Model card reports 124.6M; shared input/output embedding (share_embedding=true)."),
    Preset(name="mobilellm-350m", shape=_llama(32, 960, 15, n_kv_heads=5, d_ff=2560, tie_embeddings=True,
                                               max_seq_len=2048),
           source="Liu et al. 2024, 'MobileLLM' (arXiv:2402.14905); HF config "
                  "https://huggingface.co/facebook/MobileLLM-350M/blob/main/config.json",
           notes="Model card reports 345.3M; shared input/output embedding."),
    # ---- Chinchilla ------------------------------------------------------------------------------
    Preset(name="chinchilla-70b", shape=Shape(n_layers=80, d_model=8192, n_heads=64, head_dim=128, d_ff=32768,
                                              vocab_size=32000, max_seq_len=2048, ffn="gelu", norm="rmsnorm",
                                              bias="none", pos="rope", tie_embeddings=False),
           source="Hoffmann et al. 2022, 'Training Compute-Optimal Large Language Models' (arXiv:2203.15556), "
                  "Table 4 (80 layers, 64 heads, kv size 128, d_model 8192); Rae et al. 2021 (Gopher) sec. 3 "
                  "for d_ff = 4 d_model, RMSNorm and the 32k SentencePiece vocabulary",
           notes="Assumed: d_ff = 4 d_model with a GELU MLP, no biases, untied head. Chinchilla uses "
                 "Transformer-XL relative positions, which carry one d_model x d_model projection per layer "
                 "(about 5.4B parameters here) that this Shape does not model: RoPE stands in, so the count "
                 "is about 65B against the reported 70B."),
    # ---- nanoGPT -----------------------------------------------------------------------------------
    Preset(name="nanogpt-shakespeare-char", shape=_nanogpt_char(6, 384, 6, 256),
           source="nanoGPT config/train_shakespeare_char.py (n_layer=6, n_head=6, n_embd=384, block_size=256) "
                  "with train.py default bias=False; github.com/karpathy/nanoGPT",
           notes="Character vocabulary of 65 (data/shakespeare_char/prepare.py). Trained with dropout 0.2, "
                 "a training setting, not part of the shape. nanoGPT uses exact GELU, this model the tanh form."),
    Preset(name="nanogpt-baby", shape=_nanogpt_char(4, 128, 4, 64),
           source="nanoGPT README, 'baby GPT' for CPU: config/train_shakespeare_char.py with --block_size=64 "
                  "--n_layer=4 --n_head=4 --n_embd=128 --dropout=0.0; github.com/karpathy/nanoGPT",
           notes="Character vocabulary of 65, bias=False, tied head."),
    # ---- PyTorch's own encoder -------------------------------------------------------------------
    Preset(name="torch-encoder-6x512",
           shape=Shape(n_layers=6, d_model=512, n_heads=8, d_ff=2048, vocab_size=30000, max_seq_len=512,
                       ffn="relu", norm="layernorm", bias="all", pos="none", norm_position="post",
                       final_norm=False, lm_head=False, tie_embeddings=False, kind="encoder", norm_eps=1e-5),
           source="PyTorch docs: nn.Embedding(30000, 512) + nn.TransformerEncoder(nn.TransformerEncoderLayer("
                  "d_model=512, nhead=8, dim_feedforward=2048), num_layers=6), "
                  "https://pytorch.org/docs/stable/generated/torch.nn.TransformerEncoder.html",
           notes="Post-norm, ReLU, biases everywhere (defaults of nn.TransformerEncoderLayer), no final norm, "
                 "no LM head, no positional encoding (the caller adds one)."),
]

PRESETS: dict[str, Preset] = {p.name: p for p in _ROWS}
assert len(PRESETS) == len(_ROWS), "duplicate preset name"


def get_preset(name: str) -> Preset:
    """The preset called `name` (case and '_' versus '-' do not matter).

    Raises ValueError naming close matches and every known name when there is none.
    """
    if not isinstance(name, str):
        raise UserError(f"preset name must be a string, got {name!r}")
    key = name.strip().lower().replace("_", "-")
    if key in PRESETS:
        return PRESETS[key]
    close = difflib.get_close_matches(key, PRESETS, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UserError(f"unknown preset {name!r}{hint} (known presets: {', '.join(PRESETS)})")


__all__ = ["PRESETS", "Preset", "get_preset"]
