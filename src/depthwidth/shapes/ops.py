"""The names of the ops in the forward-pass inventory (`depthwidth.shapes.flops.layer_ops`).

One name per op, used by every module that looks ops up by name (`flops`, `latency`, `activations`),
so a renamed or added op is one edit here; an `Op` with a name outside `OP_NAMES` is refused, and the
latency model raises on a name its tables do not know instead of assuming a default.

Per block, in forward order (`BLOCK_OPS`): the first norm, the fused q/k/v projection, the attention
score product Q K^T, its softmax, the value product softmax(.) V, the output projection, the second
norm, the MLP up projection (gate and up for SwiGLU), its activation, and the down projection. After
the blocks (`HEAD_OPS`): the final norm and the LM head. `ATTENTION` is the score, softmax and value
ops fused into one kernel (FlashAttention, Dao et al. 2022), the form the latency model uses for
`attn_impl="fused"`.
"""

from __future__ import annotations

NORM1 = "norm1"
QKV = "qkv"
ATTN_SCORES = "attn_scores"
ATTN_SOFTMAX = "attn_softmax"
ATTN_VALUES = "attn_values"
ATTN_OUT = "attn_out"
NORM2 = "norm2"
MLP_UP = "mlp_up"
MLP_ACT = "mlp_act"
MLP_DOWN = "mlp_down"
FINAL_NORM = "final_norm"
LM_HEAD = "lm_head"
ATTENTION = "attention"  # ATTN_SCORES + ATTN_SOFTMAX + ATTN_VALUES as one fused kernel

BLOCK_OPS = (NORM1, QKV, ATTN_SCORES, ATTN_SOFTMAX, ATTN_VALUES, ATTN_OUT, NORM2, MLP_UP, MLP_ACT, MLP_DOWN)
HEAD_OPS = (FINAL_NORM, LM_HEAD)
FUSED_ATTENTION_OPS = (ATTN_SCORES, ATTN_SOFTMAX, ATTN_VALUES)  # what ATTENTION replaces
#: Every op name an inventory may hold, `layer_ops`' own and the fused attention.
OP_NAMES = BLOCK_OPS + HEAD_OPS + (ATTENTION,)


#: How attention is computed, as the analytic core counts it: "fused" (one kernel, FlashAttention /
#: PyTorch SDPA: no T x T tensor in memory) or "eager" (scores, softmax and values as separate ops).
ATTN_KERNELS = ("fused", "eager")
#: Other names accepted for a kernel: the model's `attn_impl="sdpa"` (depthwidth.model.kernels) and "flash".
ATTN_KERNEL_ALIASES = {"sdpa": "fused", "flash": "fused"}


def attn_kernel(name: str) -> str:
    """The analytic kernel name of `name` (an alias is translated); UserError for an unknown one."""
    from depthwidth.shapes.checks import check_choice

    name = ATTN_KERNEL_ALIASES.get(name, name) if isinstance(name, str) else name
    check_choice("attn_impl", name, ATTN_KERNELS + tuple(ATTN_KERNEL_ALIASES))
    return name


def check_op_name(name: str) -> None:
    """Raise ValueError for a name outside `OP_NAMES` (a defect of the caller, not a user mistake)."""
    if name not in OP_NAMES:
        raise ValueError(f"unknown op {name!r}; known ops: {', '.join(OP_NAMES)}")


__all__ = [
    "ATTENTION", "ATTN_KERNELS", "ATTN_KERNEL_ALIASES", "attn_kernel", "ATTN_OUT", "ATTN_SCORES", "ATTN_SOFTMAX", "ATTN_VALUES", "BLOCK_OPS", "FINAL_NORM",
    "FUSED_ATTENTION_OPS", "HEAD_OPS", "LM_HEAD", "MLP_ACT", "MLP_DOWN", "MLP_UP", "NORM1", "NORM2", "OP_NAMES",
    "QKV", "check_op_name",
]
