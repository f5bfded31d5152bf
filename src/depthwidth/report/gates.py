"""The report's side of the validity gates (`depthwidth.study.validity`): which results a fit may use,
which budget groups a verdict compares (like with like), and the words for what was left out.

- `fit_results`: learned results (below the bigram baseline) trained on at least `min_tokens_per_param`
  tokens per non-embedding parameter; a fit needs such points at `min_scales` distinct scales
  (`trends.count_scales`), else it gets none and the reason.
- `target_groups`: the groups a recommendation compares - by default the largest scale's full-horizon
  groups (one per parametrization when several ran there), so a smaller scale's shape is never put
  against the target scale's, nor a horizon point against a full run.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from depthwidth.errors import UserError
from depthwidth.study.horizons import split_horizon
from depthwidth.study.validity import DEFAULT_RULES, MIN_TOKENS_PER_PARAM, MIN_TOKENS_SOURCE, ReportSpec


def rules_of(spec: dict | None) -> ReportSpec:
    """The study's `[report]` rules from its stored spec dict (the defaults for a study of before)."""
    raw = (spec or {}).get("report") or {}
    try:
        return ReportSpec(**{k: v for k, v in raw.items() if k in ReportSpec.__dataclass_fields__})
    except (TypeError, UserError):
        return DEFAULT_RULES


def learned(result) -> bool:
    """Whether a result may be ranked: learned, or not judged (no baseline known)."""
    return getattr(result, "learned", None) is not False


def tokens_per_param(result) -> float | None:
    return result.tokens / result.non_embedding_params if result.tokens and result.non_embedding_params else None


def fit_results(results: Sequence, rules: ReportSpec = DEFAULT_RULES) -> tuple[list, list[str]]:
    """(the results a scaling fit may use, one line per reason something was left out)."""
    from depthwidth.report.trends import count_scales

    done = [r for r in results if r.seed_losses and r.tokens]
    notes = []
    unlearned = [r for r in done if not learned(r)]
    if unlearned:
        notes.append(f"{len(unlearned)} of {len(done)} shape results are not below the bigram baseline and are not "
                     "fitted")
    keep = [r for r in done if learned(r)]
    short = [r for r in keep if (tokens_per_param(r) or 0.0) < rules.min_tokens_per_param]
    if short:
        worst = min(tokens_per_param(r) or 0.0 for r in short)
        source = f" ({MIN_TOKENS_SOURCE})" if rules.min_tokens_per_param == MIN_TOKENS_PER_PARAM else \
            f" (the study's [report] min_tokens_per_param; published ladders use at least {MIN_TOKENS_PER_PARAM:g})"
        notes.append(f"{len(short)} learned shape results trained on fewer than {rules.min_tokens_per_param:g} tokens "
                     f"per non-embedding parameter (down to {worst:.2g}) are not fitted{source}")
    keep = [r for r in keep if (tokens_per_param(r) or 0.0) >= rules.min_tokens_per_param]
    scales = count_scales([r.non_embedding_params for r in keep])
    if keep and scales < rules.min_scales:
        notes.append(f"the points left span {scales} scale(s); a fit needs learned points at {rules.min_scales} "
                     "scales, so none is fitted")
        keep = []
    return keep, notes


def scale_of(members: Sequence) -> float:
    """A group's scale: the median non-embedding parameters of its shapes."""
    return statistics.median(r.non_embedding_params for r in members)


def target_groups(results: Sequence, group: str | None = None) -> list[str]:
    """The groups a verdict compares: `group` when named (refused when not in the study), else the largest
    scale's full-horizon groups with a completed result, largest first."""
    from depthwidth.report.trends import SCALE_RATIO

    if group is not None:
        if not any(r.group == group for r in results):
            groups = ", ".join(sorted({r.group for r in results}))
            raise UserError(f"group={group!r} is not in this study; groups: {groups}")
        return [group]
    full: dict[str, list] = {}
    for r in results:
        if split_horizon(r.group) is None and r.val_loss is not None:
            full.setdefault(r.group, []).append(r)
    if not full:
        return []
    scale = {g: scale_of(m) for g, m in full.items()}
    top = max(scale.values())
    return sorted((g for g in full if scale[g] * SCALE_RATIO >= top), key=lambda g: (-scale[g], g))


__all__ = ["fit_results", "learned", "rules_of", "scale_of", "target_groups", "tokens_per_param"]
