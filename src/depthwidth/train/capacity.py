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

from dataclasses import dataclass
from typing import Callable

from depthwidth.errors import UserError
from depthwidth.data.probes import capacity_bits
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.artifact.config import TrainConfig
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
    if not fact_counts or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in fact_counts):
        raise UserError(f"fact_counts={fact_counts!r} must be positive integers")
    for name, value in (("repeats", repeats), ("epochs", epochs)):
        if not value > 0:
            raise UserError(f"{name}={value!r} must be positive")
    params = count_params(shape).total
    points = []
    for i, n in enumerate(fact_counts):
        if progress is not None:
            progress(i, len(fact_counts))
        draws = max(repeats * n, -(-2 * (config.tokens_per_step + 1) // FACT_TOKENS),  # two training batches
                    int(2 * (config.seq_len + 1) / (FACT_TOKENS * config.val_fraction)) + 1)  # two val windows
        tokens = int(epochs * draws * FACT_TOKENS)
        steps = max(1, -(-tokens // config.tokens_per_step))
        run_config = config.with_(corpus=f"probe:facts:{n}:{n}@{draws}", steps=steps, tokens=None)
        result = train(shape, run_config)
        acc = result.probe_accuracy.get("facts", {}).get(str(n)) if result.completed else None
        bits = capacity_bits(n_facts=n, accuracy=acc) if acc is not None else None
        points.append(CapacityPoint(n_facts=n, status=result.status, accuracy=acc, bits=bits,
                                    bits_per_param=bits / params if bits is not None else None, steps=steps,
                                    val_loss=result.val_loss))
    return points
