"""Pick a shape under a decode-latency and memory limit, and say what the choice costs.

Rule:
0. Like with like, and only what learned (`report.gates`, `study.validity`): the shapes compared are one
   budget group's - the group named, else the largest scale's full-horizon group - and only those below
   the bigram baseline. Where several parametrizations ran at the largest scale, each group's winner is
   found on its own and given side by side with the difference; the recommendation is the better of them.
   A group where no shape learned gets "no verdict" and no winner.
1. Every shape with a completed run gets its batch-1 decode latency and memory on the target hardware
   (`report.targets`: measured where measured, predicted otherwise, the source stated per shape).
2. Feasible shapes meet every limit given. Among them the lowest mean validation loss is the
   candidate; the unconstrained best is the lowest loss of all.
3. Noise (`report.noise`): every feasible shape whose loss is within the noise threshold of the
   candidate is tied with it. When the tie holds more than one shape, no shape wins on loss; the
   recommendation is then the tied shape with the lowest decode latency, and the text says that the
   loss differences are within noise. With no noise estimate at all (one seed, too few evaluations),
   the lowest loss is named but the text says that its lead is not checked against noise.
4. The trade against the unconstrained best is stated as "+0.021 loss for 38% lower decode latency".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from depthwidth.errors import UserError
from depthwidth.report.gates import learned, target_groups
from depthwidth.report.noise import NoiseEstimate, estimate_noise
from depthwidth.present.units import nbytes, number, percent
from depthwidth.report.targets import TargetEstimate, estimate_target, hardware_label
from depthwidth.serial import Serializable
from depthwidth.study.summary import ShapeResult
from depthwidth.study.validity import no_verdict


@dataclass(frozen=True, kw_only=True, slots=True)
class Constraints(Serializable):
    hardware: str
    max_decode_ms: float | None = None
    max_memory_gb: float | None = None
    memory: str = "serving"
    context: int | None = None
    dtype: str = "bf16"
    group: str | None = None  # only shapes of this budget group

    def __post_init__(self) -> None:
        for name in ("max_decode_ms", "max_memory_gb"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UserError(f"{name}={value!r} must be a positive number")
        if self.context is not None and (isinstance(self.context, bool) or not isinstance(self.context, int)
                                         or self.context < 1):
            raise UserError(f"context={self.context!r} must be a positive integer")


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    result: ShapeResult
    target: TargetEstimate
    feasible: bool
    reasons: tuple[str, ...]  # why not feasible

    def to_dict(self) -> dict:
        r = self.result
        return {"group": r.group, "label": r.shape_label, "loss_mean": r.val_loss, "loss_std": r.val_loss_std,
                "n_seeds": r.n_seeds, "aspect_ratio": r.aspect_ratio, "feasible": self.feasible,
                "reasons": list(self.reasons), **{k: v for k, v in self.target.to_dict().items() if k != "key"}}


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupWinner(Serializable):
    """One compared group's own verdict (rule 0)."""

    group: str
    parametrization: str
    chosen: str | None  # shape label (None: no verdict)
    loss: float | None
    decided_by: str
    verdict: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Recommendation:
    constraints: Constraints
    candidates: tuple[Candidate, ...]  # sorted by loss
    best: Candidate | None  # unconstrained best loss
    chosen: Candidate | None  # the recommendation (None when nothing is feasible)
    tied: tuple[Candidate, ...]  # feasible shapes within noise of the best feasible loss (chosen included)
    decided_by: str  # "loss" | "latency (losses within noise)" | "loss (noise unknown)" | "none"
    noise: NoiseEstimate
    verdict: str  # one or two plain sentences
    trade: str | None  # "+0.021 loss for 38% lower decode latency" (None when chosen is the best)
    groups: tuple[str, ...] = ()  # the budget groups compared (rule 0)
    left_out: tuple[str, ...] = ()  # results of those groups that did not learn (group/label)
    side_by_side: tuple[GroupWinner, ...] = ()  # each compared group's winner, when more than one

    @property
    def within_noise(self) -> bool:
        """The losses of the recommended shape and at least one other are within noise."""
        return self.decided_by.startswith("latency")

    def to_dict(self) -> dict:
        key = lambda c: None if c is None else c.result.key  # noqa: E731
        return {"constraints": self.constraints.to_dict(), "best": key(self.best), "chosen": key(self.chosen),
                "tied": [c.result.key for c in self.tied], "decided_by": self.decided_by,
                "within_noise": self.within_noise, "noise": self.noise.to_dict(), "verdict": self.verdict,
                "trade": self.trade, "groups": list(self.groups), "left_out": list(self.left_out),
                "side_by_side": [w.to_dict() for w in self.side_by_side],
                "candidates": [c.to_dict() for c in self.candidates]}


