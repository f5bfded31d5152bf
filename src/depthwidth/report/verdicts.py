"""One verdict per scale: each full-horizon budget group's winner and its margin over the runner-up,
judged against the noise (`report.noise`) and the validity gates (`study.validity`) - or "no verdict"
where no shape learned. The closing lines of `study run` and `depthwidth demo`, and the report's
"Verdict per scale" list, are these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from depthwidth.report.gates import learned, scale_of
from depthwidth.report.noise import NoiseEstimate
from depthwidth.serial import Serializable
from depthwidth.study.horizons import split_horizon
from depthwidth.study.validity import no_verdict


@dataclass(frozen=True, kw_only=True, slots=True)
class ScaleVerdict(Serializable):
    group: str
    parametrization: str
    scale: float  # median non-embedding parameters of the group's shapes
    shapes: int  # completed shapes
    learned: int  # of those, below the bigram baseline (all of them when no baseline is known)
    winner: str | None  # shape label (None: no verdict)
    loss: float | None
    runner_up: str | None
    margin: float | None  # runner-up's loss minus the winner's
    beyond_noise: bool | None  # the margin exceeds the noise threshold (None: noise unknown)
    line: str


def scale_verdicts(results: Sequence, noise: NoiseEstimate, *, bigram: float | None = None) -> tuple[ScaleVerdict, ...]:
    """The verdict of every full-horizon group of `results` (`ShapeResult`s), smallest scale first."""
    groups: dict[str, list] = {}
    for r in results:
        if split_horizon(r.group) is None and r.val_loss is not None:
            groups.setdefault(r.group, []).append(r)
    out = [_verdict(g, members, noise, bigram) for g, members in groups.items()]
    return tuple(sorted(out, key=lambda v: (v.scale, v.group)))


def _verdict(group: str, members: list, noise: NoiseEstimate, bigram: float | None) -> ScaleVerdict:
    ranked = sorted((r for r in members if learned(r)), key=lambda r: r.val_loss)
    param = members[0].parametrization
    base = dict(group=group, parametrization=param, scale=scale_of(members), shapes=len(members), learned=len(ranked))
    left = len(members) - len(ranked)
    if not ranked:
        return ScaleVerdict(**base, winner=None, loss=None, runner_up=None, margin=None, beyond_noise=None,
                            line=f"{no_verdict(group, bigram)} ({param})")
    best = ranked[0]
    gain = f", {best.bigram_gain:.3f} below the bigram baseline" if best.bigram_gain is not None else ""
    head = f"{group} ({param}): {best.shape_label} {best.val_loss:.4f}{gain}"
    tail = f"; {left} of {len(members)} shapes not learned, left out" if left else ""
    if len(ranked) < 2:
        return ScaleVerdict(**base, winner=best.shape_label, loss=best.val_loss, runner_up=None, margin=None,
                            beyond_noise=None, line=head + ", the only learned shape" + tail)
    second = ranked[1]
    margin = second.val_loss - best.val_loss
    threshold = noise.threshold(best, second)
    beyond = None if threshold is None else margin > threshold
    judged = ("noise unknown" if beyond is None else
              f"beyond the noise ({threshold:.4f})" if beyond else f"within the noise ({threshold:.4f}): no winner on loss")
    return ScaleVerdict(**base, winner=best.shape_label, loss=best.val_loss, runner_up=second.shape_label,
                        margin=margin, beyond_noise=beyond,
                        line=f"{head}, {margin:.4f} ahead of {second.shape_label}, {judged}{tail}")


__all__ = ["ScaleVerdict", "scale_verdicts"]
