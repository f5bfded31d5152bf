"""Wall-clock timing with warm-up runs and robust statistics (median, quartiles, min, max).

The median of several repetitions after discarding warm-up runs is the usual estimator for
latency benchmarks (it is what `torch.utils.benchmark` and pytest-benchmark report first); the
interquartile range (q1..q3) and min..max show the spread.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from depthwidth.serial import Serializable


@dataclass(frozen=True, kw_only=True, slots=True)
class Timing(Serializable):
    """Seconds of `n` timed repetitions of one call."""

    median: float
    q1: float  # 25th percentile
    q3: float  # 75th percentile
    min: float
    max: float
    n: int

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n={self.n!r} must be a positive integer")
        if not 0 <= self.min <= self.q1 <= self.median <= self.q3 <= self.max:
            raise ValueError(
                f"timing statistics must satisfy 0 <= min <= q1 <= median <= q3 <= max, got "
                f"{self.min}, {self.q1}, {self.median}, {self.q3}, {self.max}"
            )

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @classmethod
    def from_samples(cls, samples: list[float]) -> Timing:
        if not samples:
            raise ValueError("samples is empty; need at least one timed repetition")
        ordered = sorted(samples)
        if len(ordered) == 1:
            q1 = q3 = ordered[0]
        else:  # inclusive method: quartiles lie inside [min, max]
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        return cls(
            median=statistics.median(ordered), q1=q1, q3=q3, min=ordered[0], max=ordered[-1], n=len(ordered)
        )


def time_call(
    fn: Callable[[], object],
    *,
    repeat: int,
    warmup: int,
    setup: Callable[[], object] | None = None,
    device: str = "cpu",
) -> Timing:
    """Run `setup()` (untimed) then `fn()` (timed) `warmup + repeat` times; statistics of the last `repeat`.

    On a CUDA `device` ("cuda", "cuda:N") each call is timed with CUDA events recorded on the current
    stream around it and read after a synchronize, so the time is the GPU's, not the launch's;
    the setup's work is synchronized before the start event. On the CPU, `time.perf_counter`."""
    cuda = str(device).startswith("cuda")
    if not cuda:
        return _time_loop(fn, repeat=repeat, warmup=warmup, setup=setup, cuda=False)
    import torch

    with torch.cuda.device(torch.device(device)):  # events and synchronize on the benchmarked GPU
        return _time_loop(fn, repeat=repeat, warmup=warmup, setup=setup, cuda=True)


def _time_loop(fn: Callable[[], object], *, repeat: int, warmup: int, setup: Callable[[], object] | None,
               cuda: bool) -> Timing:
    samples: list[float] = []
    if cuda:
        import torch

        start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(warmup + repeat):
        if setup is not None:
            setup()
        if cuda:
            torch.cuda.synchronize()
            start_event.record()
            fn()
            end_event.record()
            end_event.synchronize()
            elapsed = start_event.elapsed_time(end_event) / 1e3  # ms -> s
        else:
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
        if i >= warmup:
            samples.append(elapsed)
    return Timing.from_samples(samples)


__all__ = ["Timing", "time_call"]