def recommend(
    results: Sequence[ShapeResult],
    constraints: Constraints,
    *,
    seq_len: int | None = None,
    batch_size: int = 1,
    noise: NoiseEstimate | None = None,
) -> Recommendation:
    """The recommendation for `constraints` over `results` (module docstring: the rule)."""
    groups = target_groups(results, constraints.group)
    noise = noise or estimate_noise(results)
    each = [_recommend_group([r for r in results if r.group == g and r.val_loss is not None], g, constraints,
                             seq_len=seq_len, batch_size=batch_size, noise=noise) for g in groups]
    if not each:
        return _recommend_group([], None, constraints, seq_len=seq_len, batch_size=batch_size, noise=noise)
    decided = [r for r in each if r.chosen is not None]
    main = min(decided, key=lambda r: r.chosen.result.val_loss) if decided else each[0]
    if len(each) == 1:
        return main
    side = tuple(_winner(r) for r in each)
    return replace(main, side_by_side=side, groups=tuple(groups),
                   left_out=tuple(k for r in each for k in r.left_out),
                   verdict=main.verdict + " " + _side_line(side, main))


def _winner(rec: Recommendation) -> GroupWinner:
    c = rec.chosen
    return GroupWinner(group=rec.groups[0] if rec.groups else "", chosen=c.result.shape_label if c else None,
                       parametrization=c.result.parametrization if c else "", loss=c.result.val_loss if c else None,
                       decided_by=rec.decided_by, verdict=rec.verdict)


def _side_line(side: tuple[GroupWinner, ...], main: Recommendation) -> str:
    """'Side by side at this scale: N600K (completep) L4-H64 2.3102; N600K-sp (sp) L2-H96 2.3524 (+0.0422).'"""
    base = main.chosen.result.val_loss if main.chosen else None
    parts = []
    for w in side:
        if w.chosen is None:
            parts.append(f"{w.group}: no verdict")
            continue
        diff = "" if base is None or w.loss == base else f" ({w.loss - base:+.4f})"
        parts.append(f"{w.group} ({w.parametrization}) {w.chosen} {w.loss:.4f}{diff}")
    return "Side by side at this scale: " + "; ".join(parts) + "."


def _recommend_group(pool, group: str | None, constraints: Constraints, *, seq_len, batch_size,
                     noise: NoiseEstimate) -> Recommendation:
    """Rules 1-4 over one group's results."""
    left_out = tuple(r.key for r in pool if not learned(r))
    bigram = next((r.val_loss + r.bigram_gain for r in pool if r.bigram_gain is not None), None)
    base = dict(groups=(group,) if group else (), left_out=left_out)
    pool = [r for r in pool if learned(r)]
    if not pool and left_out:
        return Recommendation(constraints=constraints, candidates=(), best=None, chosen=None, tied=(),
                              decided_by="none", noise=noise, trade=None, **base,
                              verdict=no_verdict(group or "this scale", bigram) + ": nothing to recommend.")
    candidates = []
    for r in sorted(pool, key=lambda r: r.val_loss):
        t = estimate_target(r, hardware=constraints.hardware, context=constraints.context, dtype=constraints.dtype,
                            memory=constraints.memory, seq_len=seq_len, batch_size=batch_size)
        reasons = []
        if constraints.max_decode_ms is not None:
            if t.decode_ms is None:
                reasons.append("decode latency unknown")
            elif t.decode_ms > constraints.max_decode_ms:
                reasons.append(f"decode {_ms(t.decode_ms)} > {constraints.max_decode_ms:g} ms")
        if constraints.max_memory_gb is not None and t.memory_bytes / 1e9 > constraints.max_memory_gb:
            reasons.append(f"memory {t.memory_bytes / 1e9:.3g} GB > {constraints.max_memory_gb:g} GB")
        candidates.append(Candidate(result=r, target=t, feasible=not reasons, reasons=tuple(reasons)))
    if not candidates:
        return Recommendation(constraints=constraints, candidates=(), best=None, chosen=None, tied=(),
                              decided_by="none", noise=noise, trade=None, **base,
                              verdict="No completed run: there is nothing to recommend.")
    best = candidates[0]
    feasible = [c for c in candidates if c.feasible]
    if not feasible:
        fastest = min((c for c in candidates if c.target.decode_ms is not None), key=lambda c: c.target.decode_ms,
                      default=None)
        hint = "" if fastest is None else (
            f" The fastest is {fastest.result.shape_label} ({fastest.result.group}) at "
            f"{_ms(fastest.target.decode_ms)} per token, {nbytes(fastest.target.memory_bytes)}.")
        return Recommendation(constraints=constraints, candidates=tuple(candidates), best=best, chosen=None, tied=(),
                              decided_by="none", noise=noise, trade=None, **base,
                              verdict=f"No shape meets the limits ({_limits(constraints)}).{hint}")
    top = feasible[0]
    tied = tuple(c for c in feasible if _within(noise, top, c)) if noise.sigma is not None else (top,)
    if len(tied) > 1:
        chosen = min(tied, key=lambda c: (math.inf if c.target.decode_ms is None else c.target.decode_ms))
        decided_by = "latency (losses within noise)"
    else:
        chosen, decided_by = top, "loss" if noise.sigma is not None else "loss (noise unknown)"
    verdict = _verdict(chosen=chosen, tied=tied, feasible=feasible, decided_by=decided_by, noise=noise,
                       constraints=constraints)
    trade = None if chosen is best else _trade(chosen, best, noise)
    if left_out:
        verdict += (f" Left out as not learned (not below the bigram baseline {bigram:.3f}): "
                    + ", ".join(k.split("/", 1)[-1] for k in left_out) + ".")
    return Recommendation(constraints=constraints, candidates=tuple(candidates), best=best, chosen=chosen, tied=tied,
                          decided_by=decided_by, noise=noise, verdict=verdict, trade=trade, **base)


