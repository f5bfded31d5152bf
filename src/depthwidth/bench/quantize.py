"""Int8 dynamic quantization of a model's Linear layers (PyTorch's CPU path).

`torch.ao.quantization.quantize_dynamic` (PyTorch docs, "Dynamic Quantization") replaces every
`nn.Linear` with a `DynamicQuantizedLinear`: weights stored as int8 with one per-tensor scale,
activations quantized on the fly per call, int8 GEMM through fbgemm/onednn, fp32 in and out.
The embedding and the tied LM head (an `F.linear` on the embedding matrix) stay fp32. In torch 2.13
the API still works but is deprecated in favour of torchao's `quantize_(model,
Int8DynamicActivationInt8WeightConfig())`; its deprecation warnings are silenced here and a clear
error is raised if it is gone.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from depthwidth.errors import UserError

QUANTIZE_KINDS = ("int8",)


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of `model` (fp32) with every nn.Linear dynamically quantized to int8."""
    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError as exc:  # removed in a future torch
        raise UserError(
            f"int8 dynamic quantization is unavailable in torch {torch.__version__} "
            "(torch.ao.quantization.quantize_dynamic is gone); use torch<=2.13 or drop --quantize"
        ) from exc
    if model.embed.weight.dtype != torch.float32:
        raise UserError(f"int8 dynamic quantization needs an fp32 model, got {model.embed.weight.dtype}")
    base = copy.deepcopy(model).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantize_dynamic(base, {nn.Linear}, dtype=torch.qint8)


def quantized_linear_count(model: nn.Module) -> int:
    """Number of dynamically quantized Linear layers in `model`."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

    return sum(1 for m in model.modules() if isinstance(m, DynamicQuantizedLinear))


__all__ = ["QUANTIZE_KINDS", "quantize_int8", "quantized_linear_count"]
