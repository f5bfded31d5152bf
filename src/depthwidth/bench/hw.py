"""The one part of the machine's measurement that needs our own model: the fixed cost per op of an
eager Transformer block. `depthwidth.machine.measure_profile(block_overhead=eager_block_overhead)`
records it as the profile's `op_overhead_s` (the machine layer cannot import the model)."""

from __future__ import annotations

from depthwidth.machine import best_seconds, device_kind


def eager_block_overhead(*, device: str = "cpu", repeat: int = 7) -> float:
    """Fixed seconds per inventory op of our own eager model: a 1-token forward of a tiny Transformer
    (width 8, where FLOPs and bytes are negligible) at 1 and 9 layers; the time per added layer,
    divided by the ops `layer_ops` counts per layer. An eager block dispatches about three times as
    many kernels (views, splits, residual adds, norms' statistics) as the inventory's matmul-level
    ops, so the cost of an 8x8 op alone understates the fixed cost a real layer pays."""
    import torch

    from depthwidth.model.transformer import Transformer
    from depthwidth.shapes.flops import layer_ops
    from depthwidth.shapes.shape import Shape

    sync = torch.cuda.synchronize if device_kind(device) == "cuda" else None
    times = {}
    for n_layers in (1, 9):
        shape = Shape(n_layers=n_layers, d_model=8, n_heads=1, vocab_size=8, max_seq_len=8)
        model = Transformer(shape).to(device).eval()
        idx = torch.zeros(1, 1, dtype=torch.long, device=device)  # (B=1, T=1)

        def forward(model=model, idx=idx):
            with torch.no_grad():
                for _ in range(20):
                    model(idx)
        times[n_layers] = best_seconds(forward, repeat=repeat, warmup=1, sync=sync) / 20
    per_layer_ops = sum(1 for op in layer_ops(shape, batch=1, new_tokens=1) if op.repeat == n_layers)
    return max(0.0, (times[9] - times[1]) / 8 / per_layer_ops)


__all__ = ["eager_block_overhead"]
