"""Families of shapes at equal parameters (iso-param) or equal training compute (iso-compute).

At fixed parameters P ~ c * L * H^2 (Kaplan et al. 2020, eq. 2.1: N = 12 L d^2 for a GELU block), so
depth falls as 1/H^2 and "one layer fewer, a bit wider" is rarely a real iso-budget comparison. For each
width on an alignment grid (multiples of `align` that `head_dim` divides) the integer depth whose count
is closest to the target is solved exactly with `count_params` (embeddings, positions, norms and biases
included), or, given depths, the closest width; members whose error exceeds `tolerance` are dropped
with the reason.

Iso-compute: training FLOPs C(shape) = tokens x `flops(shape, seq_len).train_per_token` (6N plus the
attention term 6 L T q, causal, plus the LM head), with tokens either fixed or `tokens_per_param` x N
(Hoffmann et al. 2022 count N as total parameters; `non_embedding=True` uses Kaplan's N). Because the
attention term does not scale with N, narrow members of an iso-compute family have visibly fewer
parameters than the 6ND estimate; `reference_params` (N from C = 6 N D alone) shows the difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.shapes.checks import check_int
from depthwidth.shapes.family_types import DroppedShape, Family, FamilyMember, human  # re-exported
from depthwidth.shapes.flops import flops
from depthwidth.shapes.lint import lint
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape, default_d_ff

KINDS = ("iso-params", "iso-compute")
MAX_LAYERS = 4096


@dataclass(frozen=True, kw_only=True, slots=True)
class _Budget:
    kind: str
    target: float
    non_embedding: bool
    seq_len: int
    tokens: float | None
    tokens_per_param: float | None

    @property
    def target_name(self) -> str:
        if self.kind == "iso-compute":
            return "train_flops"
        return "non_embedding_params" if self.non_embedding else "params"

    def n(self, shape: Shape) -> int:
        p = count_params(shape)
        return p.non_embedding if self.non_embedding else p.total

    def tokens_for(self, shape: Shape) -> float:
        return self.tokens if self.tokens is not None else self.tokens_per_param * self.n(shape)

    def value(self, shape: Shape) -> float:
        if self.kind == "iso-params":
            return float(self.n(shape))
        return self.tokens_for(shape) * flops(shape, seq_len=self.seq_len).train_per_token


def _shape(base: Shape, *, n_layers: int, d_model: int, head_dim: int) -> Shape:
    """`base`'s conventions at a new size: heads = d_model / head_dim, the base's kv-group ratio, d_ff as
    the base's rule (default rule, or the base's d_ff/d_model ratio rounded to 64)."""
    n_heads = d_model // head_dim
    group = max(1, base.n_heads // base.n_kv_heads)
    n_kv = max(1, n_heads // group)
    while n_heads % n_kv:
        n_kv -= 1
    d_ff = None
    if base.d_ff != default_d_ff(d_model=base.d_model, ffn=base.ffn):
        d_ff = max(64, round(base.d_ff / base.d_model * d_model / 64) * 64)
    data = {**base.to_dict(), "n_layers": n_layers, "d_model": d_model, "n_heads": n_heads,
            "n_kv_heads": n_kv, "head_dim": head_dim, "d_ff": d_ff}
    return Shape(**data)


def tp_problem(shape: Shape, tp: int) -> str | None:
    """Why tensor parallelism over `tp` ranks cannot split `shape` (lint rule DW003, vocabulary aside:
    frameworks pad it), or None."""
    if tp == 1:
        return None
    for finding in lint(shape, tp=tp):
        if finding.code == "DW003" and finding.field != "vocab_size":
            return finding.message
    return None


def _solve_depth(budget: _Budget, base: Shape, *, d_model: int, head_dim: int, pp: int,
                 min_layers: int) -> tuple[Shape, float, float] | None:
    """Best integer depth (multiple of pp, >= min_layers) at this width: (shape, value, exact depth).
    The exact depth is NaN when even the shallowest allowed depth exceeds the budget; None when no
    depth up to MAX_LAYERS reaches it."""
    def at(k: int) -> tuple[Shape, float]:
        s = _shape(base, n_layers=k * pp, d_model=d_model, head_dim=head_dim)
        return s, budget.value(s)

    lo = max(1, -(-min_layers // pp))
    s_lo, v_lo = at(lo)
    if v_lo > budget.target:
        return s_lo, v_lo, float("nan")
    hi = lo + 1
    while at(hi)[1] <= budget.target:  # value grows with depth: double until past the target
        if hi * pp >= MAX_LAYERS:
            return None
        lo, hi = hi, min(hi * 2, MAX_LAYERS // pp)
    while hi - lo > 1:  # value(lo) <= target < value(hi)
        mid = (lo + hi) // 2
        if at(mid)[1] <= budget.target:
            lo = mid
        else:
            hi = mid
    (s1, v1), (s2, v2) = at(lo), at(hi)
    exact = (lo + (budget.target - v1) / (v2 - v1)) * pp
    return (s1, v1, exact) if abs(v1 - budget.target) <= abs(v2 - budget.target) else (s2, v2, exact)


def _best_width(budget: _Budget, base: Shape, *, n_layers: int, step: int, head_dim: int,
                tp: int) -> tuple[Shape, float] | None:
    """The grid width (heads divisible by tp) whose value at this depth is closest to the target."""
    best = None
    k = 1
    while k * step <= 1 << 17:
        s = _shape(base, n_layers=n_layers, d_model=k * step, head_dim=head_dim)
        v = budget.value(s)
        if tp_problem(s, tp) is None and (best is None or abs(v - budget.target) < abs(best[1] - budget.target)):
            best = (s, v)
        if v > budget.target and best is not None:
            break
        k += 1
    return best


def _grid_step(align: int, head_dim: int) -> int:
    return align * head_dim // math.gcd(align, head_dim)


def plan_family(
    *, base: Shape, params: float | None = None, non_embedding: bool = False, train_flops: float | None = None,
    tokens_per_param: float | None = None, tokens: float | None = None, seq_len: int | None = None,
    count: int = 5, align: int = 64, head_dim: int = 64, depths: Sequence[int] | None = None,
    widths: Sequence[int] | None = None, tolerance: float = 0.05, min_layers: int = 2,
    aspect_range: tuple[float, float] = (8.0, 512.0), tp: int = 1, pp: int = 1,
) -> Family:
    """A family of shapes with `base`'s conventions (vocabulary, ffn, norm, positions, biases, tying,
    kv-group ratio) at `params` (total, or non-embedding with `non_embedding=True`) or at `train_flops`
    with `tokens_per_param` or `tokens` (sequences of `seq_len`, default base.max_seq_len).

    Widths: multiples of lcm(align, head_dim) whose heads (and kv heads, d_ff) tp divides; depths:
    multiples of pp, at least `min_layers`. Default: every grid width with d_model/n_layers inside
    `aspect_range`, solved for depth, then `count` members chosen at geometrically spaced depths from
    the deepest to the shallowest within tolerance (their depths differ by >= 4x whenever the grid
    allows). `widths=[...]` solves depth for each given width; `depths=[...]` finds the closest grid
    width for each depth. Raises ValueError when no shape meets the budget within `tolerance`.
    """
    if (params is None) == (train_flops is None):
        raise UserError("give exactly one budget: params (parameters) or train_flops (training FLOPs)")
    for name, value in (("count", count), ("align", align), ("head_dim", head_dim), ("min_layers", min_layers),
                        ("tp", tp), ("pp", pp)):
        check_int(name, value)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
        raise UserError(f"tolerance={tolerance!r} must be a fraction in (0, 1), e.g. 0.05")
    lo_a, hi_a = aspect_range
    if not 0 < lo_a < hi_a:
        raise UserError(f"aspect_range={aspect_range!r} must be (low, high) with 0 < low < high")
    if depths is not None and widths is not None:
        raise UserError("give depths or widths, not both")
    seq_len = seq_len or base.max_seq_len
    check_int("seq_len", seq_len)
    if params is not None:
        if tokens is not None or tokens_per_param is not None:
            raise UserError("tokens/tokens_per_param belong to a train_flops budget, not a params budget")
        if isinstance(params, bool) or not isinstance(params, (int, float)) or not params > 0:
            raise UserError(f"params={params!r} must be a positive number")
        budget = _Budget(kind="iso-params", target=float(params), non_embedding=non_embedding, seq_len=seq_len,
                         tokens=None, tokens_per_param=None)
        reference = None
    else:
        if isinstance(train_flops, bool) or not isinstance(train_flops, (int, float)) or not train_flops > 0:
            raise UserError(f"train_flops={train_flops!r} must be a positive number")
        if (tokens is None) == (tokens_per_param is None):
            raise UserError("a train_flops budget needs exactly one of tokens_per_param (e.g. 20) or tokens")
        for name, value in (("tokens", tokens), ("tokens_per_param", tokens_per_param)):
            if value is not None and not value > 0:
                raise UserError(f"{name}={value!r} must be a positive number")
        budget = _Budget(kind="iso-compute", target=float(train_flops), non_embedding=non_embedding,
                         seq_len=seq_len, tokens=tokens, tokens_per_param=tokens_per_param)
        reference = (math.sqrt(train_flops / (6 * tokens_per_param)) if tokens is None else train_flops / (6 * tokens))
    step = _grid_step(align, head_dim)
    kept: list[FamilyMember] = []
    dropped: list[DroppedShape] = []
    notes = [f"widths: multiples of {step} (align {align}, head_dim {head_dim})"
             + (f", heads divisible by tp={tp}" if tp > 1 else "")
             + (f"; depths multiples of pp={pp}" if pp > 1 else "")]
    tol_text = f"{tolerance:.0%}" if tolerance >= 0.01 else f"{tolerance:.2%}"
    tp_skipped: list[int] = []

    def member(s: Shape, value: float, exact: float, why: list[str]) -> FamilyMember:
        p = count_params(s)
        extra = {}
        if budget.kind == "iso-compute":
            extra = {"tokens": budget.tokens_for(s), "train_flops": value}
        return FamilyMember(shape=s, value=value, error=value / budget.target - 1, params=p.total,
                            non_embedding_params=p.non_embedding, exact_depth=exact, reasons=tuple(why), **extra)

    def consider(s: Shape, value: float, exact: float, why: list[str], *, check_aspect: bool) -> None:
        err = value / budget.target - 1
        if check_aspect and not lo_a <= s.aspect_ratio <= hi_a:
            return
        if abs(err) > tolerance:
            dropped.append(DroppedShape(n_layers=s.n_layers, d_model=s.d_model, error=err,
                                        reason=f"{s.label()} is {err:+.2%} from the target (tolerance {tol_text}); "
                                               + why[0]))
            return
        kept.append(member(s, value, exact, why))

    if depths is not None:
        for L in depths:
            check_int("depth", L)
            if L % pp:
                dropped.append(DroppedShape(n_layers=L, d_model=None, error=None,
                                            reason=f"depth {L} is not divisible by pp={pp}"))
                continue
            best = _best_width(budget, base, n_layers=L, step=step, head_dim=head_dim, tp=tp)
            if best is None:
                dropped.append(DroppedShape(n_layers=L, d_model=None, error=None,
                                            reason=f"no grid width has heads divisible by tp={tp}"))
                continue
            consider(best[0], best[1], float(L),
                     [f"width {best[0].d_model} is the grid width closest to the budget at depth {L}"],
                     check_aspect=False)
    else:
        explicit = widths is not None
        candidates = list(widths) if explicit else (k * step for k in range(1, (1 << 17) // step + 1))
        for W in candidates:
            check_int("width", W)
            if W % head_dim:
                dropped.append(DroppedShape(n_layers=None, d_model=W, error=None,
                                            reason=f"width {W} is not a multiple of head_dim {head_dim}"))
                continue
            problem = tp_problem(_shape(base, n_layers=max(min_layers, pp), d_model=W, head_dim=head_dim), tp)
            if problem:
                tp_skipped.append(W)
                if explicit:
                    dropped.append(DroppedShape(n_layers=None, d_model=W, error=None, reason=problem))
                continue
            solved = _solve_depth(budget, base, d_model=W, head_dim=head_dim, pp=pp, min_layers=min_layers)
            if solved is None:
                continue
            s, v, exact = solved
            too_wide = math.isnan(exact)
            why = (f"at width {W} even {s.n_layers} layers exceed the budget" if too_wide else
                   f"depth {exact:.2f} solved at width {W}, rounded to {s.n_layers}")
            consider(s, v, exact, [why], check_aspect=not explicit)
            if not explicit and (too_wide or s.aspect_ratio > hi_a):
                break  # wider widths are shallower still
        if tp_skipped and not explicit:
            notes.append(f"{len(tp_skipped)} grid widths skipped: their heads, kv heads or d_ff are not divisible "
                         f"by tp={tp}")
    if not kept:
        raise UserError(_infeasible(budget, base, dropped=dropped, step=step, head_dim=head_dim, tolerance=tolerance,
                                     tol_text=tol_text,
                                     tp=tp, tp_skipped=bool(tp_skipped), min_layers=max(min_layers, pp),
                                     aspect_range=aspect_range, explicit=depths is not None or widths is not None))
    members = kept if (depths is not None or widths is not None) else _spread(kept, count)
    if depths is None and widths is None and len(kept) > len(members):
        notes.append(f"{len(kept)} grid shapes within {tol_text}; {len(members)} chosen at geometrically spaced depths")
    if len(members) < count and depths is None and widths is None:
        notes.append(f"only {len(members)} shapes on this grid are within {tol_text} (asked for {count}); "
                     "a finer --align/--head-dim gives more")
    members = sorted(members, key=lambda m: (m.shape.d_model, m.shape.n_layers))
    return Family(kind=budget.kind, target=budget.target, target_name=budget.target_name, tolerance=tolerance,
                  align=align, head_dim=head_dim, seq_len=seq_len, members=tuple(members), dropped=tuple(dropped),
                  notes=tuple(notes), reference_params=reference, base=base, non_embedding=non_embedding,
                  tokens=tokens, tokens_per_param=tokens_per_param)


def iso_curve(family: Family, *, widths: Sequence[int]) -> list[tuple[int, float]]:
    """(width, continuous depth) on the family's budget curve, for plotting L ~ 1/H^2 exactly
    (embeddings, norms and, for iso-compute, the attention term included). Widths where even one
    layer exceeds the budget, or that head_dim does not divide, are left out."""
    if family.base is None:
        raise UserError("family has no base shape; build it with plan_family")
    budget = _Budget(kind=family.kind, target=family.target, non_embedding=family.non_embedding,
                     seq_len=family.seq_len, tokens=family.tokens, tokens_per_param=family.tokens_per_param)
    out = []
    for w in widths:
        if w % family.head_dim:
            continue
        solved = _solve_depth(budget, family.base, d_model=w, head_dim=family.head_dim, pp=1, min_layers=1)
        if solved is not None and not math.isnan(solved[2]):
            out.append((w, solved[2]))
    return out


def _spread(kept: list[FamilyMember], count: int) -> list[FamilyMember]:
    """`count` members at geometrically spaced depths from the deepest to the shallowest."""
    if len(kept) <= count:
        return list(kept)
    deep = max(m.shape.n_layers for m in kept)
    shallow = min(m.shape.n_layers for m in kept)
    chosen: list[FamilyMember] = []
    for i in range(count):
        target = math.log(deep) + (math.log(shallow) - math.log(deep)) * i / max(1, count - 1)
        pool = [m for m in kept if m not in chosen]
        chosen.append(min(pool, key=lambda m: (abs(math.log(m.shape.n_layers) - target), abs(m.error))))
    return chosen


def _infeasible(budget: _Budget, base: Shape, *, dropped, step, head_dim, tolerance, tol_text, tp, tp_skipped,
                min_layers, aspect_range, explicit) -> str:
    what = {"params": "parameters", "non_embedding_params": "non-embedding parameters",
            "train_flops": "training FLOPs"}[budget.target_name]
    head = f"no shape is within {tol_text} of {human(budget.target)} {what}"
    smallest = _shape(base, n_layers=min_layers, d_model=step, head_dim=head_dim)
    small_value = budget.value(smallest)
    if small_value > budget.target * (1 + tolerance):
        return (f"{head}: the smallest shape on the grid, {smallest.label()} with vocabulary {base.vocab_size}, "
                f"already has {human(small_value)}; raise the budget or use a smaller --align/--head-dim/--vocab")
    if tp > 1 and tp_skipped and not dropped:
        return (f"{head}: tp={tp} divides the heads, kv heads or d_ff of no grid width in range; "
                "use a tp that divides them")
    if dropped:
        closest = min((d for d in dropped if d.error is not None), key=lambda d: abs(d.error), default=None)
        if closest is not None:
            return (f"{head}: the closest is L{closest.n_layers}-H{closest.d_model} at {closest.error:+.2%}; "
                    "raise --tolerance or use a finer --align/--head-dim")
        return f"{head}: {dropped[0].reason}"
    if explicit:
        return f"{head}: none of the given sizes fits"
    return (f"{head}: no grid width gives a depth >= {min_layers} with d_model/n_layers in "
            f"[{aspect_range[0]:g}, {aspect_range[1]:g}]; widen the aspect range or change the budget")


__all__ = ["DroppedShape", "Family", "FamilyMember", "human", "iso_curve", "plan_family", "tp_problem"]
