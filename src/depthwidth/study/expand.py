"""Spec -> runs. Every run is identified by the sha256 of its canonical config (`config_hash`): the
shape, the data (corpus content hash included), the training settings, the learning rate and the seed
for a training run; the shape, the benchmark settings and the hardware for a benchmark run. Execution
settings (threads, attempts, executor) are not part of it. So adding a seed, a learning rate or a budget
to a spec adds runs and reuses every finished one, and editing a corpus file makes new runs instead of
silently reusing old ones.

Budget groups: each [[budget]] is expanded into a family by the planner and is one group; explicit
[[shape]] tables form the group "shapes". Within a group every run has the same token budget: train.tokens
or train.steps * batch_size * seq_len, or with train.tokens_per_param r the group's parameter *target*
times r (not each member's own count, so members of one family train on exactly the same tokens).
A study factor (`[train] parametrization = ["sp", "completep"]`) makes one group per budget and value,
labelled `<budget>-<value>`.

Learning-rate trials: with `[lr] search = "grid"` every trial is a run of the expansion. With
`search = "bracket"` or `transfer_from` the expansion holds the starting trials only (for a transfer
group: the proxy's); the rest are proposed as results arrive (`depthwidth.study.lr_plan`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from depthwidth.artifact.config import stored_value
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.study.horizons import branch_runs, horizon_groups, horizon_label, split_horizon
from depthwidth.study.lr_search import GroupMode, across_groups, group_mode
from depthwidth.study.preflight import check_runs
from depthwidth.study.schema import SpecError
from depthwidth.study.run_config import BENCH_FORMAT, config_hash, train_run_config
from depthwidth.study.spec import BudgetSpec, StudySpec

EXPLICIT_GROUP = "shapes"


@dataclass(frozen=True, kw_only=True, slots=True)
class DataInfo:
    """What expansion needs to know about the data (read once, before anything runs)."""

    corpus_hash: str
    vocab_size: int
    train_tokens: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    label: str
    tokens: int  # training tokens of every run in the group
    shapes: tuple[Shape, ...]
    target: dict  # what the group aims at ({"params": ..., "non_embedding": ...} or {"flops": ...}); {} for explicit
    notes: tuple[str, ...] = ()  # planner remarks: members dropped and why
    overrides: dict = field(default_factory=dict)  # the group's factor values ({"parametrization": "sp"})
    shares: dict = field(default_factory=dict)  # an equal-time budget: shape label -> its TimeShare

    def tokens_for(self, shape: Shape) -> int:
        """The training tokens of `shape` in this group: the group's, or its share of an equal time."""
        return self.shares[shape.label()].tokens if self.shares else self.tokens

    @property
    def horizon(self) -> tuple[str, float] | None:
        """(parent group, fraction) of a horizon group (`depthwidth.study.horizons`); None otherwise."""
        return split_horizon(self.label)

    def to_dict(self) -> dict:
        out = {"label": self.label, "tokens": self.tokens, "target": self.target, "notes": list(self.notes),
               "shapes": [s.label() for s in self.shapes], "overrides": dict(self.overrides)}
        if self.shares:
            out["time"] = {label: share.to_dict() for label, share in self.shares.items()}
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    run_id: str
    kind: str  # "train" | "bench"
    group: str
    shape: Shape
    lr: float | None
    seed: int | None
    lr_trials: int | None
    config: dict = field(repr=False)
    parent: str | None = None  # a cooldown branch: the run id of the run that trains it (`study.horizons`)
    horizon: float | None = None  # ... and its fraction of that run's steps

    @property
    def short_id(self) -> str:
        return self.run_id[:10]

    def label(self) -> str:
        if self.kind == "bench":
            return f"{self.shape.label()} bench"
        tail = f" @{self.horizon:g}" if self.horizon is not None else ""
        return f"{self.shape.label()} lr={self.lr:.3g} seed={self.seed}{tail}"

    def to_row(self) -> dict:
        return {"run_id": self.run_id, "kind": self.kind, "group": self.group, "shape_label": self.shape.label(),
                "lr": self.lr, "seed": self.seed, "lr_trials": self.lr_trials, "config": self.config}


@dataclass(frozen=True, kw_only=True, slots=True)
class Expansion:
    spec: StudySpec
    data: DataInfo
    groups: tuple[Group, ...]
    runs: tuple[Run, ...]
    modes: dict = field(default_factory=dict)  # group label -> GroupMode (how its learning rates are chosen)

    @property
    def train_runs(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.kind == "train")

    @property
    def bench_runs(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.kind == "bench")

    def to_dict(self) -> dict:
        return {"name": self.spec.name, "groups": [g.to_dict() | {"lr": self.modes[g.label].to_dict()}
                                                   for g in self.groups],
                "runs": [{"run_id": r.run_id, "kind": r.kind, "group": r.group, "label": r.label()}
                         for r in self.runs],
                "data": {"corpus_hash": self.data.corpus_hash, "vocab_size": self.data.vocab_size,
                         "train_tokens": self.data.train_tokens}}


