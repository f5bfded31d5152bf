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
from dataclasses import dataclass, field

from depthwidth.errors import UserError
from depthwidth.shapes.checks import check_int, check_one_budget
from depthwidth.shapes.family_types import DroppedShape, Family, FamilyMember, human  # re-exported
from depthwidth.shapes.flops import flops
from depthwidth.shapes.lint import tp_problem
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

    @property
    def reference_params(self) -> float | None:
        """Iso-compute: N from C = 6 N D alone (D = tokens, or D = r N: N = sqrt(C / (6 r)))."""
        if self.kind != "iso-compute":
            return None
        if self.tokens is None:
            return math.sqrt(self.target / (6 * self.tokens_per_param))
        return self.target / (6 * self.tokens)

    def value(self, shape: Shape) -> float:
        if self.kind == "iso-params":
            return float(self.n(shape))
        return self.tokens_for(shape) * flops(shape, seq_len=self.seq_len).train_per_token


def _shape(base: Shape, *, n_layers: int, d_model: int, head_dim: int) -> Shape:
    """`base`'s conventions at a new size: heads = d_model / head_dim, the base's kv-group ratio, d_ff as
    the base's rule (default rule, or the base's d_ff/d_model ratio rounded to 64)."""
    n_heads = d_model // head_dim
    group = base.kv_group
    n_kv = max(1, n_heads // group)
    while n_heads % n_kv:
        n_kv -= 1
    d_ff = None
    if base.d_ff != default_d_ff(d_model=base.d_model, ffn=base.ffn):
        d_ff = max(64, round(base.d_ff / base.d_model * d_model / 64) * 64)
    data = {**base.to_dict(), "n_layers": n_layers, "d_model": d_model, "n_heads": n_heads,
            "n_kv_heads": n_kv, "head_dim": head_dim, "d_ff": d_ff}
    return Shape(**data)


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


def _grid_step(align: int, head_dim: int, group: int = 1) -> int:
    """Widths of the grid are multiples of this: of `align`, and of `head_dim` times the kv group, so
    that every member's heads split into whole groups (its kv heads keep the base's ratio exactly)."""
    return math.lcm(align, head_dim * group)


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

    Widths: multiples of lcm(align, head_dim * kv group) whose heads (and kv heads, d_ff) tp divides; depths:
    multiples of pp, at least `min_layers`. Default: every grid width with d_model/n_layers inside
    `aspect_range`, solved for depth, then `count` members chosen at geometrically spaced depths from
    the deepest to the shallowest within tolerance (their depths differ by >= 4x whenever the grid
    allows). `widths=[...]` solves depth for each given width; `depths=[...]` finds the closest grid
    width for each depth. Raises ValueError when no shape meets the budget within `tolerance`.
    """
    check_one_budget(params=params, flops=train_flops, tokens=tokens, tokens_per_param=tokens_per_param,
                     names=("params", "train_flops", "tokens", "tokens_per_param"))
    _check_search_args(count=count, align=align, head_dim=head_dim, min_layers=min_layers, tp=tp, pp=pp,
                       tolerance=tolerance, aspect_range=aspect_range, depths=depths, widths=widths)
    seq_len = seq_len or base.max_seq_len
    check_int("seq_len", seq_len)
    budget = _make_budget(params=params, train_flops=train_flops, non_embedding=non_embedding, seq_len=seq_len,
                          tokens=tokens, tokens_per_param=tokens_per_param)
    step = _grid_step(align, head_dim, base.kv_group)
    search = _Search(budget=budget, base=base, step=step, head_dim=head_dim, tp=tp, pp=pp,
                     min_layers=min_layers, tolerance=tolerance, aspect_range=aspect_range)
    explicit = depths is not None or widths is not None
    if depths is not None:
        search.at_depths(depths)
    else:
        search.at_widths(widths)
    if not search.kept:
        raise UserError(_infeasible(search, explicit=explicit))
    members = search.kept if explicit else _spread(search.kept, count)
    notes = _notes(search, align=align, count=count, chosen=len(members), explicit=explicit)
    members = sorted(members, key=lambda m: (m.shape.d_model, m.shape.n_layers))
    return Family(kind=budget.kind, target=budget.target, target_name=budget.target_name, tolerance=tolerance,
                  align=align, head_dim=head_dim, seq_len=seq_len, members=tuple(members),
                  dropped=tuple(search.dropped), notes=notes, reference_params=budget.reference_params,
                  base=base, non_embedding=non_embedding, tokens=tokens, tokens_per_param=tokens_per_param)


def _check_search_args(*, count: int, align: int, head_dim: int, min_layers: int, tp: int, pp: int,
                       tolerance: float, aspect_range: tuple[float, float], depths: Sequence[int] | None,
                       widths: Sequence[int] | None) -> None:
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


def _check_positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise UserError(f"{name}={value!r} must be a positive number")


def _make_budget(*, params: float | None, train_flops: float | None, non_embedding: bool, seq_len: int,
                 tokens: float | None, tokens_per_param: float | None) -> _Budget:
    """The one budget `check_one_budget` let through, its numbers checked positive."""
    if params is not None:
        _check_positive("params", params)
        return _Budget(kind="iso-params", target=float(params), non_embedding=non_embedding, seq_len=seq_len,
                       tokens=None, tokens_per_param=None)
    _check_positive("train_flops", train_flops)
    for name, value in (("tokens", tokens), ("tokens_per_param", tokens_per_param)):
        if value is not None and not value > 0:
            raise UserError(f"{name}={value!r} must be a positive number")
    return _Budget(kind="iso-compute", target=float(train_flops), non_embedding=non_embedding, seq_len=seq_len,
                   tokens=tokens, tokens_per_param=tokens_per_param)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Search:
    """The grid a family is searched on, and the members kept, the candidates dropped (with the reason)
    and the grid widths tensor parallelism ruled out, filled in place by `at_depths` / `at_widths`."""

    budget: _Budget
    base: Shape
    step: int  # widths are multiples of this
    head_dim: int
    tp: int
    pp: int
    min_layers: int
    tolerance: float
    aspect_range: tuple[float, float]
    kept: list[FamilyMember] = field(default_factory=list)
    dropped: list[DroppedShape] = field(default_factory=list)
    tp_skipped: list[int] = field(default_factory=list)

    @property
    def tol_text(self) -> str:
        return f"{self.tolerance:.0%}" if self.tolerance >= 0.01 else f"{self.tolerance:.2%}"

    def _member(self, s: Shape, value: float, exact: float, why: list[str]) -> FamilyMember:
        p = count_params(s)
        extra = {}
        if self.budget.kind == "iso-compute":
            extra = {"tokens": self.budget.tokens_for(s), "train_flops": value}
        return FamilyMember(shape=s, value=value, error=value / self.budget.target - 1, params=p.total,
                            non_embedding_params=p.non_embedding, exact_depth=exact, reasons=tuple(why), **extra)

    def _drop(self, *, n_layers: int | None, d_model: int | None, reason: str, error: float | None = None) -> None:
        self.dropped.append(DroppedShape(n_layers=n_layers, d_model=d_model, error=error, reason=reason))

    def consider(self, s: Shape, value: float, exact: float, why: list[str], *, check_aspect: bool) -> None:
        """Keep `s` when within tolerance (and, with `check_aspect`, inside the aspect range), else drop it."""
        err = value / self.budget.target - 1
        lo_a, hi_a = self.aspect_range
        if check_aspect and not lo_a <= s.aspect_ratio <= hi_a:
            return
        if abs(err) > self.tolerance:
            self._drop(n_layers=s.n_layers, d_model=s.d_model, error=err,
                       reason=f"{s.label()} is {err:+.2%} from the target (tolerance {self.tol_text}); " + why[0])
            return
        self.kept.append(self._member(s, value, exact, why))

    def at_depths(self, depths: Sequence[int]) -> None:
        """For each depth, the grid width closest to the budget."""
        for L in depths:
            check_int("depth", L)
            if L % self.pp:
                self._drop(n_layers=L, d_model=None, reason=f"depth {L} is not divisible by pp={self.pp}")
                continue
            best = _best_width(self.budget, self.base, n_layers=L, step=self.step, head_dim=self.head_dim,
                               tp=self.tp)
            if best is None:
                self._drop(n_layers=L, d_model=None, reason=f"no grid width has heads divisible by tp={self.tp}")
                continue
            self.consider(best[0], best[1], float(L),
                          [f"width {best[0].d_model} is the grid width closest to the budget at depth {L}"],
                          check_aspect=False)

    def at_widths(self, widths: Sequence[int] | None) -> None:
        """For each given width (default: every grid width, narrowest first, until the shapes get too
        shallow for the aspect range), the depth solved for the budget."""
        explicit = widths is not None
        candidates = list(widths) if explicit else (k * self.step for k in range(1, (1 << 17) // self.step + 1))
        for W in candidates:
            check_int("width", W)
            if W % self.head_dim:
                self._drop(n_layers=None, d_model=W, reason=f"width {W} is not a multiple of head_dim {self.head_dim}")
                continue
            heads, group = W // self.head_dim, self.base.kv_group
            if heads % group:
                self._drop(n_layers=None, d_model=W,
                           reason=f"width {W} has {heads} heads, not a multiple of the kv group {group}")
                continue
            probe = _shape(self.base, n_layers=max(self.min_layers, self.pp), d_model=W, head_dim=self.head_dim)
            problem = tp_problem(probe, self.tp)
            if problem:
                self.tp_skipped.append(W)
                if explicit:
                    self._drop(n_layers=None, d_model=W, reason=problem)
                continue
            solved = _solve_depth(self.budget, self.base, d_model=W, head_dim=self.head_dim, pp=self.pp,
                                  min_layers=self.min_layers)
            if solved is None:
                continue
            s, v, exact = solved
            too_wide = math.isnan(exact)
            why = (f"at width {W} even {s.n_layers} layers exceed the budget" if too_wide else
                   f"depth {exact:.2f} solved at width {W}, rounded to {s.n_layers}")
            self.consider(s, v, exact, [why], check_aspect=not explicit)
            if not explicit and (too_wide or s.aspect_ratio > self.aspect_range[1]):
                break  # wider widths are shallower still


def _notes(search: _Search, *, align: int, count: int, chosen: int, explicit: bool) -> tuple[str, ...]:
    """What the family's grid was and how its members were chosen, for the reader of the table."""
    s = search
    group = s.base.kv_group
    notes = [f"widths: multiples of {s.step} (align {align}, head_dim {s.head_dim}"
             + (f", {group} query heads per kv head)" if group > 1 else ")")
             + (f", heads divisible by tp={s.tp}" if s.tp > 1 else "")
             + (f"; depths multiples of pp={s.pp}" if s.pp > 1 else "")]
    if explicit:
        return tuple(notes)
    if s.tp_skipped:
        notes.append(f"{len(s.tp_skipped)} grid widths skipped: their heads, kv heads or d_ff are not divisible "
                     f"by tp={s.tp}")
    if len(s.kept) > chosen:
        notes.append(f"{len(s.kept)} grid shapes within {s.tol_text}; {chosen} chosen at geometrically spaced depths")
    if chosen < count:
        notes.append(f"only {chosen} shapes on this grid are within {s.tol_text} (asked for {count}); "
                     "a finer --align/--head-dim gives more")
    return tuple(notes)


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


def _infeasible(search: _Search, *, explicit: bool) -> str:
    """Why no shape met the budget, and what to change."""
    s, budget = search, search.budget
    what = {"params": "parameters", "non_embedding_params": "non-embedding parameters",
            "train_flops": "training FLOPs"}[budget.target_name]
    head = f"no shape is within {s.tol_text} of {human(budget.target)} {what}"
    min_layers = max(s.min_layers, s.pp)
    smallest = _shape(s.base, n_layers=min_layers, d_model=s.step, head_dim=s.head_dim)
    small_value = budget.value(smallest)
    if small_value > budget.target * (1 + s.tolerance):
        return (f"{head}: the smallest shape on the grid, {smallest.label()} with vocabulary {s.base.vocab_size}, "
                f"already has {human(small_value)}; raise the budget or use a smaller --align/--head-dim/--vocab")
    if s.tp > 1 and s.tp_skipped and not s.dropped:
        return (f"{head}: tp={s.tp} divides the heads, kv heads or d_ff of no grid width in range; "
                "use a tp that divides them")
    if s.dropped:
        closest = min((d for d in s.dropped if d.error is not None), key=lambda d: abs(d.error), default=None)
        if closest is not None:
            return (f"{head}: the closest is L{closest.n_layers}-H{closest.d_model} at {closest.error:+.2%}; "
                    "raise --tolerance or use a finer --align/--head-dim")
        return f"{head}: {s.dropped[0].reason}"
    if explicit:
        return f"{head}: none of the given sizes fits"
    lo_a, hi_a = s.aspect_range
    return (f"{head}: no grid width gives a depth >= {min_layers} with d_model/n_layers in "
            f"[{lo_a:g}, {hi_a:g}]; widen the aspect range or change the budget")


__all__ = ["DroppedShape", "Family", "FamilyMember", "human", "iso_curve", "plan_family"]
