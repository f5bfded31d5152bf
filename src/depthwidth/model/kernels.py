"""The attention kernels the model implements (no torch here: configs import this list).

    "sdpa"   torch.nn.functional.scaled_dot_product_attention (flash / memory-efficient where available)
    "eager"  explicit softmax(QK^T / sqrt(d)) V, every intermediate materialised

The analytic core counts them as its kernels "fused" and "eager" (`depthwidth.shapes.ops.ATTN_KERNELS`;
`attn_kernel("sdpa") == "fused"`).
"""

ATTN_IMPLS = ("sdpa", "eager")

__all__ = ["ATTN_IMPLS"]
