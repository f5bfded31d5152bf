"""Upper bounds of what only a study spec sets: the length of each of its lists, the sizes of its
[execution] and [lr] sections that no run config checks, and the number of training runs it may ask
for. Each is far above any real study, so that a typo (a seed list pasted 200,000 times, a grid of
100,000 learning rates) is refused by `study validate` in a moment instead of expanding for minutes;
whatever validates can run. A run's own sizes are bounded by `TrainConfig` (`artifact.config.LIMITS`),
a shape's by `shapes.shape.LIMITS`, a benchmark's by `bench.config.LIMITS`.

Published shape studies train a few to a few hundred models (Hoffmann et al. 2022: over 400); a
learning-rate sweep has 5 to 20 values per shape.
"""

from __future__ import annotations

from depthwidth.artifact.config import LIMITS as RUN_LIMITS
from depthwidth.bench.config import LIMITS as BENCH_LIMITS
from depthwidth.study.schema import Checker, SpecError, array, integer, number

LIMITS = {
    "seeds": (1024, "a study trains every shape and learning rate once per seed; studies use 1 to 5"),
    "lrs": (64, "learning rates per shape: a grid, a centred grid's factors or a bracket's max_trials; "
                "sweeps use 5 to 20"),
    "budgets": (256, "each [[budget]] is a family of up to 16 shapes"),
    "shapes": (4096, "explicit [[shape]] tables: 10x the models of the largest published shape study"),
    "family": (64, "depths or widths of one [[budget]]: a family holds at most 16 members"),
    "runs": (10_000, "25x the models of the largest published shape studies, about 400"),
    "lr_factor": (1000.0, "a centred grid's factor of its centre; sweeps span 1/30 to 30"),
    "lr_step": (100.0, "the ratio between a bracket's neighbouring learning rates; sweeps step by 2 to 10"),
    "workers": (1024, "local worker processes, each with its own torch runtime; also at most "
                      "machine.PER_CORE per core of the machine a study runs on"),
    "cpus_per_run": (RUN_LIMITS["threads"][0], RUN_LIMITS["threads"][1]),
    "gpus_per_run": (64.0, "GPUs per process of a run: more than one machine holds"),
}


#: a learning rate of a spec: the bound of a run's (`artifact.config.LIMITS["lr"]`)
LR = number(0.0, maximum=RUN_LIMITS["lr"][0], why=RUN_LIMITS["lr"][1])


def bounded(limits: dict, name: str, minimum: int = 1) -> Checker:
    """An integer checker bounded by `limits[name]` (the bound and its reason)."""
    return integer(minimum, limits[name][0], why=limits[name][1])


def bounded_number(name: str, *, minimum: float = 0.0, inclusive: bool = False) -> Checker:
    """A number checker above `minimum` (or at it, `inclusive`) and at most `LIMITS[name]`."""
    return number(minimum, inclusive=inclusive, maximum=LIMITS[name][0], why=LIMITS[name][1])


def listed(item: Checker, name: str, *, unique: bool = True) -> Checker:
    """An array checker of at most `LIMITS[name]` values, each checked by `item`."""
    return array(item, max_len=LIMITS[name][0], why=LIMITS[name][1], unique=unique)


def points(limit: str, *, min_len: int = 1) -> Checker:
    """A [bench] list: at most `bench.config.LIMITS["points"]` values, each bounded by its LIMITS[limit]."""
    return array(bounded(BENCH_LIMITS, limit), min_len=min_len, max_len=BENCH_LIMITS["points"][0],
                 why=BENCH_LIMITS["points"][1], unique=True)


def check_tables(tables: list, key: str) -> list:
    """The [[budget]] or [[shape]] tables of a spec, at most LIMITS["budgets" / "shapes"] of them."""
    most, why = LIMITS["budgets" if key == "budget" else "shapes"]
    if len(tables) > most:
        raise SpecError(f"{len(tables):,} [[{key}]] tables, above the limit of {most:,} ({why})", key=key)
    return tables


def check_study_sizes(spec) -> None:
    """What no single key shows: the number of training runs the spec asks for (`run_count`) and, when
    it measures throughput, that the benchmark's prompt and generated tokens fit the models."""
    total, how, key = run_count(spec)
    most, why = LIMITS["runs"]
    if total > most:
        raise SpecError(f"the study asks for up to {total:,} training runs ({how}), above the limit of {most:,} "
                        f"({why})", key=key)
    from depthwidth.bench.config import BenchConfig

    bench, default = spec.bench, BenchConfig()
    need = default.throughput_prompt_len + default.new_tokens
    max_len = spec.model.max_seq_len or spec.data.seq_len
    if bench.enabled and bench.batches and need > max_len:
        raise SpecError(f"a throughput point prompts {default.throughput_prompt_len} tokens and generates "
                        f"{default.new_tokens}, {need} positions, more than the models' max_seq_len={max_len} (set "
                        "model.max_seq_len, or batches = [] to measure no throughput)", key="bench.batches")


def run_count(spec) -> tuple[int, str, str]:
    """(The most training runs `spec` can ask for, how that count is made, the key of its largest factor):
    shapes x factor values x (learning rates x seeds + a transfer's reused runs). An upper bound: a
    bracket search counts its whole budget, a planned family its `count` (or its depths/widths)."""
    shapes = sum(len(b.depths or b.widths or ()) or b.count for b in spec.budgets) + len(spec.shapes)
    levels = len(spec.train.levels())
    lr = spec.lr
    trials = lr.max_trials if lr.search == "bracket" and lr.max_trials else lr.trials
    seeds = len(spec.seeds)
    reused = (lr.transfer_seeds or seeds) if lr.transfer_from is not None else 0
    total = shapes * levels * (trials * seeds + reused)
    how = f"{shapes} shape(s) x {trials} learning rate(s) x {seeds} seed(s)" + (
        f" x {levels} factor values" if levels > 1 else "") + (f", plus {reused} reused per shape" if reused else "")
    lr_key = "lr.max_trials" if lr.search == "bracket" else ("lr.grid" if lr.grid is not None else "lr.factors")
    factors = [(seeds, "seeds"), (trials, lr_key), (len(spec.shapes), "shape"),
               (shapes - len(spec.shapes), "budget"), (levels, "train.parametrization")]
    return total, how, max(factors, key=lambda f: f[0])[1]


__all__ = ["LIMITS", "LR", "bounded", "bounded_number", "check_study_sizes", "check_tables", "listed", "points",
           "run_count"]
