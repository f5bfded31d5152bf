"""`Shape`: the architecture of one Transformer language model, as plain validated numbers.

Every counting convention that changes a parameter count, a FLOP count or a memory estimate is a
named field here, so two shapes that compare equal build modules of identical structure.
Optional sizes (`n_kv_heads`, `head_dim`, `d_ff`) are resolved in `__post_init__`, so a Shape
always carries concrete numbers and `Shape(d_model=768, n_heads=12, ...)` equals the same shape
with `head_dim=64` spelled out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from depthwidth import serial
from depthwidth.errors import UserError
from depthwidth.shapes.checks import check_choice, check_int, check_number

FFN_KINDS = ("gelu", "relu", "swiglu")
NORM_KINDS = ("layernorm", "rmsnorm")
BIAS_KINDS = ("none", "all", "qkv")
POS_KINDS = ("learned", "rope", "none")
NORM_POSITIONS = ("pre", "post")
KINDS = ("decoder", "encoder")

#: Upper bounds of a shape's numbers, each far above what any real model has, so that a typo or a
#: hostile file (a checkpoint or config claiming 10^12 layers) is refused before anything is built or
#: allocated, while every real or plausible model fits. Largest published values, 2022-2025: 126
#: layers (Llama 3.1 405B; DeepNet trained 1000), d_model 18432 and d_ff 73728 (PaLM 540B, Nemotron-4
#: 340B), 128 heads, head_dim 256 (Gemma), vocabulary 262144 (Gemma 3), context 10M tokens (Llama 4
#: Scout), rope_theta 5e8 (long-context Llama variants).
LIMITS = {
    "n_layers": (1 << 14, "16x the deepest Transformer trained (DeepNet, 1000 layers)"),
    "d_model": (1 << 17, "7x the widest published model (18432)"),
    "n_heads": (1 << 14, "128x the most heads of a published model"),
    "n_kv_heads": (1 << 14, "128x the most heads of a published model"),
    "head_dim": (1 << 14, "64x the largest published head size (256)"),
    "d_ff": (1 << 20, "14x the largest published MLP (73728)"),
    "vocab_size": (1 << 24, "64x the largest published vocabulary (262144)"),
    "max_seq_len": (1 << 27, "13x the longest published context (10M tokens)"),
}
FLOAT_LIMITS = {
    "rope_theta": (1e12, "2000x the largest published RoPE base (5e8)"),
    "norm_eps": (1.0, "an epsilon is a small number (1e-5 to 1e-6)"),
}

#: SwiGLU d_ff default: 8/3 * d_model (keeps the MLP at ~8 d^2 like a 4x GELU MLP), rounded up
#: to a multiple of this, as Llama does with its `multiple_of`.
SWIGLU_MULTIPLE_OF = 64


def _round_up(x: float, m: int) -> int:
    return int(-(-x // m) * m)


def default_d_ff(*, d_model: int, ffn: str) -> int:
    """4*d_model for GELU/ReLU; 8/3*d_model rounded up to a multiple of 64 for SwiGLU."""
    if ffn == "swiglu":
        return _round_up(8 * d_model / 3, SWIGLU_MULTIPLE_OF)
    return 4 * d_model


@dataclass(frozen=True, kw_only=True, slots=True)
class Shape(serial.Serializable):
    """One Transformer LM architecture.

    Fields:
        n_layers: number of Transformer blocks (depth L).
        d_model: residual-stream width H.
        n_heads: query heads.
        n_kv_heads: key/value heads (GQA when < n_heads, MQA when 1); default n_heads.
        head_dim: per-head size; default d_model // n_heads (may differ, as in some Llama configs).
        d_ff: MLP hidden size; default 4*d_model (gelu/relu) or 8/3*d_model rounded (swiglu).
        ffn: "gelu" (tanh approximation, as GPT-2) | "relu" | "swiglu" (gated, three matrices).
        norm: "layernorm" | "rmsnorm".
        bias: "none" (no Linear biases, LayerNorm weight only: nanoGPT bias=False, Llama),
              "all" (every Linear and LayerNorm has a bias: GPT-2, GPT-NeoX, nn.TransformerEncoder),
              "qkv" (only the q/k/v projections: Qwen2).
        pos: "learned" (a table of max_seq_len rows) | "rope" | "none".
        max_seq_len: longest sequence the model accepts (the learned table size).
        rope_theta: RoPE base frequency (ignored unless pos="rope").
        parallel_residual: GPT-NeoX/GPT-J block, x + attn(norm1(x)) + mlp(norm2(x)).
        norm_position: "pre" (GPT-2 onward) | "post" (original Transformer, the default of
            nn.TransformerEncoderLayer).
        final_norm: a norm after the last block (pre-norm models have one).
        tie_embeddings: the LM head reuses the token-embedding matrix.
        lm_head: whether there is an output projection to the vocabulary at all.
        vocab_size: token vocabulary.
        kind: "decoder" (causal attention) | "encoder" (bidirectional attention).
        norm_eps: epsilon of every norm.
    """

    n_layers: int
    d_model: int
    n_heads: int
    vocab_size: int
    n_kv_heads: int | None = None
    head_dim: int | None = None
    d_ff: int | None = None
    ffn: str = "gelu"
    norm: str = "layernorm"
    bias: str = "none"
    pos: str = "learned"
    max_seq_len: int = 1024
    rope_theta: float = 10000.0
    parallel_residual: bool = False
    norm_position: str = "pre"
    final_norm: bool = True
    tie_embeddings: bool = True
    lm_head: bool = True
    kind: str = "decoder"
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("n_layers", "d_model", "n_heads", "vocab_size", "max_seq_len"):
            check_int(name, getattr(self, name), 1, *LIMITS[name])
        for name, allowed in (
            ("ffn", FFN_KINDS),
            ("norm", NORM_KINDS),
            ("bias", BIAS_KINDS),
            ("pos", POS_KINDS),
            ("norm_position", NORM_POSITIONS),
            ("kind", KINDS),
        ):
            check_choice(name, getattr(self, name), allowed)
        for name in ("parallel_residual", "final_norm", "tie_embeddings", "lm_head"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"{name}={getattr(self, name)!r} must be true or false")
        for name, (high, why) in FLOAT_LIMITS.items():
            check_number(name, getattr(self, name), high=high, why=why)

        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise UserError(
                    f"n_heads={self.n_heads} does not divide d_model={self.d_model}; "
                    "choose heads that divide the width or give head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        check_int("head_dim", self.head_dim, 1, *LIMITS["head_dim"])
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        check_int("n_kv_heads", self.n_kv_heads, 1, *LIMITS["n_kv_heads"])
        if self.n_kv_heads > self.n_heads or self.n_heads % self.n_kv_heads:
            raise UserError(
                f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads} "
                "(1 = multi-query, n_heads = multi-head)"
            )
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", default_d_ff(d_model=self.d_model, ffn=self.ffn))
        check_int("d_ff", self.d_ff, 1, *LIMITS["d_ff"])
        if self.pos == "rope" and self.head_dim % 2:
            raise UserError(f"head_dim={self.head_dim} must be even for pos='rope'")
        if self.parallel_residual and self.norm_position == "post":
            raise UserError("parallel_residual=True needs norm_position='pre' (GPT-NeoX style)")
        if self.tie_embeddings and not self.lm_head:
            object.__setattr__(self, "tie_embeddings", False)

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of all query heads together, n_heads * head_dim."""
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of all key (or all value) heads together, n_kv_heads * head_dim."""
        return self.n_kv_heads * self.head_dim

    @property
    def kv_group(self) -> int:
        """Query heads per key/value head (1 without GQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def aspect_ratio(self) -> float:
        """d_model / n_layers, the usual depth-versus-width coordinate (Kaplan et al. 2020)."""
        return self.d_model / self.n_layers

    @property
    def causal(self) -> bool:
        return self.kind == "decoder"

    @property
    def linear_bias(self) -> bool:
        """Every Linear layer carries a bias."""
        return self.bias == "all"

    @property
    def qkv_bias(self) -> bool:
        return self.bias in ("all", "qkv")

    @property
    def norm_bias(self) -> bool:
        """LayerNorm has a bias only with bias='all'; RMSNorm never has one."""
        return self.norm == "layernorm" and self.bias == "all"

    # ---- conversion (`to_dict`: the generic dict form of depthwidth.serial, every field) -------
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Shape:
        """The shape of `data` (a `to_dict()`); UserError naming unknown or missing fields."""
        return serial.from_dict(cls, data, what="shape")

    def with_(self, **changes: Any) -> Shape:
        """A copy with some fields changed; derived defaults are recomputed if not given."""
        base = self.to_dict()
        if "d_model" in changes or "n_heads" in changes:
            base.setdefault("head_dim", None)
            if "head_dim" not in changes and base["head_dim"] == self.d_model // self.n_heads:
                base["head_dim"] = None
        if ("d_model" in changes or "ffn" in changes) and "d_ff" not in changes:
            if base["d_ff"] == default_d_ff(d_model=self.d_model, ffn=self.ffn):
                base["d_ff"] = None
        if "n_heads" in changes and "n_kv_heads" not in changes and self.n_kv_heads == self.n_heads:
            base["n_kv_heads"] = None
        base.update(changes)
        return Shape(**base)

    def label(self) -> str:
        """Compact label, e.g. 'L12-H768-A12' (plus '-KV4' with GQA, '-F2048' with a non-default d_ff)."""
        text = f"L{self.n_layers}-H{self.d_model}-A{self.n_heads}"
        if self.n_kv_heads != self.n_heads:
            text += f"-KV{self.n_kv_heads}"
        if self.d_ff != default_d_ff(d_model=self.d_model, ffn=self.ffn):
            text += f"-F{self.d_ff}"
        return text


__all__ = ["Shape", "default_d_ff", "FFN_KINDS", "NORM_KINDS", "BIAS_KINDS", "POS_KINDS"]
