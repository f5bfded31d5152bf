"""A study spec: one TOML file that says which shapes to train, on what, for how long, with which
learning-rate trials and seeds, and what to measure. `load_spec(path)` validates every key before
anything runs (see `depthwidth.study.schema` for the error format); `examples/*.toml` are commented
examples, and `examples/demo.toml` is the built-in demo study.

Sections (every key is optional unless marked):
    name, description, hardware, seeds       top-level keys; `name` is required
    [model]        architecture conventions shared by every shape (ffn, norm, pos, bias, ...)
    [[budget]]     parameter, compute or equal-time targets, each expanded into a family by the planner
    [[shape]]      explicit shapes (n_layers, d_model, n_heads required)
    [data]         corpus, tokenizer, val_fraction, seq_len, batch_size
    [train]        exactly one of tokens / tokens_per_param / steps, plus optimiser settings
    [eval]         every (steps), windows (validation windows per slice)
    [lr]           `grid = [...]` (the same values for every shape) or a grid centred per width:
                   `centre`, `reference_width`, `exponent`, `factors` -> lr = centre * factor *
                   (reference_width / d_model) ** exponent (muP-style 1/width scaling with exponent 1,
                   Yang et al. 2022, "Tensor Programs V", Table 3, hidden-weight Adam LR)
                   `search = "bracket"` with `max_trials` (and `step`): start from those values and
                   bracket each shape's optimum within the same budget (`depthwidth.study.lr_search`);
                   `transfer_from = "<shape label>"` (or "smallest"): under mup/completep tune that shape
                   only and reuse its LR for the others, `transfer_seeds` seeds each; `verify = 2` (or 4)
                   checks the transfer at the largest scale, `verify = "adapt"` (with `adapt_trials`) also
                   re-tunes every shape of a group where it failed (`depthwidth.study.verify`);
                   LRSpec lives in `depthwidth.study.spec_lr`
    [bench]        batch-1 prefill / decode latency and throughput of each shape (random weights)
    [inspect]      per-layer diagnostics (`depthwidth inspect`) of each finished shape's trained run:
                   windows (validation windows per slice), tolerance (the effective depth's, in nats);
                   only when the table is there (`depthwidth.study.inspections`)
    [execution]    threads, workers, cpus_per_run, gpus_per_run, nproc_per_run, parallel, tp, max_attempts -
                   how to run, never what (nproc, parallel and tp belong here, not in [train])
Every size and list has an upper bound with its reason (`depthwidth.study.limits`, and the run's, the
shape's and the benchmark's own tables), the number of training runs too, so what validates can run.
Every shape of a study gets the same number of learning-rate trials, the same seeds and the same token
budget per budget group; those are what makes the comparison fair (see `depthwidth.study.fairness`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with the tomli backport
    import tomli as tomllib

from depthwidth.artifact.config import stored_value
from depthwidth.artifact.config import LIMITS as RUN_LIMITS, PARALLEL
from depthwidth.bench.config import CPU_BENCH_DTYPES, LIMITS as BENCH_LIMITS
from depthwidth.diagnose.limits import DEFAULT_TOLERANCE, MAX_WINDOWS
from depthwidth.errors import UserError
from depthwidth.files import read_text
from depthwidth.shapes.shape import BIAS_KINDS, FFN_KINDS, LIMITS as SHAPE_LIMITS, NORM_KINDS, NORM_POSITIONS, POS_KINDS
from depthwidth.study.limits import (LIMITS, bounded, bounded_number, check_study_sizes, check_tables, listed,
                                     points)
from depthwidth.study.validity import ReportSpec
from depthwidth.study.spec_budget import NAME_PATTERN, BudgetSpec  # noqa: F401 (re-exported)
from depthwidth.study.spec_lr import LRSpec  # noqa: F401 (re-exported)
from depthwidth.study.spec_train import PLACED, TrainSpec, train_config, train_section  # noqa: F401 (re-exported)
from depthwidth.study.schema import (
    SpecError,
    array,
    boolean,
    build,
    check_value,
    checked,
    choice,
    integer,
    number,
    optional,
    text,
)

#: Shape fields a spec may set once for all its shapes in [model].
MODEL_KEYS = ("ffn", "norm", "bias", "pos", "max_seq_len", "rope_theta", "parallel_residual", "norm_position",
              "final_norm", "tie_embeddings", "norm_eps")


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    ffn: str = checked(choice(FFN_KINDS), "gelu", doc="MLP kind")
    norm: str = checked(choice(NORM_KINDS), "layernorm")
    bias: str = checked(choice(BIAS_KINDS), "none")
    pos: str = checked(choice(POS_KINDS), "learned")
    max_seq_len: int | None = checked(optional(integer(1)), None, doc="default: data.seq_len")
    rope_theta: float = checked(number(0.0), 10000.0)
    parallel_residual: bool = checked(boolean, False)
    norm_position: str = checked(choice(NORM_POSITIONS), "pre")
    final_norm: bool = checked(boolean, True)
    tie_embeddings: bool = checked(boolean, True)
    norm_eps: float = checked(number(0.0), 1e-5)


@dataclass(frozen=True, kw_only=True, slots=True)
class ShapeSpec:
    n_layers: int = checked(integer(1), doc="depth")
    d_model: int = checked(integer(1), doc="width")
    n_heads: int = checked(integer(1), doc="query heads")
    n_kv_heads: int | None = checked(optional(integer(1)), None)
    head_dim: int | None = checked(optional(integer(1)), None)
    d_ff: int | None = checked(optional(integer(1)), None)


@dataclass(frozen=True, kw_only=True, slots=True)
class DataSpec:
    corpus: str = checked(text(), "shakespeare", doc="shakespeare | python-docs | python-code | a+b | a path")
    tokenizer: str = checked(text(r"byte|char|bpe:\d+", what="byte, char or bpe:N"), "byte")
    val_fraction: float = checked(number(0.0, maximum=0.5), 0.1)
    seq_len: int = checked(integer(2), 128)
    batch_size: int = checked(integer(1), 16)


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalSpec:
    every: int = checked(integer(1), 100, doc="steps between validation evaluations")
    windows: int = checked(integer(1), 32, doc="validation windows per slice")


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchSpec:
    enabled: bool = checked(boolean, True)
    prompt_lens: tuple[int, ...] | None = checked(optional(points("length")), None,
                                                  doc="default: half the position table")
    contexts: tuple[int, ...] | None = checked(optional(points("length")), None,
                                               doc="cached tokens before a decode step; default: half the table")
    batches: tuple[int, ...] = checked(points("batch", min_len=0), (1,), doc="[]: no throughput")
    repeat: int = checked(bounded(BENCH_LIMITS, "repeat"), 5)
    dtype: str = checked(choice(CPU_BENCH_DTYPES), "fp32")  # the serving benchmark runs on the CPU


@dataclass(frozen=True, kw_only=True, slots=True)
class InspectSpec:
    """[inspect]: `depthwidth inspect` of each finished shape (its first completed seed at the chosen LR), on
    its own validation windows; a study without the table inspects nothing."""

    enabled: bool = checked(boolean, True)
    windows: int = checked(integer(1, MAX_WINDOWS, why="each window costs O(L^2) block forwards"), 8,
                           doc="validation windows per slice")
    tolerance: float = checked(number(0.0, inclusive=True), DEFAULT_TOLERANCE,
                               doc="nats of loss the effective depth may give up")

    def settings(self) -> dict[str, Any]:
        """What an inspection's result depends on (the store keys it by these)."""
        return {"windows": self.windows, "tolerance": self.tolerance}


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionSpec:
    threads: int | None = checked(optional(bounded(RUN_LIMITS, "threads")), None,
                                  doc="default: from the run's size and the cores (local), cpus_per_run (ray)")
    workers: int | None = checked(optional(bounded(LIMITS, "workers")), None,
                                  doc="local runs at once, in worker processes; default: from the cores and runs")
    cpus_per_run: int = checked(bounded(LIMITS, "cpus_per_run"), 1, doc="Ray resources per run")
    gpus_per_run: float | None = checked(optional(bounded_number("gpus_per_run", inclusive=True)), None,
                                         doc="Ray GPUs per process of a run; default 1 when the cluster has GPUs, "
                                             "else 0")
    nproc_per_run: int = checked(integer(1, RUN_LIMITS["nproc"][0]), 1,
                                 doc="processes of one run (torch.distributed, one machine): TrainConfig.nproc")
    parallel: str = checked(choice(PARALLEL), "ddp", doc="how a run's processes share the model")
    tp: int = checked(integer(1, RUN_LIMITS["tp"][0]), 1, doc="tensor-parallel ranks among a run's processes")
    max_attempts: int = checked(integer(1, 10), 2, doc="a failed run is retried until this many attempts")


