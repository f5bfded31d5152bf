"""The attention kernels the model implements (no torch here: configs import this list).

    "sdpa"   torch.nn.functional.scaled_dot_product_attention (flash / memory-efficient where available)
    "eager"  explicit softmax(QK^T / sqrt(d)) V, every intermediate materialised

The analytic core names the first "fused" (see `depthwidth.shapes.activations`).
"""

ATTN_IMPLS = ("sdpa", "eager")

__all__ = ["ATTN_IMPLS"]
