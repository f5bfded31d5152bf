"""FLOPs of a `Shape`: per token by component, and a per-op inventory for the roofline model.

Conventions (each is a named argument):
- 2 FLOPs per multiply-add; matmuls only (norms, softmax, activations, the embedding lookup and
  the loss are not counted: they are O(d) per token against O(d^2)).
- The LM head (d_model x vocab) is counted, tied or not; an encoder without a head has none.
- `attention="causal"` counts half of the T x T score and value products (T/2 keys per query), the
  convention of Kaplan et al. 2020 (Table 1) and Megatron-LM; the exact number of unmasked keys is
  (T+1)/2, a relative difference of 1/T in the attention term. `attention="full"` counts the whole
  matrix, as an eager implementation computes it and as PaLM (Chowdhery et al. 2022, appendix B) and
  nanoGPT's MFU estimate count it.
- Training = forward + backward = 3 x forward (backward computes the gradient of each matmul with
  respect to both operands). These are *model* FLOPs, what MFU is defined on. Recomputation adds
  *hardware* FLOPs: `recompute="selective"` repeats the attention score/value products (Korthikanti
  et al. 2022), `recompute="full"` repeats the forward of every block (not the LM head).

Special cases shown in tests/shapes/test_flops.py:
- PaLM / nanoGPT: train per token = 6 N + 12 L H Q T with N the matmul weights, attention="full".
- Kaplan: C_forward = 2 N + 2 L n_ctx d_attn with N the non-embedding matmul weights, attention
  "causal", head excluded.
- Megatron-LM (Narayanan et al. 2021, causal form): 6 B s [L (h(q+2k) + q h + m h f) + h V] + 6 B s^2 L q.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.shapes.checks import check_choice, check_int
from depthwidth.shapes.ops import (
    ATTN_OUT,
    ATTN_SCORES,
    ATTN_SOFTMAX,
    ATTN_VALUES,
    FINAL_NORM,
    LM_HEAD,
    MLP_ACT,
    MLP_DOWN,
    MLP_UP,
    NORM1,
    NORM2,
    QKV,
    check_op_name,
)
from depthwidth.shapes.shape import Shape

ATTENTION_KINDS = ("causal", "full")
RECOMPUTE_KINDS = ("none", "selective", "full")


@dataclass(frozen=True, kw_only=True, slots=True)
class FlopBreakdown:
    """Forward FLOPs per token by component (all layers), and training totals."""

    seq_len: int
    attention: str
    recompute: str
    qkv: float  # q, k, v projections
    attention_scores: float  # Q K^T
    attention_values: float  # softmax(.) V
    attention_out: float  # output projection
    mlp: float  # up (+ gate) and down projections
    lm_head: float  # d_model x vocab

    @property
    def blocks_forward_per_token(self) -> float:
        return self.qkv + self.attention_scores + self.attention_values + self.attention_out + self.mlp

    @property
    def forward_per_token(self) -> float:
        return self.blocks_forward_per_token + self.lm_head

    @property
    def train_per_token(self) -> float:
        """Model FLOPs of one training step per token: 3 x forward (what MFU divides by)."""
        return 3 * self.forward_per_token

    @property
    def recompute_per_token(self) -> float:
        if self.recompute == "full":
            return self.blocks_forward_per_token
        if self.recompute == "selective":
            return self.attention_scores + self.attention_values
        return 0.0

    @property
    def hardware_train_per_token(self) -> float:
        """FLOPs the hardware executes per token, recomputation included."""
        return self.train_per_token + self.recompute_per_token

    @property
    def forward_per_sequence(self) -> float:
        return self.forward_per_token * self.seq_len

    @property
    def train_per_sequence(self) -> float:
        return self.train_per_token * self.seq_len

    def to_dict(self) -> dict[str, float | str | int]:
        return {
            "seq_len": self.seq_len,
            "attention": self.attention,
            "recompute": self.recompute,
            "forward_per_token": self.forward_per_token,
            "train_per_token": self.train_per_token,
            "hardware_train_per_token": self.hardware_train_per_token,
            "forward_per_sequence": self.forward_per_sequence,
            "train_per_sequence": self.train_per_sequence,
            "by_component": {
                "qkv": self.qkv,
                "attention_scores": self.attention_scores,
                "attention_values": self.attention_values,
                "attention_out": self.attention_out,
                "mlp": self.mlp,
                "lm_head": self.lm_head,
            },
        }


def keys_per_query(*, new_tokens: int, past_tokens: int = 0, attention: str = "causal") -> float:
    """Average number of keys each of `new_tokens` queries attends to, after `past_tokens` cached."""
    check_choice("attention", attention, ATTENTION_KINDS)
    if attention == "full":
        return past_tokens + new_tokens
    return past_tokens + new_tokens / 2


def flops(shape: Shape, *, seq_len: int, attention: str = "causal", recompute: str = "none") -> FlopBreakdown:
    """Forward and training FLOPs per token of `shape` on sequences of `seq_len` tokens."""
    check_int("seq_len", seq_len)
    check_choice("attention", attention, ATTENTION_KINDS)
    check_choice("recompute", recompute, RECOMPUTE_KINDS)
    if attention == "causal" and not shape.causal:
        attention = "full"  # an encoder attends to every position
    inventory = layer_ops(shape, batch=1, new_tokens=seq_len, attention=attention)
    per_token = {op.name: op.flops * op.repeat / seq_len for op in inventory}
    return FlopBreakdown(
        seq_len=seq_len,
        attention=attention,
        recompute=recompute,
        qkv=per_token[QKV],
        attention_scores=per_token[ATTN_SCORES],
        attention_values=per_token[ATTN_VALUES],
        attention_out=per_token[ATTN_OUT],
        mlp=per_token[MLP_UP] + per_token[MLP_DOWN],
        lm_head=per_token[LM_HEAD] if shape.lm_head else 0.0,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Op:
    """One operation of a forward pass over `batch * new_tokens` tokens.

    `flops` counts 2 per multiply-add (0 for element-wise ops, which are memory-bound);
    `weight_elems` are parameters read; `read_elems`/`write_elems` activations read and written
    (for attention products this includes the cached keys/values read). `repeat` is how many times
    the op runs in one forward (n_layers for block ops, 1 for the head). `name` is one of
    `depthwidth.shapes.ops.OP_NAMES` (ValueError otherwise).
    """

    name: str
    kind: str  # "matmul" | "elementwise"
    flops: float
    weight_elems: float
    read_elems: float
    write_elems: float
    repeat: int

    def __post_init__(self) -> None:
        check_op_name(self.name)


def layer_ops(
    shape: Shape, *, batch: int, new_tokens: int, past_tokens: int = 0, attention: str = "causal"
) -> tuple[Op, ...]:
    """Inventory of the ops of one forward over `new_tokens` per sequence after `past_tokens` cached.

    Training/prefill: past_tokens=0, new_tokens=T. Decoding one token: new_tokens=1, past_tokens=context.
    Ignores: RoPE rotation, residual adds, dropout and the embedding gather (all O(d) per token),
    and any fusion a runtime may do (each op is assumed to read its inputs from memory once).
    """
    check_int("batch", batch)
    check_int("new_tokens", new_tokens)
    if past_tokens < 0:
        raise UserError(f"past_tokens={past_tokens!r} must be >= 0")
    s = shape
    n = batch * new_tokens  # tokens processed
    d, q, k, f = s.d_model, s.q_dim, s.kv_dim, s.d_ff
    keys = keys_per_query(new_tokens=new_tokens, past_tokens=past_tokens, attention=attention)
    total_keys = past_tokens + new_tokens
    L = s.n_layers
    n_in = 2 if s.ffn == "swiglu" else 1
    ops = [
        Op(name=NORM1, kind="elementwise", flops=0.0, weight_elems=d, read_elems=n * d, write_elems=n * d, repeat=L),
        Op(name=QKV, kind="matmul", flops=2.0 * n * d * (q + 2 * k), weight_elems=d * (q + 2 * k),
           read_elems=n * d, write_elems=n * (q + 2 * k), repeat=L),
        Op(name=ATTN_SCORES, kind="matmul", flops=2.0 * n * keys * q, weight_elems=0,
           read_elems=n * q + batch * total_keys * k, write_elems=n * s.n_heads * keys, repeat=L),
        Op(name=ATTN_SOFTMAX, kind="elementwise", flops=0.0, weight_elems=0,
           read_elems=n * s.n_heads * keys, write_elems=n * s.n_heads * keys, repeat=L),
        Op(name=ATTN_VALUES, kind="matmul", flops=2.0 * n * keys * q, weight_elems=0,
           read_elems=n * s.n_heads * keys + batch * total_keys * k, write_elems=n * q, repeat=L),
        Op(name=ATTN_OUT, kind="matmul", flops=2.0 * n * q * d, weight_elems=q * d,
           read_elems=n * q, write_elems=n * d, repeat=L),
        Op(name=NORM2, kind="elementwise", flops=0.0, weight_elems=d, read_elems=n * d, write_elems=n * d, repeat=L),
        Op(name=MLP_UP, kind="matmul", flops=2.0 * n * d * f * n_in, weight_elems=d * f * n_in,
           read_elems=n * d, write_elems=n * f * n_in, repeat=L),
        Op(name=MLP_ACT, kind="elementwise", flops=0.0, weight_elems=0,
           read_elems=n * f * n_in, write_elems=n * f, repeat=L),
        Op(name=MLP_DOWN, kind="matmul", flops=2.0 * n * f * d, weight_elems=f * d,
           read_elems=n * f, write_elems=n * d, repeat=L),
    ]
    if s.final_norm:
        ops.append(Op(name=FINAL_NORM, kind="elementwise", flops=0.0, weight_elems=d,
                      read_elems=n * d, write_elems=n * d, repeat=1))
    if s.lm_head:
        ops.append(Op(name=LM_HEAD, kind="matmul", flops=2.0 * n * d * s.vocab_size,
                      weight_elems=d * s.vocab_size, read_elems=n * d, write_elems=n * s.vocab_size, repeat=1))
    return tuple(ops)
