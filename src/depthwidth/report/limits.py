"""Upper bounds of the repeat counts of `depthwidth report`, `depthwidth recommend` and the explorer's
study fields (which are `recommend`'s flags, read by `recommend`'s own parser): one table, each bound with
its reason, read by the CLI's argparse types before a study is opened. No heavy import here.

The cost of each count is linear: every bootstrap resample refits every trend and shape law of the
study, every held-out split refits every form of the shape law. On the demo's folder `report` took 7 s
with 200 resamples and over 120 s with 10,000, so an unbounded count is a command that never ends.
"""

from __future__ import annotations

import argparse

LIMITS = {
    "bootstrap": (5_000, "percentile intervals settle by 1,000 to 2,000 resamples, Efron and Tibshirani 1993; each "
                         "refits every fit of the study, and 10,000 took over 120 s on the demo's"),
    "splits": (1_000, "the held-out error's mean settles within tens of random splits; each refits every form of "
                      "the shape law"),
}


def bounded_count(name: str, *, minimum: int = 1):
    """An argparse type: a whole number from `minimum` to `LIMITS[name]`; the message names the bound and
    its reason (argparse adds the flag: `argument --bootstrap: ...`)."""
    most, why = LIMITS[name]

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum}")
        if value > most:
            shown = f"{value:,}" if value < 10**30 else f"a {len(str(value))}-digit number"
            raise argparse.ArgumentTypeError(f"{shown} is above the limit of {most:,} ({why})")
        return value

    parse.__name__ = f"{name} count"  # what argparse names in "invalid ... value"
    return parse


__all__ = ["LIMITS", "bounded_count"]
