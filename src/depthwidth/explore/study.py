"""A study's evidence on the explorer's axes: its measured points (one per budget group and shape: loss with
its seeds, measured latency, memory and tokens/s), read through the report's loader, and the candidates
of its prescription at the page's budget (the shape-aware law's loss with its interval, predicted decode).

A `StudySource` loads its folder once and again only when the study's store has changed (a study still
running keeps adding results), so a request does not reread an unchanged store.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth.explore.views import AXES
from depthwidth.shapes.shape import Shape


def _stamp(folder: Path) -> tuple:
    """What changes when the store does: size and modification time of study.sqlite and its WAL."""
    out = []
    for name in ("study.sqlite", "study.sqlite-wal"):
        try:
            st = os.stat(folder / name)
            out.append((name, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            out.append((name, None, None))
    return tuple(out)


@dataclass(kw_only=True, slots=True, eq=False)
class StudySource:
    """One study folder named on the command line (`folder` as given)."""

    folder: str
    _data: Any = None
    _stamp: tuple = ()
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def load(self):
        """The study's `StudyData` (`depthwidth.report.data.load_study`), reloaded when its store changed."""
        from depthwidth.report.data import load_study

        with self._lock:
            stamp = _stamp(Path(self.folder))
            if self._data is None or stamp != self._stamp:
                self._data = load_study(self.folder)
                self._stamp = stamp
            return self._data, stamp


def full_horizon(study) -> list:
    """The study's results less its horizon groups (`<group>@<h>`: the same shapes at a fraction of the
    tokens, which the ranking against budget reads), as `recommend` takes them."""
    from depthwidth.study.horizons import split_horizon

    return [r for r in study.results if split_horizon(r.group) is None]


def study_points(study) -> list[dict[str, Any]]:
    """One point per (budget group, shape) of a study's full-horizon results: depth, sizes, loss (mean, sample
    std, seeds) and the value and text of every axis it has a measurement for."""
    out = []
    for r in full_horizon(study):
        values, texts = {}, {}
        for axis in AXES:
            if axis.study is None:
                continue
            value = getattr(r, axis.study)
            if value is not None:
                values[axis.key] = value
                texts[axis.key] = axis.text(value)
        if r.val_loss_std is not None:
            texts["loss"] += f" ± {r.val_loss_std:.4f} (sample std over {r.n_seeds} seeds)"
        out.append({"key": r.key, "group": r.group, "label": r.shape_label, "n_layers": r.n_layers,
                    "d_model": r.d_model, "params": r.params, "non_embedding_params": r.non_embedding_params,
                    "loss": r.val_loss, "loss_std": r.val_loss_std, "seed_losses": list(r.seed_losses),
                    "n_seeds": r.n_seeds, "tokens": r.tokens, "bench_hardware": r.bench_hardware,
                    "bench_device": r.bench_device, "values": values, "texts": texts})
    return out


def law_points(law: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The prescription's candidates (of `recommend --target-params --json`) on the axes the law has."""
    pres = (law or {}).get("prescription")
    if not pres:
        return []
    chosen = (pres.get("chosen") or {}).get("shape")
    best = (pres.get("best") or {}).get("shape")
    out = []
    for c in pres["candidates"]:
        loss = c["loss"]
        values = {"loss": loss["value"]}
        texts = {"loss": f"{loss['value']:.4f} [{loss['lo']:.4f}, {loss['hi']:.4f}]"}
        if c.get("decode_ms") is not None:
            values["decode_ms"] = c["decode_ms"]
            texts["decode_ms"] = next(a for a in AXES if a.key == "decode_ms").text(c["decode_ms"])
        s = c["shape"]
        out.append({"label": Shape.from_dict(s).label(), "n_layers": s["n_layers"],
                    "d_model": s["d_model"], "params": c["params"], "lo": loss["lo"], "hi": loss["hi"],
                    "in_basin": c["in_basin"], "feasible": c["feasible"], "reasons": c["reasons"],
                    "chosen": s == chosen, "best": s == best, "values": values, "texts": texts})
    return out


__all__ = ["StudySource", "full_horizon", "law_points", "study_points"]