@dataclass(frozen=True, kw_only=True, slots=True)
class StudySpec:
    name: str
    description: str
    hardware: str
    seeds: tuple[int, ...]
    model: ModelSpec
    budgets: tuple[BudgetSpec, ...]
    shapes: tuple[ShapeSpec, ...]
    data: DataSpec
    train: TrainSpec
    eval: EvalSpec
    lr: LRSpec
    bench: BenchSpec
    execution: ExecutionSpec
    inspect: InspectSpec | None = None  # None: no [inspect] table
    report: ReportSpec = ReportSpec()  # [report]: the validity gates of every verdict (study.validity)
    source: str = "<spec>"  # file the spec came from (not part of any run's identity)
    text: str = ""  # its TOML text, stored with the study

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("source", "text") or (f.name == "inspect" and value is None):
                continue
            if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
                value = [dataclasses.asdict(v) for v in value]
            elif hasattr(value, "to_dict"):
                value = value.to_dict()
            elif dataclasses.is_dataclass(value):
                value = dataclasses.asdict(value)
            out[f.name] = value
        return out

    def execution_settings(self) -> dict[str, Any]:
        """The `TrainConfig` execution fields [train] sets (checkpoint_every, cache_dir, peak_flops),
        with the study defaults: what an executor passes to each run besides its threads."""
        from depthwidth.artifact.config import EXECUTION_FIELDS

        out = {k: self.train.get(k) for k in EXECUTION_FIELDS if k != "threads" and self.train.get(k) is not None}
        ex = self.execution  # [execution] nproc_per_run, parallel, tp: one run over several processes
        if ex.nproc_per_run % ex.tp:
            raise UserError(f"{self.source}: execution.tp={ex.tp} must divide execution.nproc_per_run={ex.nproc_per_run}")
        if (ex.nproc_per_run, ex.parallel, ex.tp) != (1, "ddp", 1):
            out.update(nproc=ex.nproc_per_run, parallel=ex.parallel, tp=ex.tp)
        return out

    def train_config(self, *, lr: float, seed: int, tokens: int, threads: int | None = None,
                     overrides: dict[str, Any] | None = None):
        """The `TrainConfig` of one training run: [data], [eval] and [train] of the spec, the study's
        defaults (`STUDY_DEFAULTS`), and what varies per run (learning rate, seed, the group's tokens and
        its factor values, `overrides`). This is the one conversion from a spec to a run; a bad value is a
        SpecError naming its key."""
        try:
            return train_config(self.data, self.eval, self.train, lr=lr, seed=seed, budget={"tokens": tokens},
                                threads=threads, overrides=overrides)
        except SpecError as exc:
            raise exc.located(source=self.source, text=self.text) from None


