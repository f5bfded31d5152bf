"""The roofline predictions a bench run puts next to each measurement (`depthwidth.shapes.latency`
on the hardware it measured on), with the aten ops each measured call dispatches counted once per
point (`bench.dispatch`), so the fixed cost of an eager call is priced on the ops it really runs."""

from __future__ import annotations

from typing import Any

from depthwidth.shapes.shape import Shape


class Predictor:
    """Roofline predictions for one shape on one `HardwareSpec` (memoised per point)."""

    def __init__(self, shape: Shape, hardware: Any, *, attn_impl: str) -> None:
        self.shape, self.hardware, self.attn_impl = shape, hardware, attn_impl
        self._memo: dict[tuple, float] = {}

    def dtype(self, variant: str) -> str:
        """The dtype a variant is predicted in. int8 dynamic quantization (torch.ao, CPU only) keeps
        fp32 activations and KV cache: a CPU's int8 rate when the spec has one, otherwise fp32 (its
        weight-bytes saving is then not predicted); never a GPU's int8 tensor-core rate."""
        base = variant.split("+", 1)[0]
        if base == "int8":
            return "int8" if self.hardware.kind == "cpu" and "int8" in self.hardware.peak_flops else "fp32"
        return base

    def prefill(self, *, variant: str, batch: int, prompt_len: int, dispatched_ops: int | None = None,
                execution: str = "eager") -> float:
        from depthwidth.shapes.latency import predict_prefill

        key = ("p", variant, batch, prompt_len, dispatched_ops, execution)
        if key not in self._memo:
            self._memo[key] = predict_prefill(
                self.shape, hardware=self.hardware, batch=batch, prompt_len=prompt_len, dtype=self.dtype(variant),
                attn_impl=self.attn_impl, logits="all", dispatched_ops=dispatched_ops, execution=execution).total_s
        return self._memo[key]

    def decode(self, *, variant: str, batch: int, context: int, dispatched_ops: int | None = None,
               execution: str = "eager") -> float:
        from depthwidth.shapes.latency import predict_decode

        key = ("d", variant, batch, context, dispatched_ops, execution)
        if key not in self._memo:
            self._memo[key] = predict_decode(
                self.shape, hardware=self.hardware, batch=batch, context=context, dtype=self.dtype(variant),
                attn_impl=self.attn_impl, dispatched_ops=dispatched_ops, execution=execution).total_s
        return self._memo[key]

    def generation(self, *, variant: str, batch: int, prompt_len: int, new_tokens: int) -> float:
        """One prefill (gives the first token) plus new_tokens - 1 decode steps (fixed costs per
        inventory op: a generation's dispatched ops are not counted)."""
        total = self.prefill(variant=variant, batch=batch, prompt_len=prompt_len)
        for i in range(new_tokens - 1):
            total += self.decode(variant=variant, batch=batch, context=prompt_len + i)
        return total


__all__ = ["Predictor"]
