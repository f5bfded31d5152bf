"""Which results may be ranked, fitted and recommended: the study's validity gates (`[report]`).

A loss means something only against the data's own baselines (`depthwidth.data.baselines`). The rules,
stated as protocol rules and set in a spec's `[report]` table:

1. **Learned.** A run, or a horizon point, whose mean loss is not below the validation split's bigram
   cross-entropy by at least `min_gain` nats is *not learned*: a model there has not yet used more than
   one token of context, so its rank among shapes says which learns letter frequencies fastest. Not-learned
   points are left out of rankings, budget crossings, verdict stability, trend and shape-law fits and the
   recommendation; the report says so once per group. A scale where no shape has learned gets "no verdict"
   instead of a winner.
2. **Enough tokens per parameter for a fit.** A scaling-law fit leaves out points trained on fewer than
   `min_tokens_per_param` tokens per non-embedding parameter. Published ladders fit no point below about 4
   (Marin's ladder about 4, nanochat about 8, OLMo's about 10; Porian et al. 2024, arXiv 2406.19146, also
   drop warmup-phase points): `MIN_TOKENS_PER_PARAM` is 4, the lowest of those. A CPU-sized study that
   cannot reach it may set a lower value in its spec; the report then states the value it used.
3. **Enough scales.** A fit needs learned points at `min_scales` (default 3) distinct scales.

What is left out, and why, is returned with every decision (`Gate`), never dropped silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from depthwidth.study.schema import checked, integer, number

#: tokens per non-embedding parameter below which a point is not fitted (module docstring, rule 2)
MIN_TOKENS_PER_PARAM = 4.0
MIN_TOKENS_SOURCE = ("published scaling ladders fit no point below about 4 tokens per parameter (Marin ~4, nanochat "
                     "~8, OLMo ~10); Porian et al. 2024 (arXiv 2406.19146)")


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportSpec:
    """[report]: the validity gates every verdict of the study's report obeys (module docstring)."""

    min_gain: float = checked(number(0.0, inclusive=True, maximum=10.0), 0.0,
                              doc="nats below the bigram baseline a loss must reach to count as learned")
    min_tokens_per_param: float = checked(number(0.0, inclusive=True, maximum=1e6), MIN_TOKENS_PER_PARAM,
                                          doc="fits leave out points trained on fewer tokens per non-embedding "
                                              "parameter (default 4: published ladders)")
    min_scales: int = checked(integer(2, 100), 3, doc="distinct scales with learned points a fit needs")


DEFAULT_RULES = ReportSpec()


def gain(loss: float | None, bigram: float | None) -> float | None:
    """Nats below the bigram baseline (positive: better than the bigram table)."""
    if loss is None or bigram is None or not (math.isfinite(loss) and math.isfinite(bigram)):
        return None
    return bigram - loss


def is_learned(loss: float | None, bigram: float | None, *, rules: ReportSpec = DEFAULT_RULES) -> bool | None:
    """Rule 1 (None: no baseline or no loss to judge)."""
    g = gain(loss, bigram)
    return None if g is None else g > rules.min_gain


def not_learned_line(group: str, labels, *, bigram: float, total: int, rules: ReportSpec = DEFAULT_RULES) -> str:
    """'N25K: 3 of 4 shapes are not below the bigram baseline (2.544): L1-H48, ...; not learned, so ...'."""
    labels = list(labels)
    margin = f" by {rules.min_gain:g} nats" if rules.min_gain else ""
    which = "no shape is" if len(labels) == total else (
        f"{len(labels)} of {total} shapes {'is' if len(labels) == 1 else 'are'} not")
    return (f"{group}: {which} below the bigram baseline ({bigram:.3f}){margin}"
            f"{'' if len(labels) == total else ': ' + ', '.join(labels)}; not learned, so left out of rankings, "
            "fits and the recommendation")


def no_verdict(group: str, bigram: float | None, *, rules: ReportSpec = DEFAULT_RULES) -> str:
    """'no verdict at N250K: no run is below the bigram baseline (2.54)'."""
    if bigram is None:
        return f"no verdict at {group}: no completed run"
    margin = f" by {rules.min_gain:g} nats" if rules.min_gain else ""
    return f"no verdict at {group}: no run is below the bigram baseline ({bigram:.3f}){margin}"


def with_gates(rows, baselines, rules: ReportSpec = DEFAULT_RULES) -> tuple:
    """`rows` (`ShapeResult`s) with their gain over the bigram baseline and whether they learned."""
    if baselines is None:
        return tuple(rows)
    return tuple(replace(r, bigram_gain=gain(r.val_loss, baselines.bigram),
                         learned=is_learned(r.val_loss, baselines.bigram, rules=rules)) for r in rows)


def validity_lines(rows, baselines, rules: ReportSpec = DEFAULT_RULES) -> list[str]:
    """One line per group holding completed shapes that are not learned (rows gated by `with_gates`)."""
    if baselines is None:
        return []
    by_group: dict[str, list] = {}
    for r in rows:
        if r.learned is not None:
            by_group.setdefault(r.group, []).append(r)
    return [not_learned_line(g, [r.shape_label for r in members if not r.learned], bigram=baselines.bigram,
                             total=len(members), rules=rules)
            for g, members in by_group.items() if any(not r.learned for r in members)]


__all__ = ["DEFAULT_RULES", "MIN_TOKENS_PER_PARAM", "MIN_TOKENS_SOURCE", "ReportSpec", "gain", "is_learned",
           "no_verdict", "not_learned_line", "validity_lines", "with_gates"]
