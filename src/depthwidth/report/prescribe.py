"""A prescription at a target scale: the depth and width a fitted shape-aware law (`report.fit_shape`)
puts lowest at N parameters and D tokens (or C training FLOPs), the shapes the fit cannot tell apart from
it (the flat basin), and the latency and memory of each, so that a latency or memory limit is met among
shapes that are equally good by the fit.

Rule:
1. Candidates are the shapes the planner can build at the target (`shapes.families.plan_family`: every
   grid width - multiples of lcm(align, head_dim), heads divisible by tp - with its depth solved for the
   parameter target, within the tolerance, d_model/n_layers inside the aspect range), with the study's
   conventions (vocabulary, ffn, norm, positions, tying). Tokens: the target's, or C / (training FLOPs
   per token of that shape, `shapes.flops`), or 20 per parameter (Hoffmann et al. 2022) when neither is given.
2. The best is the candidate of lowest fitted loss. A candidate is in the basin when the fit cannot rule
   out that it is as good: the lower end of the bootstrap interval of its loss gap to the best (paired,
   sample by sample, so the uncertainty they share cancels) is at or below zero. The optimum's own
   interval is the spread of the best candidate over the bootstrap samples.
3. Decode latency (batch 1) and memory come from the analytic core (`report.targets.estimate_target`:
   roofline on a hardware-table row, weights plus KV cache). Among the basin's shapes that meet the
   limits the fastest is chosen; when none does, the feasible shape of lowest loss, with its cost stated.
4. A target outside the fitted range is an extrapolation; the factor by which N, D, the width and the
   depth lie outside the measured range is stated. A variable measured at one value only (one token
   budget) leaves the loss at another value undetermined: the ranking of shapes still holds, the level not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from depthwidth.errors import UserError
from depthwidth.report.fit import Interval
from depthwidth.report.fit_shape import LawPoint, ShapeLawFit
from depthwidth.serial import Serializable
from depthwidth.shapes.shape import Shape

#: tokens per parameter when the target gives neither tokens nor FLOPs (Hoffmann et al. 2022)
DEFAULT_TOKENS_PER_PARAM = 20.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Target(Serializable):
    params: float  # total parameters, or non-embedding with non_embedding=True
    non_embedding: bool = False
    tokens: float | None = None
    flops: float | None = None  # training FLOPs; tokens follow per shape
    seq_len: int = 2048

    def __post_init__(self) -> None:
        for name in ("params", "tokens", "flops"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UserError(f"{name}={value!r} must be a positive number")
        if self.tokens is not None and self.flops is not None:
            raise UserError("give the target's tokens or its training FLOPs, not both")


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits(Serializable):
    hardware: str = "h100"
    max_decode_ms: float | None = None
    max_memory_gb: float | None = None
    memory: str = "serving"
    dtype: str = "bf16"
    context: int | None = None  # default: the target's seq_len


@dataclass(frozen=True, kw_only=True, slots=True)
class Planned(Serializable):
    """One candidate shape at the target with its fitted loss, gap to the best and serving costs."""

    shape: Shape
    params: int
    non_embedding_params: int
    tokens: float
    train_flops: float
    loss: Interval
    gap: Interval  # loss - best loss, paired over the bootstrap samples
    in_basin: bool
    decode_ms: float | None
    decode_source: str
    memory_bytes: float | None
    feasible: bool
    reasons: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.shape.label()


@dataclass(frozen=True, kw_only=True, slots=True)
class Prescription(Serializable):
    form: str
    target: Target
    limits: Limits
    candidates: tuple[Planned, ...]  # by depth
    best: Planned
    chosen: Planned | None
    basin_depths: tuple[int, int]
    basin_widths: tuple[int, int]
    optimum_depths: tuple[int, int]  # the best candidate's depth over the bootstrap samples (at the fit's level)
    optimum_widths: tuple[int, int]
    extrapolation: dict[str, float]  # variable -> factor outside the measured range (only those outside)
    loss_undetermined: str | None
    level: float
    verdict: str
    warnings: tuple[str, ...]


def law_points(results) -> list[LawPoint]:
    """The fit's points of a study: each seed's final loss of each shape (every budget group, horizon
    groups `<group>@<fraction>` included, as ordinary (shape, tokens) points)."""
    return [LawPoint(width=r.d_model, depth=r.n_layers, heads=r.n_heads, params=r.non_embedding_params,
                     tokens=r.tokens, flops=r.tokens * r.train_flops_per_token, loss=v, label=r.key)
            for r in results if r.tokens for v in r.seed_losses if v > 0]


def candidates(*, base: Shape, target: Target, align: int = 64, head_dim: int = 64, tp: int = 1,
               min_layers: int = 2, aspect_range: tuple[float, float] = (4.0, 512.0),
               tolerance: float = 0.05) -> list:
    """The planner's shapes at the target's parameters: every grid width in the aspect range."""
    from depthwidth.shapes.families import plan_family

    if target.seq_len > base.max_seq_len:
        base = base.with_(max_seq_len=target.seq_len)
    family = plan_family(base=base, params=target.params, non_embedding=target.non_embedding, count=1 << 12,
                         align=align, head_dim=head_dim, tp=tp, min_layers=min_layers, aspect_range=aspect_range,
                         tolerance=tolerance)
    return sorted(family.members, key=lambda m: m.shape.n_layers)


def prescribe(fit: ShapeLawFit, *, members: Sequence, target: Target, limits: Limits = Limits()) -> Prescription:
    """The prescription (module docstring) of `fit` among the planner's `members` (`candidates`) at `target`."""
    import numpy as np

    from depthwidth.shapes.flops import flops

    if not members:
        raise UserError("no candidate shape at the target: widen the aspect range or the tolerance")
    rows = []
    for m in members:
        per_token = flops(m.shape, seq_len=target.seq_len).train_per_token
        tokens = (target.tokens if target.tokens is not None else
                  target.flops / per_token if target.flops is not None else DEFAULT_TOKENS_PER_PARAM * target.params)
        x = dict(width=m.shape.d_model, depth=m.shape.n_layers, tokens=tokens, params=m.non_embedding_params)
        rows.append((m, tokens, tokens * per_token, x, fit.predict_samples(**x), fit.predict(**x)))
    points_ = np.array([r[5] for r in rows])
    samples = np.array([r[4] for r in rows])  # (C, S)
    b = int(np.argmin(points_))
    lo_q, hi_q = (1 - fit.level) / 2, (1 + fit.level) / 2
    planned = []
    for i, (m, tokens, train_flops, x, s, point) in enumerate(rows):
        loss = fit.predict_interval(**x)
        gap_s = s - samples[b]
        g_lo, g_hi = (float(v) for v in np.quantile(gap_s, [lo_q, hi_q]))
        gap_point = float(point - points_[b])
        gap = Interval(value=gap_point, lo=min(g_lo, gap_point), hi=max(g_hi, gap_point), level=fit.level)
        planned.append(_costed(m, tokens=tokens, train_flops=train_flops, loss=loss, gap=gap,
                               in_basin=i == b or g_lo <= 0, limits=limits, seq_len=target.seq_len))
    best = planned[b]
    basin = [p for p in planned if p.in_basin]
    arg = np.argmin(samples, axis=0)
    depths = np.array([planned[i].shape.n_layers for i in arg])
    widths = np.array([planned[i].shape.d_model for i in arg])
    opt_d = tuple(int(v) for v in np.quantile(depths, [lo_q, hi_q], method="nearest"))
    opt_w = tuple(int(v) for v in np.quantile(widths, [lo_q, hi_q], method="nearest"))
    feasible = [p for p in basin if p.feasible]
    if feasible:
        chosen = min(feasible, key=lambda p: (math.inf if p.decode_ms is None else p.decode_ms, p.loss.value))
    else:
        chosen = min((p for p in planned if p.feasible), key=lambda p: p.loss.value, default=None)
    extrapolation = _outside(fit, best)
    undetermined = fit.undetermined(tokens=best.tokens, params=best.non_embedding_params)
    pres = dict(form=fit.form, target=target, limits=limits, candidates=tuple(planned), best=best, chosen=chosen,
                basin_depths=(min(p.shape.n_layers for p in basin), max(p.shape.n_layers for p in basin)),
                basin_widths=(min(p.shape.d_model for p in basin), max(p.shape.d_model for p in basin)),
                optimum_depths=opt_d, optimum_widths=opt_w, extrapolation=extrapolation,
                loss_undetermined=undetermined, level=fit.level, warnings=tuple(fit.warnings))
    return Prescription(**pres, verdict=_verdict(pres, basin=basin, feasible=feasible))