def _within(noise: NoiseEstimate, a: Candidate, b: Candidate) -> bool:
    if a is b:
        return True
    threshold = noise.threshold(a.result, b.result)
    return threshold is None or abs(b.result.val_loss - a.result.val_loss) <= threshold


def _under(c: Constraints) -> str:
    if c.max_decode_ms is None and c.max_memory_gb is None:
        return f"with no latency or memory limit ({hardware_label(c.hardware)})"
    return f"under {_limits(c)}"


def _limits(c: Constraints) -> str:
    parts = []
    if c.max_decode_ms is not None:
        parts.append(f"decode <= {c.max_decode_ms:g} ms/token")
    if c.max_memory_gb is not None:
        parts.append(f"{c.memory} memory <= {c.max_memory_gb:g} GB")
    where = hardware_label(c.hardware)
    return ", ".join(parts) + f" on {where}" if parts else f"no latency or memory limit ({where})"


def _verdict(*, chosen: Candidate, tied, feasible, decided_by: str, noise: NoiseEstimate,
             constraints: Constraints) -> str:
    r, t = chosen.result, chosen.target
    budget = (f", {r.tokens:,} tokens = {r.tokens / r.non_embedding_params:.2g} per non-embedding parameter"
              if r.tokens and r.non_embedding_params else "")
    head = (f"Recommended: {r.shape_label} ({r.group}{budget}), loss {r.val_loss:.4f}, decode {_ms(t.decode_ms)} per token "
            f"({t.decode_source}), {t.memory_kind} memory {nbytes(t.memory_bytes)}, {_under(constraints)}.")
    if decided_by == "loss":
        return head + f" Its loss is lower than every other feasible shape by more than the noise ({noise.method})."
    if noise.sigma is None:
        rest = [c for c in feasible if c is not chosen]
        lead = "" if not rest else f" (next: {rest[0].result.shape_label}, {rest[0].result.val_loss - r.val_loss:+.4f})"
        return head + (f" It has the lowest loss{lead}, but that lead is not checked against noise: there is no "
                       "noise estimate (one seed per shape and too few validation evaluations); run 2 or more "
                       "seeds to know whether it is real.")
    groups = len({c.result.group for c in tied}) > 1  # the same shape may be tied under two groups
    others = [c.result.shape_label + (f" ({c.result.group})" if groups else "") for c in tied if c is not chosen]
    spread = max(c.result.val_loss for c in tied) - min(c.result.val_loss for c in tied)
    return head + (f" No winner on loss: {', '.join(others)} {'is' if len(others) == 1 else 'are'} within noise "
                   f"of it (spread {spread:.4f}, noise sigma {noise.sigma:.4f} by {noise.method}), so the fastest of "
                   "them is named.")


def _trade(chosen: Candidate, best: Candidate, noise: NoiseEstimate) -> str:
    dl = chosen.result.val_loss - best.result.val_loss
    text = f"{dl:+.3f} loss"
    if _within(noise, best, chosen) and noise.sigma is not None:
        text += " (within noise)"
    a, b = chosen.target.decode_ms, best.target.decode_ms
    gains = []
    if a is not None and b:
        change = (b - a) / b
        gains.append(f"{percent(abs(change), digits=0)} {'lower' if change >= 0 else 'higher'} decode latency")
    ma, mb = chosen.target.memory_bytes, best.target.memory_bytes
    if ma is not None and mb and abs(mb - ma) / mb >= 0.005:
        change = (mb - ma) / mb
        more = "less" if change >= 0 else "more"
        gains.append(f"{percent(abs(change), digits=0)} {more} {chosen.target.memory_kind} memory")
    return (text + (" for " + " and ".join(gains) if gains else "")
            + f" than the unconstrained best {best.result.shape_label}")


def _ms(value: float | None) -> str:
    """Milliseconds, the unit of the limits."""
    return "unknown" if value is None else f"{number(value)} ms"


__all__ = ["Candidate", "Constraints", "GroupWinner", "Recommendation", "recommend"]
