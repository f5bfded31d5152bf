"""What int8 dynamic quantization does to one model: weight bytes, validation loss (trained
checkpoints only, with the trainer's own evaluation on the checkpoint's data), and the lint's
group-size divisibility findings for the shape."""

from __future__ import annotations


import torch
from torch import nn

from depthwidth.artifact.config import TrainConfig
from depthwidth.bench.quantize import quantize_int8, quantized_linear_count
from depthwidth.bench.results import QuantizationReport
from depthwidth.bench.target import LoadedTarget
from depthwidth.errors import UserError


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the model's weights as stored: float parameters plus, for dynamically quantized
    Linear layers, their int8 weights (one byte each) and float biases. Per-tensor scales and zero
    points (a few bytes per layer) are left out."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for module in model.modules():
        if isinstance(module, DynamicQuantizedLinear):
            w = module.weight()  # qint8 (out, in)
            total += w.numel() * w.element_size()
            b = module.bias()
            if b is not None:
                total += b.numel() * b.element_size()
    return total


#: lint code of "input features of a linear layer not divisible by the quantization group size"
GROUP_SIZE_CODE = "DW005"


def group_size_findings(shape, *, group_size: int) -> tuple[str, ...]:
    """The lint's group-size divisibility findings (DW005) for `shape`, one line each."""
    from depthwidth.shapes.lint import lint

    return tuple(str(f) for f in lint(shape, group_size=group_size) if f.code == GROUP_SIZE_CODE)


class EvalData:
    """The validation windows the checkpoint's own training run evaluated on, rebuilt from its recorded
    config (corpus, tokenizer, split fractions, seq_len, eval_windows); its dataset hash must match."""

    def __init__(self, config: TrainConfig, *, dataset_hash: str | None) -> None:
        from depthwidth.data.batches import BatchStream
        from depthwidth.data.dataset import load_dataset

        dataset = load_dataset(corpus=config.corpus, tokenizer=config.tokenizer, val_fraction=config.val_fraction,
                               test_fraction=config.test_fraction, cache_dir=config.cache_dir)
        if dataset_hash not in (None, dataset.dataset_hash):
            raise UserError(
                f"the checkpoint was trained on data with hash {str(dataset_hash)[:12]}, but its corpus "
                f"{config.corpus!r} now gives {dataset.dataset_hash[:12]}; its validation loss cannot be reproduced"
            )
        stream = BatchStream(dataset, seq_len=config.seq_len, batch_size=config.batch_size, seed=config.seed)
        self.tokens = dataset.val  # (N_val,)
        self.slices = stream.eval_slices(config.eval_windows)
        self.seq_len = config.seq_len
        self.batch_size = config.micro_batch_size


def validation_loss(model: nn.Module, data: EvalData) -> float:
    """Validation loss (nats per token) of `model` with the trainer's `evaluate`, in fp32 on the CPU."""
    from depthwidth.train.evaluate import evaluate

    out = evaluate(model, tokens=data.tokens, slices=data.slices, seq_len=data.seq_len,
                   batch_size=data.batch_size, device=torch.device("cpu"))
    return out.loss


def eval_data_for(loaded: LoadedTarget) -> EvalData | None:
    """The checkpoint's validation data; None for random weights or a checkpoint that records no config (no
    loss to compare)."""
    if loaded.config is None:
        return None
    return EvalData(loaded.config, dataset_hash=loaded.meta.dataset_hash if loaded.meta is not None else None)


def quantization_report(loaded: LoadedTarget, *, config, data: EvalData | None = None) -> QuantizationReport:
    """Quantize `loaded.model` to int8 and report what changed; the validation losses when `data`
    (from `eval_data_for`, built before any timing so a missing corpus fails fast) is given."""
    base = loaded.model
    quantized = quantize_int8(base)
    before = after = None
    if data is not None:  # a trained checkpoint: the loss change is meaningful
        before = validation_loss(base, data)
        after = validation_loss(quantized, data)
    return QuantizationReport(
        quantized_linears=quantized_linear_count(quantized),
        weight_bytes_before=weight_bytes(base),
        weight_bytes_after=weight_bytes(quantized),
        val_loss_before=before,
        val_loss_after=after,
        lint_findings=group_size_findings(loaded.shape, group_size=config.group_size),
        group_size=config.group_size,
    )


__all__ = ["EvalData", "eval_data_for", "group_size_findings", "quantization_report", "validation_loss", "weight_bytes"]