def _costed(m, *, tokens, train_flops, loss, gap, in_basin, limits: Limits, seq_len: int) -> Planned:
    from depthwidth.report.targets import estimate_target
    from depthwidth.study.summary import ShapeResult

    shape = m.shape
    stand_in = ShapeResult(group="target", shape_label=shape.label(), params=m.params,
                           non_embedding_params=m.non_embedding_params, train_flops_per_token=train_flops / tokens,
                           lr_losses={}, best_lr=None, shape=shape)
    context = min(limits.context or seq_len, shape.max_seq_len)
    t = estimate_target(stand_in, hardware=limits.hardware, context=context, prompt_len=context, dtype=limits.dtype,
                        memory=limits.memory, seq_len=seq_len)
    reasons = []
    if limits.max_decode_ms is not None and (t.decode_ms is None or t.decode_ms > limits.max_decode_ms):
        reasons.append("decode latency unknown" if t.decode_ms is None
                       else f"decode {t.decode_ms:.3g} ms > {limits.max_decode_ms:g} ms")
    if limits.max_memory_gb is not None and t.memory_bytes / 1e9 > limits.max_memory_gb:
        reasons.append(f"memory {t.memory_bytes / 1e9:.3g} GB > {limits.max_memory_gb:g} GB")
    return Planned(shape=shape, params=m.params, non_embedding_params=m.non_embedding_params, tokens=tokens,
                   train_flops=train_flops, loss=loss, gap=gap, in_basin=in_basin, decode_ms=t.decode_ms,
                   decode_source=t.decode_source, memory_bytes=t.memory_bytes, feasible=not reasons,
                   reasons=tuple(reasons))