_SECTIONS = {"model": ModelSpec, "data": DataSpec, "eval": EvalSpec, "lr": LRSpec, "bench": BenchSpec,
             "execution": ExecutionSpec, "report": ReportSpec}
_TOP = ("name", "description", "hardware", "seeds", "budget", "shape", "train", *_SECTIONS, "inspect")


def parse_spec(toml_text: str, *, source: str = "<spec>") -> StudySpec:
    """Validate a spec given as TOML text; errors are `SpecError` naming source, line and key path."""
    try:
        raw = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"not valid TOML: {exc}", source=source) from None
    except (ValueError, RecursionError) as exc:  # a 5000-digit integer, or arrays nested thousands deep
        raise SpecError(f"not readable TOML ({type(exc).__name__}: {str(exc).split(';')[0]})", source=source) from None
    try:
        return _parse(raw, source=source, toml_text=toml_text)
    except SpecError as exc:
        raise exc.located(source=source, text=toml_text) from None


def load_spec(path: str | os.PathLike) -> StudySpec:
    """Read and validate a spec file (FileNotFoundError when missing; a UserError naming the file when
    it is not a regular file, larger than 16 MiB or not UTF-8)."""
    return parse_spec(read_text(path, what="study spec"), source=str(path))


def _parse(raw: dict, *, source: str, toml_text: str) -> StudySpec:
    unknown = [k for k in raw if k not in _TOP]
    if unknown:
        raise SpecError(f"unknown key {unknown[0]!r}; expected one of {', '.join(_TOP)}", key=unknown[0])
    top = {}
    for key, check, default in (
        ("name", text(NAME_PATTERN, what="a name of letters, digits, '-', '_' or '.'"), None),
        ("description", text(what="a string"), ""),
        ("hardware", text(what="'measured' or a hardware name"), "measured"),
        ("seeds", listed(integer(0, (1 << 63) - 1, why="a run's seed is below 2**63"), "seeds"), (0,)),
    ):
        if key not in raw:
            if default is None:
                raise SpecError("missing required key (a name for the study)", key=key)
            top[key] = default
            continue
        top[key] = check_value(check, raw[key], key=key)
    from depthwidth.machine import MEASURED, hardware_choice
    from depthwidth.shapes.hardware import HARDWARE

    try:
        hardware = hardware_choice(top["hardware"], argument="hardware")
    except UserError as exc:
        raise SpecError(str(exc).removeprefix("hardware: "), key="hardware") from None
    if hardware != MEASURED and hardware not in HARDWARE:
        raise SpecError(f"{top['hardware']!r}: a study's hardware is a name of `depthwidth hw list` or "
                        f"{MEASURED!r} (this machine's profile), not a profile file", key="hardware")
    sections = {name: build(cls, raw.get(name, {}), key=name) for name, cls in _SECTIONS.items()}
    sections["train"] = train_section(raw.get("train", {}), data=sections["data"], eval=sections["eval"])
    sections["inspect"] = build(InspectSpec, raw["inspect"], key="inspect") if "inspect" in raw else None
    budgets = tuple(build(BudgetSpec, t, key=f"budget[{i}]")
                    for i, t in enumerate(check_tables(_tables(raw, "budget"), "budget")))
    shapes = tuple(build(ShapeSpec, t, key=f"shape[{i}]")
                   for i, t in enumerate(check_tables(_tables(raw, "shape"), "shape")))
    if not budgets and not shapes:
        raise SpecError("a study needs at least one [[budget]] or [[shape]] table", key="budget")
    train, data = sections["train"], sections["data"]
    if train.tokens is None and train.steps is None and train.tokens_per_param is None and (
            shapes or any(b.flops is None for b in budgets)):
        raise SpecError("give the training budget: tokens, steps or tokens_per_param", key="train")
    if train.tokens_per_param is not None and shapes:
        raise SpecError("tokens_per_param needs a [[budget]] target for every shape; explicit [[shape]] "
                        "tables need train.tokens or train.steps", key="train.tokens_per_param")
    if train.tokens is not None and train.tokens < data.seq_len * data.batch_size:
        raise SpecError(f"{train.tokens} tokens is less than one batch (batch_size * seq_len = "
                        f"{data.batch_size * data.seq_len})", key="train.tokens")
    _check_lr(sections["lr"], train=train, seeds=top["seeds"])
    model = sections["model"]
    max_len = model.max_seq_len or data.seq_len
    if data.seq_len > max_len:
        raise SpecError(f"data.seq_len={data.seq_len} exceeds the position table ({max_len})",
                        key="model.max_seq_len")
    bench = sections["bench"]
    if bench.enabled:
        for key, values, extra in (("prompt_lens", bench.prompt_lens, 0), ("contexts", bench.contexts, 1)):
            if values and max(values) + extra > max_len:
                raise SpecError(f"{max(values)}{' + 1 (the decoded token)' if extra else ''} exceeds the models' "
                                f"max_seq_len={max_len} (set model.max_seq_len)", key=f"bench.{key}")
    spec = StudySpec(name=top["name"], description=top["description"], hardware=top["hardware"],
                     seeds=tuple(sorted(top["seeds"])), budgets=budgets, shapes=shapes, source=source,
                     text=toml_text, **sections)
    check_study_sizes(spec)
    return spec