def expand(spec: StudySpec, *, data: DataInfo | None = None) -> Expansion:
    """All runs of a spec. Reads the corpus once (`read_data`) unless `data` is given; every problem is a
    SpecError naming the spec's file and key, a run the trainer would refuse included (`preflight`)."""
    try:
        data = data or read_data(spec)
        groups = _groups(spec, data)
    except SpecError as exc:
        raise exc.located(source=spec.source, text=spec.text) from None
    runs: dict[str, Run] = {}
    modes = _modes(spec, groups)
    for group in groups:
        mode = modes[group.label]
        if group.horizon is not None:
            continue  # its runs are the branches of its parent group's (below)
        for shape in group.shapes:
            if mode.kind == "transfer" and shape.label() != mode.proxy:
                continue  # trained at the proxy's learning rate once its search is done
            for seed in mode.seeds:
                for lr in spec.lr.values(shape.d_model):
                    run = train_run(spec, data=data, group=group, shape=shape, lr=lr, seed=seed,
                                    lr_trials=mode.max_trials)
                    runs.setdefault(run.run_id, run)
    for run in with_branches(list(runs.values()), spec=spec, data=data, groups=groups):
        runs.setdefault(run.run_id, run)
    if spec.bench.enabled:
        for group in groups:
            if group.horizon is not None:
                continue
            for shape in group.shapes:
                config = bench_config(spec, shape=shape)
                run_id = config_hash(config)
                runs.setdefault(run_id, Run(run_id=run_id, kind="bench", group=group.label, shape=shape, lr=None,
                                            seed=None, lr_trials=None, config=config))
    expansion = Expansion(spec=spec, data=data, groups=groups, runs=tuple(runs.values()), modes=modes)
    check_runs(expansion)  # what train() would refuse of a run's shape and settings (study/preflight.py)
    return expansion


def with_branches(runs: list[Run], *, spec: StudySpec, data: DataInfo, groups) -> list[Run]:
    """`runs` and, after each parent with horizons, its cooldown branches (`depthwidth.study.horizons`)."""
    from depthwidth.study.run_config import train_config_of

    by_label = {g.label: g for g in groups}

    def stored(run: Run, branch, fraction: float) -> tuple[str, dict]:
        config = train_run_config(shape=run.shape.to_dict(), corpus_hash=data.corpus_hash, config=branch,
                                  init_hash=run.config.get("init_hash"))
        if "budget" in run.config:  # an equal-time run's branch: that fraction of its time
            share = by_label[horizon_label(run.group, fraction)].shares[run.shape.label()]
            config["budget"] = share.to_dict()
        return config_hash(config), config

    out = []
    for run in runs:
        out.append(run)
        if run.kind == "train" and run.parent is None and run.config["train"].get("horizons"):
            out += branch_runs(run, groups=by_label, config_of=lambda r: train_config_of(r.config),
                               run_config_of=stored)
    return out


def _modes(spec: StudySpec, groups) -> dict[str, GroupMode]:
    """Each group's `GroupMode`; a transfer group without the proxy shape takes it from the group that has
    it (`lr_search.across_groups`: one proxy tunes every scale)."""
    modes, shapes = {}, {}
    for group in groups:
        parametrization = group.overrides.get("parametrization", stored_value(spec.train, "parametrization"))
        shapes[group.label] = {s.label(): count_params(s).total for s in group.shapes}
        modes[group.label] = group_mode(spec.lr, seeds=spec.seeds, parametrization=parametrization,
                                        shapes=shapes[group.label])
    modes = across_groups(modes, shapes, spec.lr.transfer_from)
    for group in groups:
        mode = modes[group.label]
        if mode.kind == "transfer" and mode.proxy is None:
            raise SpecError(f"{spec.lr.transfer_from!r} is not a shape of the group {group.label!r} nor of another "
                            f"group under {mode.parametrization}; its shapes are {', '.join(shapes[group.label])} "
                            "(or give \"smallest\")", key="lr.transfer_from").located(source=spec.source,
                                                                                        text=spec.text)
    return modes