def _outside(fit: ShapeLawFit, best: Planned) -> dict[str, float]:
    """Factor by which the best candidate's N, D, width and depth lie outside the fitted ranges."""
    asked = {"params": best.non_embedding_params, "tokens": best.tokens, "width": best.shape.d_model,
             "depth": best.shape.n_layers}
    out = {}
    for name, value in asked.items():
        lo, hi = fit.ranges[name]
        factor = value / hi if value > hi else lo / value if value < lo else 1.0
        if factor > 1.0 + 1e-9:
            out[name] = factor
    return out


def _verdict(p: dict, *, basin: list[Planned], feasible: list[Planned]) -> str:
    from depthwidth.present.units import count

    t, best, chosen, level = p["target"], p["best"], p["chosen"], p["level"]
    scale = f"{count(t.params)} {'non-embedding ' if t.non_embedding else ''}parameters"
    scale += (f" and {count(t.tokens)} tokens" if t.tokens else f" and {t.flops:.3g} training FLOPs" if t.flops
              else f" and {count(best.tokens)} tokens ({DEFAULT_TOKENS_PER_PARAM:g} per parameter)")
    loss = ("its loss level is not determined by the data (" + p["loss_undetermined"] + ")" if p["loss_undetermined"]
            else f"loss {best.loss.value:.4f} [{best.loss.lo:.4f}, {best.loss.hi:.4f}] ({level:.0%})")
    d_lo, d_hi = p["basin_depths"]
    o_lo, o_hi = p["optimum_depths"]
    text = (f"At {scale} the {p['form']} fit puts the lowest loss at {best.label} (d/L {best.shape.aspect_ratio:.3g}), "
            f"{loss}. {len(basin)} of {len(p['candidates'])} buildable shapes are within the fit's interval of it "
            f"(the flat basin): {d_lo} to {d_hi} layers; over the bootstrap the optimum lies at {o_lo} to {o_hi} "
            "layers.")
    lim = p["limits"]
    limited = lim.max_decode_ms is not None or lim.max_memory_gb is not None
    if chosen is None:
        text += " No candidate meets the limits."
    elif feasible and (limited or chosen is not best):
        text += (f" Chosen among them{' under the limits' if limited else ''}: {chosen.label}, the fastest "
                 f"({chosen.decode_ms:.3g} ms per token on {lim.hardware}; {chosen.gap.value:+.4f} loss "
                 f"[{chosen.gap.lo:+.4f}, {chosen.gap.hi:+.4f}] against the best).")
    elif not feasible:
        text += (f" No basin shape meets the limits; the best that does is {chosen.label}, "
                 f"{chosen.gap.value:+.4f} loss [{chosen.gap.lo:+.4f}, {chosen.gap.hi:+.4f}] from the best.")
    loose = [w.split(" = ")[0] for w in p["warnings"] if "sits at the end of its allowed range" in w]
    if loose:
        text += (f" The data do not pin {', '.join(loose)} (at the end of the allowed range): the optimum may lie "
                 "beyond the measured shapes, so read the best as a direction, not a value.")
    if p["extrapolation"]:
        parts = ", ".join(f"{k} {v:.3g}x" for k, v in p["extrapolation"].items())
        text += (f" This is an extrapolation beyond the measured range ({parts}): the interval assumes the law "
                 "holds there.")
    return text


__all__ = ["DEFAULT_TOKENS_PER_PARAM", "Limits", "Planned", "Prescription", "Target", "candidates", "law_points",
           "prescribe"]
