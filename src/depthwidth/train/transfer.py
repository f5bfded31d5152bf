"""The learning-rate transfer sweep: one log grid of learning rates, a short `train` run per (parametrization,
shape, LR), and how far the best LR moves as width and depth change.

The shapes are a cross through the grid: every width at the first depth, and every depth at the first
width (the shape at both firsts is shared; base sizes are those firsts, so there every parametrization's
LR factors are 1). Each run is `depthwidth.train.train` itself (fixed batches, cosine schedule, the real
optimizer groups); its score is the final validation loss, a diverged or failed run scores +inf.
"The optimum moves by k grid steps" compares the index of the best LR across the widths (and across the
depths); the interpolated optimum (a parabola through the best point and its neighbours in log LR) is kept
too, so a move of less than one grid step is visible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from depthwidth.data.dataset import Dataset, load_dataset
from depthwidth.errors import UserError
from depthwidth.shapes.parametrization import PARAMETRIZATIONS
from depthwidth.artifact.config import LIMITS as RUN_LIMITS, TrainConfig
from depthwidth.machine.processes import check_per_core
from depthwidth.train.coord import (CHECK_LIMITS, check_count, check_largest_fits, check_parametrizations, check_sizes,
                                    sized_shape)


@dataclass(frozen=True, kw_only=True, slots=True)
class TransferCurve:
    parametrization: str
    width: int
    depth: int
    lrs: tuple[float, ...]
    losses: tuple[float, ...]  # final validation loss per LR; inf: diverged or failed

    @property
    def best_index(self) -> int | None:
        finite = [i for i, v in enumerate(self.losses) if math.isfinite(v)]
        return min(finite, key=lambda i: self.losses[i]) if finite else None

    @property
    def best_lr(self) -> float | None:
        i = self.best_index
        return None if i is None else self.lrs[i]

    @property
    def at_edge(self) -> bool:
        return self.best_index in (0, len(self.lrs) - 1)

    def interpolated_index(self) -> float | None:
        """Fractional grid index of the parabola's vertex through the best point and its two neighbours
        (the grid is uniform in log LR); the best index itself at an edge or beside a diverged run."""
        i = self.best_index
        if i is None or i in (0, len(self.lrs) - 1):
            return None if i is None else float(i)
        a, b, c = self.losses[i - 1], self.losses[i], self.losses[i + 1]
        curvature = a - 2 * b + c
        if not (math.isfinite(a) and math.isfinite(c)) or curvature <= 0:
            return float(i)
        return i + 0.5 * (a - c) / curvature

    def to_dict(self) -> dict:
        return {"parametrization": self.parametrization, "width": self.width, "depth": self.depth,
                "lrs": list(self.lrs), "val_loss": [v if math.isfinite(v) else None for v in self.losses],
                "best_lr": self.best_lr, "best_index": self.best_index, "interpolated_index": self.interpolated_index(),
                "at_edge": self.at_edge}


@dataclass(frozen=True, kw_only=True, slots=True)
class TransferResult:
    curves: tuple[TransferCurve, ...]
    widths: tuple[int, ...]
    depths: tuple[int, ...]
    lrs: tuple[float, ...]
    settings: dict = field(default_factory=dict)

    def line(self, parametrization: str, over: str) -> list[TransferCurve]:
        """The curves of the width sweep (at the first depth) or the depth sweep (at the first width)."""
        if over == "width":
            keep = [c for c in self.curves if c.depth == self.depths[0]]
        else:
            keep = [c for c in self.curves if c.width == self.widths[0]]
        return sorted((c for c in keep if c.parametrization == parametrization), key=lambda c: getattr(c, over))

    def shift(self, parametrization: str, over: str) -> dict:
        """How far the optimum moves over the sweep: max - min of the best grid index (and of the
        interpolated one), in grid steps; None when a shape has no finite loss or the sweep has one size."""
        line = self.line(parametrization, over)
        best = [c.best_index for c in line]
        interp = [c.interpolated_index() for c in line]
        if len(line) < 2 or any(b is None for b in best):
            return {"grid_steps": None, "interpolated_steps": None, "best_index": best, "edges": []}
        return {"grid_steps": max(best) - min(best), "interpolated_steps": round(max(interp) - min(interp), 3),
                "signed_grid_steps": best[-1] - best[0], "best_index": best,
                "edges": [getattr(c, over) for c in line if c.at_edge]}

    def to_dict(self) -> dict:
        params = sorted({c.parametrization for c in self.curves}, key=PARAMETRIZATIONS.index)
        return {"widths": list(self.widths), "depths": list(self.depths), "lrs": list(self.lrs),
                "settings": self.settings,
                "shift": {pz: {over: self.shift(pz, over) for over in ("width", "depth")} for pz in params},
                "curves": [c.to_dict() for c in self.curves]}


def log_grid(lr_min: float, lr_max: float, n: int) -> tuple[float, ...]:
    if not (0 < lr_min < lr_max) or n < 2:
        raise UserError(f"--lr-min {lr_min:g} must be below --lr-max {lr_max:g}, both positive, with --lrs "
                        f"{n} >= 2 points")
    check_count("--lrs", n)
    most, why = RUN_LIMITS["lr"]
    if lr_max > most:
        raise UserError(f"--lr-max {lr_max:g} is above the limit of {most:g} ({why})")
    ratio = (lr_max / lr_min) ** (1 / (n - 1))
    return tuple(lr_min * ratio**i for i in range(n))


def trainings(*, widths, depths, parametrizations, lrs) -> int:
    """Trainings of a sweep: every parametrization x shape of the cross x learning rate."""
    return len(parametrizations) * (len(widths) + len(depths) - 1) * len(lrs)


def check_sweep(*, widths, depths, parametrizations, lrs, steps: int, head_dim: int) -> None:
    """Every size of a sweep within `CHECK_LIMITS`, its trainings included; UserError naming the flag."""
    check_sizes(widths, depths, head_dim=head_dim, steps=steps)
    check_parametrizations(parametrizations)
    check_count("--lrs", len(lrs))
    n = trainings(widths=widths, depths=depths, parametrizations=parametrizations, lrs=lrs)
    most, why = CHECK_LIMITS["trainings"]
    if n > most:
        raise UserError(f"the sweep trains {n:,} models ({len(parametrizations)} parametrization(s) x "
                        f"{len(widths) + len(depths) - 1} shapes x {len(lrs)} learning rates), above the limit of "
                        f"{most:,} ({why}); use fewer --lrs, --widths or --depths")


def transfer_sweep(*, widths, depths, parametrizations, lrs, steps: int = 200, head_dim: int = 16,
                   corpus: str = "shakespeare", seq_len: int = 64, batch_size: int = 8, warmup: int | None = None,
                   eval_windows: int = 32, seed: int = 0, threads: int | None = 1, dataset: Dataset | None = None,
                   progress=None) -> TransferResult:
    """Train every (parametrization, shape of the cross, LR) and collect the final validation losses."""
    from depthwidth.train.loop import train

    check_sweep(widths=widths, depths=depths, parametrizations=parametrizations, lrs=lrs, steps=steps,
                head_dim=head_dim)
    warmup = max(1, steps // 10) if warmup is None else warmup
    base = TrainConfig(corpus=corpus, steps=steps, lr=lrs[0], warmup=warmup, seq_len=seq_len, batch_size=batch_size,
                       seed=seed, threads=threads, device="cpu", eval_windows=eval_windows, base_width=widths[0],
                       base_depth=depths[0], peak_flops=1e12)
    for pz in parametrizations:  # every run's config is checked before the first trains
        for lr in lrs:
            base.with_(parametrization=pz, lr=lr)
    check_per_core("--threads", threads)
    if dataset is None:
        dataset = load_dataset(corpus=corpus, tokenizer=base.tokenizer, val_fraction=base.val_fraction)
    check_largest_fits(widths, depths, head_dim=head_dim, vocab_size=dataset.vocab_size, seq_len=seq_len)
    cross = [(w, depths[0]) for w in widths] + [(widths[0], d) for d in depths[1:]]
    curves = []
    for pz in parametrizations:
        for width, depth in cross:
            shape = sized_shape(width, depth, head_dim=head_dim, vocab_size=dataset.vocab_size, seq_len=seq_len)
            losses = []
            for lr in lrs:
                r = train(shape, base.with_(parametrization=pz, lr=lr), dataset=dataset)
                ok = r.status == "completed" and r.val_loss is not None and math.isfinite(r.val_loss)
                losses.append(r.val_loss if ok else math.inf)
                if progress is not None:
                    progress(pz, width, depth, lr, losses[-1])
            curves.append(TransferCurve(parametrization=pz, width=width, depth=depth, lrs=tuple(lrs),
                                        losses=tuple(losses)))
    settings = {"steps": steps, "warmup": warmup, "corpus": corpus, "seq_len": seq_len, "batch_size": batch_size,
                "head_dim": head_dim, "seed": seed, "threads": threads, "eval_windows": eval_windows,
                "base_width": widths[0], "base_depth": depths[0]}
    return TransferResult(curves=tuple(curves), widths=tuple(widths), depths=tuple(depths), lrs=tuple(lrs),
                          settings=settings)


__all__ = ["TransferCurve", "TransferResult", "check_sweep", "log_grid", "trainings", "transfer_sweep"]