def train_run(spec: StudySpec, *, data: DataInfo, group: Group, shape: Shape, lr: float, seed: int,
              lr_trials: int | None) -> Run:
    """One training run of a group: its canonical config and id."""
    config = train_config(spec, data=data, shape=shape, tokens=group.tokens_for(shape), lr=lr, seed=seed,
                          overrides=group.overrides)
    if group.shares:  # what the tokens were predicted from: part of the run's identity
        config["budget"] = group.shares[shape.label()].to_dict()
    return Run(run_id=config_hash(config), kind="train", group=group.label, shape=shape, lr=lr, seed=seed,
               lr_trials=lr_trials, config=config)


def read_data(spec: StudySpec) -> DataInfo:
    """Tokenize (or reuse the cached tokens of) the spec's corpus, split as every run splits it, and
    check what each run would check: one training batch fits, and so do the validation windows of every
    slice (`eval.windows` windows of seq_len + 1 tokens in each slice's validation split)."""
    from depthwidth.data import BatchStream, load_dataset

    d = spec.data
    try:
        dataset = load_dataset(corpus=d.corpus, tokenizer=d.tokenizer, val_fraction=d.val_fraction,
                               test_fraction=spec.train.get("test_fraction") or 0.0)
        stream = BatchStream(dataset, seq_len=d.seq_len, batch_size=d.batch_size, seed=0)
    except (ValueError, FileNotFoundError) as exc:
        raise SpecError(str(exc), key="data.corpus") from None
    try:
        stream.eval_slices(spec.eval.windows)
    except ValueError as exc:
        raise SpecError(str(exc), key="data.seq_len") from None
    return DataInfo(corpus_hash=dataset.corpus_hash, vocab_size=dataset.vocab_size, train_tokens=len(dataset.train))


def train_config(spec: StudySpec, *, data: DataInfo, shape: Shape, tokens: int, lr: float, seed: int,
                 overrides: dict | None = None) -> dict:
    """The canonical config of one training run (`depthwidth.study.run_config`): the shape, the corpus
    content hash and the run's `TrainConfig` as the spec makes it (with its group's factor values)."""
    config = spec.train_config(lr=lr, seed=seed, tokens=tokens, overrides=overrides)
    init_hash = None
    if config.init_from is not None:
        from depthwidth.hfio.weights import content_hash

        init_hash = content_hash(config.init_from)
    return train_run_config(shape=shape.to_dict(), corpus_hash=data.corpus_hash, config=config, init_hash=init_hash)


