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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from depthwidth.shapes.shape import Shape
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

    def to_dict(self) -> dict:
        return {"label": self.label, "tokens": self.tokens, "target": self.target, "notes": list(self.notes),
                "shapes": [s.label() for s in self.shapes]}


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

    @property
    def short_id(self) -> str:
        return self.run_id[:10]

    def label(self) -> str:
        if self.kind == "bench":
            return f"{self.shape.label()} bench"
        return f"{self.shape.label()} lr={self.lr:.3g} seed={self.seed}"

    def to_row(self) -> dict:
        return {"run_id": self.run_id, "kind": self.kind, "group": self.group, "shape_label": self.shape.label(),
                "lr": self.lr, "seed": self.seed, "lr_trials": self.lr_trials, "config": self.config}


@dataclass(frozen=True, kw_only=True, slots=True)
class Expansion:
    spec: StudySpec
    data: DataInfo
    groups: tuple[Group, ...]
    runs: tuple[Run, ...]

    @property
    def train_runs(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.kind == "train")

    @property
    def bench_runs(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.kind == "bench")

    def to_dict(self) -> dict:
        return {"name": self.spec.name, "groups": [g.to_dict() for g in self.groups],
                "runs": [{"run_id": r.run_id, "kind": r.kind, "group": r.group, "label": r.label()}
                         for r in self.runs],
                "data": {"corpus_hash": self.data.corpus_hash, "vocab_size": self.data.vocab_size,
                         "train_tokens": self.data.train_tokens}}


def expand(spec: StudySpec, *, data: DataInfo | None = None) -> Expansion:
    """All runs of a spec. Reads the corpus once (`read_data`) unless `data` is given; every problem is a
    SpecError naming the spec's file and key."""
    try:
        data = data or read_data(spec)
        groups = _groups(spec, data)
    except SpecError as exc:
        raise exc.located(source=spec.source, text=spec.text) from None
    runs: dict[str, Run] = {}
    for group in groups:
        for shape in group.shapes:
            lrs = spec.lr.values(shape.d_model)
            for seed in spec.seeds:
                for lr in lrs:
                    config = train_config(spec, data=data, shape=shape, tokens=group.tokens, lr=lr, seed=seed)
                    run_id = config_hash(config)
                    runs.setdefault(run_id, Run(run_id=run_id, kind="train", group=group.label, shape=shape, lr=lr,
                                                seed=seed, lr_trials=len(lrs), config=config))
    if spec.bench.enabled:
        for group in groups:
            for shape in group.shapes:
                config = bench_config(spec, shape=shape)
                run_id = config_hash(config)
                runs.setdefault(run_id, Run(run_id=run_id, kind="bench", group=group.label, shape=shape, lr=None,
                                            seed=None, lr_trials=None, config=config))
    return Expansion(spec=spec, data=data, groups=groups, runs=tuple(runs.values()))


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


def train_config(spec: StudySpec, *, data: DataInfo, shape: Shape, tokens: int, lr: float, seed: int) -> dict:
    """The canonical config of one training run (`depthwidth.study.run_config`): the shape, the corpus
    content hash and the run's `TrainConfig` as the spec makes it."""
    config = spec.train_config(lr=lr, seed=seed, tokens=tokens)
    init_hash = None
    if config.init_from is not None:
        from depthwidth.hf.weights import content_hash

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
        groups.append(Group(label=EXPLICIT_GROUP, tokens=_fixed_tokens(spec, key="train"), shapes=_dedupe(shapes),
                            target={}))
    labels = [g.label for g in groups]
    for i, label in enumerate(labels):
        if labels.index(label) != i:
            raise SpecError(f"two budgets share the label {label!r}; give each a distinct label", key=f"budget[{i}]")
    return tuple(groups)


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
    if planned.tokens is not None:  # a compute budget fixes the tokens
        tokens = planned.tokens
    elif spec.train.tokens_per_param is not None:
        tokens = round(spec.train.tokens_per_param * budget.params)
    else:
        tokens = _fixed_tokens(spec, key="train")
    if tokens < batch:
        raise SpecError(f"the budget gives {tokens} training tokens, less than one batch "
                        f"(batch_size * seq_len = {batch})", key=key)
    return Group(label=planned.label, tokens=tokens, shapes=_dedupe(planned.shapes),
                 target=planned.target, notes=planned.notes)


def _dedupe(shapes: list[Shape] | tuple[Shape, ...]) -> tuple[Shape, ...]:
    out: list[Shape] = []
    for s in shapes:
        if s not in out:
            out.append(s)
    return tuple(out)


__all__ = ["DataInfo", "Expansion", "Group", "Run", "bench_config", "expand", "read_data", "train_config"]
