"""Synthetic rows for report tests (no training)."""

from depthwidth.study.summary import CurveSeries, ShapeResult
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape


def shape(n_layers: int, d_model: int) -> Shape:
    return Shape(n_layers=n_layers, d_model=d_model, n_heads=max(1, d_model // 16), vocab_size=256, max_seq_len=256)


def result(n_layers, d_model, losses, *, group="p500k", decode_ms=None, prefill_ms=None, bench_hw="measured-cpu",
           curves=(), tokens=1_000_000, **kw) -> ShapeResult:
    s = shape(n_layers, d_model)
    counts = count_params(s)
    return ShapeResult(
        group=group, shape_label=s.label(), shape=s, params=counts.total, non_embedding_params=counts.non_embedding,
        train_flops_per_token=6.0 * counts.total, tokens=tokens,
        lr_losses={1e-3: max(losses) + 0.1, 3e-3: sum(losses) / len(losses)}, best_lr=3e-3,
        seed_losses=tuple(losses), slice_losses={"shakespeare": sum(losses) / len(losses)},
        measured_decode_ms=decode_ms, measured_prefill_ms=prefill_ms,
        bench_hardware=bench_hw if decode_ms is not None else None,
        bench_context=128 if decode_ms is not None else None, bench_prompt_len=64 if prefill_ms is not None else None,
        curves=tuple(curves), **kw)


def curve(seed, final, wiggle):
    tokens = tuple(float(t) for t in range(1000, 9000, 1000))
    losses = tuple(final + 2.0 * (8000 / t - 1) + (wiggle if i % 2 else -wiggle) for i, t in enumerate(tokens))
    return CurveSeries(seed=seed, tokens=tokens, val_loss=losses)