def _check_lr(lr: LRSpec, *, train: TrainSpec, seeds) -> None:
    """What [lr] needs from the rest of the spec: transfer needs a group whose parametrization transfers."""
    from depthwidth.study.lr_search import TRANSFERS

    if lr.transfer_from is None:
        return
    levels = [level.get("parametrization", stored_value(train, "parametrization")) for level in train.levels()]
    if not any(p in TRANSFERS for p in levels):
        raise SpecError(f"transfer_from reuses one shape's learning rate, which only holds under a parametrization "
                        f"that transfers ({', '.join(TRANSFERS)}); this study trains under {', '.join(levels)} "
                        "(set train.parametrization)", key="lr.transfer_from")
    if lr.transfer_seeds is not None and lr.transfer_seeds < len(seeds):
        raise SpecError(f"transfer_seeds={lr.transfer_seeds} is fewer than the study's {len(seeds)} seeds",
                        key="lr.transfer_seeds")


def _tables(raw: dict, key: str) -> list:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise SpecError(f"expected an array of tables ([[{key}]]), got a single value or table", key=key)
    return value


__all__ = ["BenchSpec", "BudgetSpec", "DataSpec", "EvalSpec", "ExecutionSpec", "InspectSpec", "LRSpec", "ModelSpec",
           "ShapeSpec", "StudySpec", "TrainSpec", "SpecError", "load_spec", "parse_spec"]
