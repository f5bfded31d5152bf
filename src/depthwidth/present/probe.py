"""What `depthwidth probe capacity` prints: accuracy on memorised facts as their number grows, and the
bits stored per parameter (`depthwidth.train.capacity.CapacityPoint`s), as plain aligned text."""

from __future__ import annotations

from depthwidth.present.units import integer, or_dash, percent


def capacity_lines(label: str, *, params: int, points) -> list[str]:
    """A header, one line per number of facts, and the most bits stored."""
    lines = [f"{label}: {integer(params)} parameters; value space 1000 (log2 = 9.97 bits per fact)",
             f"{'facts':>8} {'steps':>7} {'accuracy':>9} {'bits':>10} {'bits/param':>11}  status"]
    for p in points:
        lines.append(f"{integer(p.n_facts):>8} {integer(p.steps):>7} {or_dash(p.accuracy, percent):>9} "
                     f"{or_dash(p.bits, integer):>10} {or_dash(p.bits_per_param, '.4f'):>11}  {p.status}")
    best = max((p for p in points if p.bits is not None), key=lambda p: p.bits, default=None)
    if best is not None:
        lines.append(f"most stored: {integer(best.bits)} bits at {integer(best.n_facts)} facts = "
                     f"{best.bits_per_param:.4f} bits per parameter")
    return lines


__all__ = ["capacity_lines"]