def bench_config(spec: StudySpec, *, shape: Shape) -> dict:
    b = spec.bench
    half = max(1, shape.max_seq_len // 2)
    return {
        "kind": "bench",
        "format": BENCH_FORMAT,
        "shape": shape.to_dict(),
        "bench": {"prompt_lens": list(b.prompt_lens or (half,)), "contexts": list(b.contexts or (half,)),
                  "batches": list(b.batches),
                  "repeat": b.repeat, "dtype": b.dtype},
        "hardware": spec.hardware,
    }


# ---- groups --------------------------------------------------------------------------------------
def _groups(spec: StudySpec, data: DataInfo) -> tuple[Group, ...]:
    base = _base_shape_fields(spec, data)
    groups = []
    for i, budget in enumerate(spec.budgets):
        groups.append(_budget_group(spec, budget, base=base, key=f"budget[{i}]"))
    groups = _crossed(spec, groups)
    if spec.shapes:
        shapes = []
        for i, s in enumerate(spec.shapes):
            fields = base | {k: v for k, v in (("n_layers", s.n_layers), ("d_model", s.d_model),
                                               ("n_heads", s.n_heads), ("n_kv_heads", s.n_kv_heads),
                                               ("head_dim", s.head_dim), ("d_ff", s.d_ff)) if v is not None}
            try:
                shapes.append(Shape(**fields))
            except ValueError as exc:
                raise SpecError(str(exc), key=f"shape[{i}]") from None
        groups += _crossed(spec, [Group(label=EXPLICIT_GROUP, tokens=_fixed_tokens(spec, key="train"),
                                        shapes=_dedupe(shapes), target={})])
    groups = _with_horizons(spec, data, groups)
    labels = [g.label for g in groups]
    for i, label in enumerate(labels):
        if labels.index(label) != i:
            raise SpecError(f"two budgets share the label {label!r}; give each a distinct label", key=f"budget[{i}]")
    return tuple(groups)


def _with_horizons(spec: StudySpec, data: DataInfo, groups: list[Group]) -> list[Group]:
    """Each group and its horizon groups, when [train] has horizons (`depthwidth.study.horizons`)."""
    if not spec.train.get("horizons"):
        return groups
    lr = spec.lr.values(groups[0].shapes[0].d_model)[0] if groups and groups[0].shapes else 1e-3
    out = []
    for group in groups:  # each group's own config: a factor may change the batch geometry's checks
        config = spec.train_config(lr=lr, seed=spec.seeds[0], tokens=group.tokens, overrides=group.overrides)
        out += horizon_groups([group], config)
    return out


def _crossed(spec: StudySpec, groups: list[Group]) -> list[Group]:
    """Each group once per value of the study's factor (unchanged without one)."""
    levels = spec.train.levels()
    if levels == ({},):
        return groups
    own = next((i for i, b in enumerate(spec.budgets) if b.parametrization is not None), None)
    if own is not None:
        raise SpecError("a budget's own parametrization and a [train] parametrization factor do not combine: give "
                        "one of them", key=f"budget[{own}].parametrization")
    return [replace(g, label=g.label + "".join(f"-{v}" for v in level.values()), overrides=dict(level))
            for g in groups for level in levels]


def _base_shape_fields(spec: StudySpec, data: DataInfo) -> dict:
    m = spec.model
    fields = {k: getattr(m, k) for k in ("ffn", "norm", "bias", "pos", "rope_theta", "parallel_residual",
                                         "norm_position", "final_norm", "tie_embeddings", "norm_eps")}
    fields["max_seq_len"] = m.max_seq_len or spec.data.seq_len
    fields["vocab_size"] = data.vocab_size
    return fields


def _fixed_tokens(spec: StudySpec, *, key: str) -> int:
    t, d = spec.train, spec.data
    if t.steps is not None:
        return t.steps * d.batch_size * d.seq_len
    if t.tokens is None:
        raise SpecError("needs train.tokens or train.steps", key=key)
    return t.tokens


def _budget_group(spec: StudySpec, budget: BudgetSpec, *, base: dict, key: str) -> Group:
    from depthwidth.study.planning import plan_budget

    try:
        planned = plan_budget(budget, base=base, seq_len=spec.data.seq_len)
    except ValueError as exc:
        raise SpecError(str(exc), key=key) from None
    batch = spec.data.batch_size * spec.data.seq_len
    if budget.time_seconds is not None:  # an equal-time budget: each member's tokens in that predicted time
        return _time_group(spec, budget, planned, key=key)
    if planned.tokens is not None:  # a compute budget fixes the tokens
        tokens = planned.tokens
    elif spec.train.tokens_per_param is not None:
        tokens = round(spec.train.tokens_per_param * budget.params)
    else:
        tokens = _fixed_tokens(spec, key="train")
    if tokens < batch:
        raise SpecError(f"the budget gives {tokens} training tokens, less than one batch "
                        f"(batch_size * seq_len = {batch})", key=key)
    overrides = {"parametrization": budget.parametrization} if budget.parametrization is not None else {}
    return Group(label=planned.label, tokens=tokens, shapes=_dedupe(planned.shapes),
                 target=planned.target, notes=planned.notes, overrides=overrides)


def _time_group(spec: StudySpec, budget: BudgetSpec, planned, *, key: str) -> Group:
    from depthwidth.errors import UserError
    from depthwidth.study.timebudget import check_shares, time_shares

    hardware = budget.hardware or spec.hardware
    shapes = _dedupe(planned.shapes)
    try:
        shares = time_shares(shapes, seconds=budget.time_seconds, hardware=hardware, seq_len=spec.data.seq_len,
                             batch_size=spec.data.batch_size, dtype=stored_value(spec.train, "dtype"))
    except UserError as exc:
        raise SpecError(str(exc).removeprefix("budget.hardware: "), key=f"{key}.hardware") from None
    overrides = {"parametrization": budget.parametrization} if budget.parametrization else {}
    check_shares(spec, budget, shapes, shares, key=key, overrides=overrides)
    notes = planned.notes + tuple(
        f"{label}: {share.tokens:,} tokens ({share.steps:,} steps of {share.step_s * 1e3:.4g} ms predicted, "
        f"{share.tokens_per_s:,.0f} tokens/s) in {share.seconds:g} s on {share.source}"
        for label, share in shares.items())
    return Group(label=planned.label, tokens=min(s.tokens for s in shares.values()), shapes=shapes,
                 target=planned.target | {"seconds": budget.time_seconds, "hardware": hardware}, notes=notes,
                 shares=shares, overrides=overrides)


def _dedupe(shapes: list[Shape] | tuple[Shape, ...]) -> tuple[Shape, ...]:
    out: list[Shape] = []
    for s in shapes:
        if s not in out:
            out.append(s)
    return tuple(out)


__all__ = ["DataInfo", "Expansion", "Group", "Run", "bench_config", "expand", "read_data", "train_config",
           "train_run", "with_branches"]
