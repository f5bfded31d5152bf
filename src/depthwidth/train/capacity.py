"""Capacity of one shape: accuracy on memorised facts as their number grows, and the bits per
parameter it implies (`depthwidth probe capacity`).

Each point trains the shape from scratch on the `facts` probe with n facts (every fact appears about
`repeats` times in the training text, and the run sees the text `epochs` times), then scores exact
recall of held-out queries of the same facts. Stored bits = the chance-corrected number of facts
recalled x log2(1000) (see `data.probes.capacity_bits`); bits per parameter divide by the model's total
parameters. Allen-Zhu & Li 2024 ("Physics of Language Models 3.3") report about 2 bits per parameter
for well-trained models; short CPU runs land well below that, so read the curve's shape, not its peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from depthwidth.errors import UserError
from depthwidth.data.probes import MAX_DIFFICULTIES, MAX_DIFFICULTY, MAX_EXAMPLES, MAX_EXAMPLES_WHY, capacity_bits
from depthwidth.shapes.checks import shown
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.artifact.config import LIMITS as RUN_LIMITS, TrainConfig
from depthwidth.train.loop import train

FACT_TOKENS = 9  # "bcdf:123\n" in bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class CapacityPoint:
    n_facts: int
    status: str
    accuracy: float | None
    bits: float | None
    bits_per_param: float | None
    steps: int
    val_loss: float | None

    def to_dict(self) -> dict:
        return {"n_facts": self.n_facts, "status": self.status, "accuracy": self.accuracy, "bits": self.bits,
                "bits_per_param": self.bits_per_param, "steps": self.steps, "val_loss": self.val_loss}


def capacity_runs(*, fact_counts: tuple[int, ...], config: TrainConfig, repeats: int = 20,
                  epochs: float = 4.0) -> list[tuple[int, TrainConfig]]:
    """(n facts, its run's TrainConfig) of every point, each checked before anything trains: at most
    `MAX_DIFFICULTIES` counts of at most `MAX_DIFFICULTY["facts"]` facts, a text of at most `MAX_EXAMPLES`
    facts, a run within `TrainConfig`'s limits. UserError naming the flag otherwise."""
    if not fact_counts or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in fact_counts):
        raise UserError(f"fact_counts={shown(fact_counts)} must be positive integers")
    if len(fact_counts) > MAX_DIFFICULTIES:
        raise UserError(f"--facts: {len(fact_counts):,} values, above the limit of {MAX_DIFFICULTIES} (one training "
                        "run each)")
    for name, value in (("repeats", repeats), ("epochs", epochs)):
        if not value > 0:
            raise UserError(f"{name}={value!r} must be positive")
    runs = []
    for n in fact_counts:
        if n > MAX_DIFFICULTY["facts"]:
            raise UserError(f"--facts {shown(n)} is above the limit of {MAX_DIFFICULTY['facts']:,} facts of the probe")
        draws = max(repeats * n, -(-2 * (config.tokens_per_step + 1) // FACT_TOKENS),  # two training batches
                    int(2 * (config.seq_len + 1) / (FACT_TOKENS * config.val_fraction)) + 1)  # two val windows
        if draws > MAX_EXAMPLES:
            raise UserError(f"--facts {n} x --repeats {repeats} is {draws:,} facts of text, above the limit of "
                            f"{MAX_EXAMPLES:,} ({MAX_EXAMPLES_WHY})")
        tokens = epochs * draws * FACT_TOKENS
        steps = max(1, math.ceil(tokens / config.tokens_per_step)) if math.isfinite(tokens) else math.inf
        if steps > RUN_LIMITS["steps"][0]:
            raise UserError(f"--epochs {epochs:g} gives {shown(steps)} steps for {n} facts, above the limit of "
                            f"{RUN_LIMITS['steps'][0]:,} ({RUN_LIMITS['steps'][1]})")
        runs.append((n, config.with_(corpus=f"probe:facts:{n}:{n}@{draws}", steps=steps, tokens=None)))
    return runs


def capacity_curve(
    shape: Shape,
    *,
    fact_counts: tuple[int, ...],
    config: TrainConfig,
    repeats: int = 20,
    epochs: float = 4.0,
    progress: Callable[[int, int], None] | None = None,
) -> list[CapacityPoint]:
    """Train `shape` on each number of facts in `fact_counts` with `config`'s optimizer and data
    settings (its corpus and budget are replaced) and measure recall."""
    runs = capacity_runs(fact_counts=fact_counts, config=config, repeats=repeats, epochs=epochs)
    params = count_params(shape).total
    points = []
    for i, (n, run_config) in enumerate(runs):
        if progress is not None:
            progress(i, len(fact_counts))
        steps = run_config.steps
        result = train(shape, run_config)
        acc = result.probe_accuracy.get("facts", {}).get(str(n)) if result.completed else None
        bits = capacity_bits(n_facts=n, accuracy=acc) if acc is not None else None
        points.append(CapacityPoint(n_facts=n, status=result.status, accuracy=acc, bits=bits,
                                    bits_per_param=bits / params if bits is not None else None, steps=steps,
                                    val_loss=result.val_loss))
    return points
