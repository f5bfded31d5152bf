"""Equal-time budgets: `[[budget]] params = ..., seconds = 3600` (or `gpu_hours`), `hardware = "h100"`.

A deeper shape has fewer tokens/s, so at equal wall-clock or device time it sees fewer tokens than a
shallower one of the same parameters; an iso-token comparison hides that. Here every member of the family
trains for the same *predicted* time: its tokens are the whole steps that fit in `seconds` at the step time
the analytic core predicts for that shape on `hardware` (`shapes.latency.predict_train_step`, eager
execution, the study's batch geometry and dtype) - a table row, or "measured": this machine's stored
profile (`depthwidth hw measure`). Predicted, not measured, so a run's tokens (and its id) do not depend on
how busy the machine was; the prediction and its source are recorded in the run's config (`budget`), and
`study validate` prints each shape's tokens.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from depthwidth.shapes.latency import predict_train_step
from depthwidth.shapes.shape import Shape


@dataclass(frozen=True, kw_only=True, slots=True)
class TimeShare:
    """One shape's share of an equal-time budget."""

    seconds: float  # the budget (every member's)
    hardware: str  # the hardware row name, or "measured"
    source: str  # where the step time comes from: "table h100" or "measured profile <sha256[:12]>"
    step_s: float  # predicted seconds of one optimizer step
    steps: int  # whole steps within `seconds` (at least 1)
    tokens: int  # steps x tokens per step
    tokens_per_s: float

    def to_dict(self) -> dict:
        return asdict(self)


def hardware_of(name: str):
    """(HardwareSpec, source) of a budget's hardware: a table row, or this machine's measured profile."""
    from depthwidth.machine import MEASURED, resolve_hardware

    hw = resolve_hardware(name, argument="budget.hardware")
    if name == MEASURED:
        digest = hashlib.sha256(json.dumps(hw.to_dict(), sort_keys=True, default=str).encode()).hexdigest()[:12]
        return hw, f"measured profile {digest} ({hw.name})"
    return hw, f"table {hw.name}"


def time_shares(shapes, *, seconds: float, hardware: str, seq_len: int, batch_size: int,
                dtype: str) -> dict[str, TimeShare]:
    """shape label -> its `TimeShare` of `seconds` on `hardware` (module docstring)."""
    hw, source = hardware_of(hardware)
    out = {}
    per_step = batch_size * seq_len
    for shape in shapes:
        step = predict_train_step(shape, hardware=hw, seq_len=seq_len, global_batch=batch_size,
                                  micro_batch=batch_size, dtype=dtype, execution="eager").total_s
        steps = max(1, int(seconds // step))
        out[shape.label()] = TimeShare(seconds=float(seconds), hardware=hardware, source=source, step_s=step,
                                       steps=steps, tokens=steps * per_step, tokens_per_s=per_step / step)
    return out


def predicted_seconds(shape: Shape, *, hardware, tokens: int, seq_len: int, batch_size: int, dtype: str) -> float:
    """Predicted training seconds of `tokens` tokens of `shape` on `hardware` (a HardwareSpec or a name)."""
    step = predict_train_step(shape, hardware=hardware, seq_len=seq_len, global_batch=batch_size,
                              micro_batch=batch_size, dtype=dtype, execution="eager").total_s
    return step * tokens / (batch_size * seq_len)


def check_shares(spec, budget, shapes, shares: dict, *, key: str, overrides: dict) -> None:
    """Every member of an equal-time budget (`spec` a StudySpec, `budget` its BudgetSpec) trains at least one
    predicted step in its time, and its steps make a run [train] can take (a warmup or horizons longer than
    the run); a refusal names the budget's `seconds` (or `gpu_hours`), never the [train] key it collides with."""
    from depthwidth.study.schema import SpecError

    name = "gpu_hours" if budget.gpu_hours is not None else "seconds"
    given = f"{name}={getattr(budget, name):g}"
    for shape in shapes:
        share = shares[shape.label()]
        predicted = f"{share.step_s * 1e3:.4g} ms per step predicted on {share.source}"
        if share.step_s > share.seconds:
            raise SpecError(f"{given} is less than one training step of {shape.label()} ({predicted}); "
                            "give a longer time", key=f"{key}.{name}")
        try:
            spec.train_config(lr=spec.lr.values(shape.d_model)[0], seed=spec.seeds[0], tokens=share.tokens,
                              overrides=overrides)
        except SpecError as exc:
            raise SpecError(f"{given} gives {shape.label()} {share.steps:,} steps ({predicted}), too few for "
                            f"{exc.key}: {exc.message}; give a longer time", key=f"{key}.{name}") from None


__all__ = ["TimeShare", "check_shares", "hardware_of", "predicted_seconds", "time_shares"]
