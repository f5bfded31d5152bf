"""`TrainConfig`: everything that decides a training run besides the shape, as plain validated values.

Defaults follow nanoGPT (Karpathy 2022) where it has one: AdamW betas (0.9, 0.95), weight decay 0.1
on matrices only, gradient clipping at 1.0, cosine decay to lr/10 after a linear warmup.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from depthwidth.errors import UserError
from depthwidth.data.specs import check_fractions, parse_tokenizer_spec
from depthwidth.machine.device import DEVICE_SETTINGS, check_device
from depthwidth.model.kernels import ATTN_IMPLS
from depthwidth.shapes.checks import check_int, check_number
from depthwidth.shapes.parametrization import PARAMETRIZATIONS
from depthwidth.shapes.shape import LIMITS as SHAPE_LIMITS

SCHEDULES = ("cosine", "linear", "constant", "wsd")
#: how a WSD run's learning rate falls in its cooldown (`lr_at`); "1-sqrt" is Hägele et al. 2024's best
DECAY_SHAPES = ("1-sqrt", "linear", "cosine")
#: which implementation of torch's AdamW a run steps with (the same update, different float order): "fused",
#: one kernel per parameter group (torch's `fused=True`, on CPU and CUDA), or "foreach", the multi-tensor
#: path every run used on CPU before this field existed (`ADDED_FIELDS`)
ADAMW_KERNELS = ("fused", "foreach")
#: what a run trains in (`dtype`, and `cuda_dtype` on CUDA): fp32, or bf16 autocast. Not fp16: it needs
#: loss scaling, which this trainer does not do (fp16 is a serving-benchmark variant, CUDA only).
DTYPES = ("fp32", "bf16")
DEVICES = DEVICE_SETTINGS  # and "cuda:N" for the N-th GPU
PARALLEL = ("ddp", "fsdp")
#: Upper bounds of what a run may ask for, each far above any real run, so that a typo (steps =
#: 99999999999999999999) is refused when the config is made, not after days of training. Largest
#: published runs, 2024-2025: about 4e13 training tokens, a few million optimizer steps, batches of a
#: few thousand sequences.
LIMITS = {
    "seq_len": (SHAPE_LIMITS["max_seq_len"][0], "the longest context a Shape may have"),
    "batch_size": (1 << 24, "thousands of times the largest published batch"),
    "micro_batch": (1 << 24, "thousands of times the largest published batch"),
    "eval_windows": (1 << 20, "a million validation windows per slice"),
    "steps": (10**9, "a billion optimizer steps; the longest published runs take a few million"),
    "tokens": (10**15, "25x the most tokens any published model was trained on"),
    "warmup": (10**9, "the most steps a run may have"),
    "eval_every": (10**9, "the most steps a run may have"),
    "checkpoint_every": (10**9, "the most steps a run may have"),
    "threads": (1 << 12, "more threads than any machine has cores"),
    "nproc": (1 << 16, "more processes than the largest published training runs used"),
    "tp": (1 << 10, "more tensor-parallel ranks than any published run used"),
    "base_width": (SHAPE_LIMITS["d_model"][0], "the widest d_model a Shape may have"),
    "base_depth": (SHAPE_LIMITS["n_layers"][0], "the deepest stack a Shape may have"),
    "lr": (10.0, "about 100x the largest peak learning rate of AdamW runs and of muP or CompleteP sweeps"),
}


def setting(default: Any, doc: str, *, group: str, metavar: str | None = None,
            choices: tuple[str, ...] | None = None, values: tuple[str, ...] = ()) -> Any:
    """A `TrainConfig` field with its documentation: `doc` (one line, shown by `depthwidth train
    --help` and the study spec docs), the help `group` it belongs to, for strings the allowed
    `choices` (imported from their owner), and for a boolean the string `values` it also takes
    (`--compile auto`). The CLI flags are derived from these fields."""
    return field(default=default, metadata={"doc": doc, "group": group, "metavar": metavar, "choices": choices,
                                            "values": values})


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainConfig:
    """One training protocol. Exactly one of `steps` and `tokens` sets the budget
    (tokens are rounded up to whole steps of batch_size * seq_len tokens). Each field's `doc` and
    help group are in its metadata (`setting`): the `train` CLI and the study spec read them."""

    # data
    corpus: str = setting("shakespeare", "named corpus, a mixture 'a+b', or a path to a text file or folder",
                          group="data", metavar="NAME")
    tokenizer: str = setting("byte", "byte, char, or bpe:N", group="data", metavar="KIND")
    val_fraction: float = setting(0.1, "held-out tail of each slice", group="data")
    test_fraction: float = setting(0.0, "test tail after validation", group="data")
    seq_len: int = setting(128, "context length", group="data", metavar="T")
    batch_size: int = setting(32, "sequences per optimizer step", group="data", metavar="B")
    micro_batch: int | None = setting(None, "sequences per forward/backward (default batch_size: no accumulation)",
                                      group="data", metavar="M")
    cache_dir: str | None = setting(None, "token cache folder (default $DEPTHWIDTH_CACHE or ~/.cache/depthwidth)",
                                    group="data", metavar="DIR")
    init_from: str | None = setting(None, "start from the weights of a local Hugging Face model folder (config.json "
                                    "+ safetensors; its content hash is part of the run)", group="data",
                                    metavar="HF_DIR")
    # budget
    steps: int | None = setting(None, "optimizer steps (give steps or tokens)", group="budget", metavar="N")
    tokens: int | None = setting(None, "training tokens, rounded up to whole steps (give steps or tokens)",
                                 group="budget", metavar="N")
    # optimizer and schedule
    lr: float = setting(1e-3, "peak learning rate", group="optimizer")
    min_lr: float | None = setting(None, "final learning rate (default lr/10)", group="optimizer")
    warmup: int = setting(0, "linear warmup steps", group="optimizer", metavar="STEPS")
    schedule: str = setting("cosine", "learning-rate decay after warmup (wsd: constant, then a cooldown)",
                            group="optimizer", choices=SCHEDULES)
    decay_fraction: float = setting(0.2, "wsd: the share of the steps spent in the final cooldown",
                                    group="optimizer")
    decay_shape: str = setting("1-sqrt", "wsd: the cooldown's shape", group="optimizer", choices=DECAY_SHAPES)
    horizons: tuple[float, ...] | None = setting(
        None, "wsd: fractions of the run's steps, the last 1 (e.g. 0.25,0.5,1): each earlier one is a cooldown "
        "branched from the constant-LR run, with the loss of a run of that length", group="budget",
        metavar="F,F,...")
    beta1: float = setting(0.9, "AdamW beta1", group="optimizer")
    beta2: float = setting(0.95, "AdamW beta2", group="optimizer")
    eps: float = setting(1e-8, "AdamW epsilon", group="optimizer")
    weight_decay: float = setting(0.1, "AdamW weight decay of the matrices", group="optimizer")
    decay_embeddings: bool = setting(False, "also decay the embedding tables (norms and biases never are)",
                                     group="optimizer")
    grad_clip: float = setting(1.0, "max gradient norm, 0 = no clipping (the norm is still recorded)",
                               group="optimizer")
    adamw: str = setting("fused", "AdamW implementation: fused (one kernel per group) or foreach (the multi-tensor "
                         "path); the same update in a different float order", group="optimizer", choices=ADAMW_KERNELS)
    dropout: float = setting(0.0, "dropout probability", group="optimizer")
    # parametrization: how init, learning rates and multipliers scale with width and depth
    parametrization: str = setting("sp", "sp (standard), mup (width), completep (width and depth, alpha=1) or "
                                   "depth-mup (alpha=1/2)", group="parametrization", choices=PARAMETRIZATIONS)
    base_width: int | None = setting(None, "d_model at which the parametrization's LR factors are 1 (default: the "
                                     "shape's own)", group="parametrization", metavar="H")
    base_depth: int | None = setting(None, "n_layers at which the parametrization's LR factors are 1 (default: the "
                                     "shape's own)", group="parametrization", metavar="L")
    # numerics and execution
    dtype: str = setting("fp32", "fp32, or bf16 autocast (no fp16: it needs loss scaling)", group="execution",
                         choices=DTYPES)
    cuda_dtype: str | None = setting(None, "dtype on CUDA (default: bf16 autocast where the GPU has native bf16, "
                                     "else dtype); results record the dtype used", group="execution",
                                     choices=DTYPES)
    device: str = setting("auto", "auto (cuda if available, else cpu), cpu, cuda or cuda:N", group="execution",
                          metavar="DEVICE")
    deterministic: bool = setting(False, "CUDA: deterministic kernels (CPU runs are always deterministic)",
                                  group="execution")
    compile: bool | str | None = setting(None, "torch.compile the model: on, off, or auto (compile where this "
                                         "machine's measured compile time is paid back within the run; "
                                         "default: on for CUDA, off on CPU)", group="execution", values=("auto",))
    allow_slow_dtype: bool = setting(False, "train in a dtype this device only emulates", group="execution")
    nproc: int = setting(1, "processes of one run (data parallel or sharded)", group="execution", metavar="N")
    parallel: str = setting("ddp", "how the nproc processes share the model", group="execution", choices=PARALLEL)
    tp: int = setting(1, "tensor-parallel ranks (DTensor) among the nproc processes", group="execution",
                      metavar="T")
    reshard: bool = setting(True, "FSDP2: free gathered parameters after forward and gather them again in backward",
                            group="execution")
    threads: int | None = setting(None, "CPU threads (default: torch's current setting, recorded)", group="execution")
    attn_impl: str = setting("sdpa", "attention kernel", group="execution", choices=ATTN_IMPLS)
    seed: int = setting(0, "initialisation, dropout and batch order", group="execution")
    # measurement and bookkeeping
    eval_every: int = setting(0, "steps between intermediate validation points (0: only at the end)",
                              group="measurement", metavar="N")
    eval_windows: int = setting(64, "fixed validation windows per slice", group="measurement", metavar="N")
    checkpoint_every: int = setting(0, "steps between checkpoints of a run folder (0: only at the end)",
                                    group="measurement", metavar="N")
    diverge_factor: float = setting(4.0, "a loss above diverge_factor * ln(vocab) counts as diverged",
                                    group="measurement")
    peak_flops: float | None = setting(None, "FLOP/s that MFU divides by (default: measured)",
                                       group="measurement", metavar="F")

    def __post_init__(self) -> None:
        if not isinstance(self.corpus, str) or not self.corpus:
            raise UserError(f"corpus={self.corpus!r} must be a corpus name, a mixture 'a+b' or a path")
        if self.init_from is not None and (not isinstance(self.init_from, str) or not self.init_from):
            raise UserError(f"init_from={self.init_from!r} must be the path of a Hugging Face model folder")
        parse_tokenizer_spec(self.tokenizer)
        check_fractions(self.val_fraction, self.test_fraction)
        for name in ("seq_len", "batch_size", "eval_windows"):
            check_int(name, getattr(self, name), 1, *LIMITS[name])
        if self.micro_batch is not None:
            check_int("micro_batch", self.micro_batch, 1, *LIMITS["micro_batch"])
            if self.batch_size % self.micro_batch:
                raise UserError(f"micro_batch={self.micro_batch} must divide batch_size={self.batch_size}")
        if (self.steps is None) == (self.tokens is None):
            raise UserError(f"steps={self.steps!r}, tokens={self.tokens!r}: give exactly one of steps and tokens")
        for name in ("steps", "tokens"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1, *LIMITS[name])
        for name in ("lr", "beta1", "beta2", "eps", "diverge_factor"):
            check_number(name, getattr(self, name))
        check_number("lr", self.lr, high=LIMITS["lr"][0], why=LIMITS["lr"][1])
        for name in ("beta1", "beta2"):
            if not getattr(self, name) < 1:
                raise UserError(f"{name}={getattr(self, name)!r} must be in (0, 1)")
        if self.min_lr is not None:
            check_number("min_lr", self.min_lr, low_open=False)
            if self.min_lr > self.lr:
                raise UserError(f"min_lr={self.min_lr!r} must not exceed lr={self.lr!r}")
        for name in ("weight_decay", "grad_clip"):
            check_number(name, getattr(self, name), low_open=False)
        check_number("dropout", self.dropout, low_open=False)
        if not self.dropout < 1:
            raise UserError(f"dropout={self.dropout!r} must be in [0, 1)")
        for name in ("warmup", "eval_every", "checkpoint_every"):
            check_int(name, getattr(self, name), 0, *LIMITS[name])
        if self.warmup >= self.total_steps and self.warmup:
            raise UserError(f"warmup={self.warmup} must be fewer than the {self.total_steps} training steps")
        self._check_schedule()
        for name, allowed in (("schedule", SCHEDULES), ("dtype", DTYPES), ("attn_impl", ATTN_IMPLS),
                              ("adamw", ADAMW_KERNELS),
                              ("parametrization", PARAMETRIZATIONS), ("parallel", PARALLEL)):
            if getattr(self, name) not in allowed:
                raise UserError(f"{name}={getattr(self, name)!r} is not allowed; expected one of {', '.join(allowed)}")
        check_device(self.device)
        if self.cuda_dtype is not None and self.cuda_dtype not in DTYPES:
            raise UserError(f"cuda_dtype={self.cuda_dtype!r} is not allowed; expected {' or '.join(DTYPES)}")
        for name in ("decay_embeddings", "deterministic", "allow_slow_dtype", "reshard"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"{name}={getattr(self, name)!r} must be true or false")
        if self.compile is not None and not isinstance(self.compile, bool) and self.compile != "auto":
            raise UserError(f"compile={self.compile!r} must be true, false or \"auto\" (or unset: on for CUDA, off "
                            "on CPU)")
        for name in ("nproc", "tp"):
            check_int(name, getattr(self, name), 1, *LIMITS[name])
        if self.nproc % self.tp:
            raise UserError(f"tp={self.tp} must divide nproc={self.nproc}")
        for name in ("base_width", "base_depth"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1, *LIMITS[name])
        if self.threads is not None:
            check_int("threads", self.threads, 1, *LIMITS["threads"])
        check_int("seed", self.seed, 0)
        if self.seed >= 1 << 63:
            raise UserError(f"seed={self.seed} must be below 2**63")
        if self.peak_flops is not None:
            check_number("peak_flops", self.peak_flops)

    def _check_schedule(self) -> None:
        """The WSD fields: a cooldown share in (0, 1], a known shape, horizons only under wsd."""
        if self.schedule != "wsd":
            for name in ("decay_fraction", "decay_shape", "horizons"):
                if getattr(self, name) != _DEFAULTS[name]:
                    raise UserError(f"{name}={getattr(self, name)!r} needs schedule='wsd' (it is {self.schedule!r})")
            return
        check_number("decay_fraction", self.decay_fraction)
        if not self.decay_fraction <= 1:
            raise UserError(f"decay_fraction={self.decay_fraction!r} must be in (0, 1]")
        if self.decay_shape not in DECAY_SHAPES:
            raise UserError(f"decay_shape={self.decay_shape!r} is not allowed; expected one of {', '.join(DECAY_SHAPES)}")
        if self.warmup + decay_steps(self.total_steps, self.decay_fraction) > self.total_steps:
            raise UserError(f"warmup={self.warmup} and a cooldown of {decay_steps(self.total_steps, self.decay_fraction)}"
                            f" steps do not fit in {self.total_steps} steps")
        if self.horizons is None:
            return
        values = self.horizons
        if not isinstance(values, (list, tuple)) or not values or len(values) > MAX_HORIZONS or not all(
                isinstance(h, (int, float)) and not isinstance(h, bool) for h in values):
            raise UserError(f"horizons={values!r} must be a list of at most {MAX_HORIZONS} fractions, the last 1")
        values = tuple(float(h) for h in values)
        if list(values) != sorted(set(values)) or not 0 < values[0] or values[-1] != 1.0:
            raise UserError(f"horizons={list(values)} must increase strictly within (0, 1] and end at 1")
        main_start = self.total_steps - decay_steps(self.total_steps, self.decay_fraction)
        for h in values[:-1]:
            steps = horizon_steps(self.total_steps, h)
            start = steps - decay_steps(steps, self.decay_fraction)
            if steps <= self.warmup or not 1 <= start <= main_start:
                raise UserError(f"horizons: {h:g} of {self.total_steps} steps is {steps} steps, too short for a "
                                f"branch with warmup={self.warmup} and decay_fraction={self.decay_fraction:g} (it "
                                "needs more steps than the warmup and at least one step before its cooldown)")
        if len({horizon_steps(self.total_steps, h) for h in values}) != len(values):
            raise UserError(f"horizons={list(values)} round to the same step count at {self.total_steps} steps")
        object.__setattr__(self, "horizons", values)

    # ---- derived ---------------------------------------------------------------------------
    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def total_steps(self) -> int:
        if self.steps is not None:
            return self.steps
        return max(1, -(-self.tokens // self.tokens_per_step))  # integer ceiling: exact for any count

    @property
    def micro_batch_size(self) -> int:
        return self.micro_batch or self.batch_size

    @property
    def accumulation(self) -> int:
        return self.batch_size // self.micro_batch_size

    @property
    def final_lr(self) -> float:
        return self.lr / 10 if self.min_lr is None else self.min_lr

    # ---- conversion ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (`horizons` as a list, as it reads back from JSON)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"unknown train config field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data)

    def with_(self, **changes: Any) -> TrainConfig:
        return type(self)(**{**self.to_dict(), **changes})

    def config_hash(self) -> str:
        """sha256 of the fields that change the numbers a run produces (not where it caches,
        how often it checkpoints, or the MFU denominator)."""
        d = identity_dict(self)
        for name in NON_NUMERIC_FIELDS:
            d.pop(name)
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


#: Fields added after runs were stored: left out of a run's identity (`config_hash`, a study's run id)
#: while at their default, so every earlier run keeps its hash. `init_from` names a folder; the trainer
#: and the study add that folder's content hash (`depthwidth.hfio.weights.content_hash`) to the identity.
OMITTED_AT_DEFAULT = ("init_from", "parametrization", "base_width", "base_depth", "compile", "deterministic",
                      "nproc", "parallel", "tp", "reshard", "cuda_dtype", "decay_fraction", "decay_shape", "horizons")
_DEFAULTS = {f.name: f.default for f in fields(TrainConfig)}
#: Fields added after runs were stored whose default is not what those runs did: left out of a run's
#: identity while at the value given here (what every run before did), so an earlier run keeps its hash and a
#: run at the new default gets a new one; `with_added_fields` fills them in when a stored config is read back.
ADDED_FIELDS = {"adamw": "foreach"}


def with_added_fields(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored train-config dict with the `ADDED_FIELDS` it predates set to what it did then."""
    missing = {k: v for k, v in ADDED_FIELDS.items() if k not in stored}
    return {**stored, **missing} if missing else stored


def stored_value(train: dict[str, Any], name: str) -> Any:
    """The value of field `name` in a stored config dict (a study's run config, a result's config): the
    dict's own value, or the field's default where the dict leaves it out (`OMITTED_AT_DEFAULT` fields are
    not stored while at their default) or holds None for a field whose default is not None."""
    value = train.get(name)
    if value is None and name in ADDED_FIELDS:
        return ADDED_FIELDS[name]
    return _DEFAULTS[name] if value is None else value


def identity_dict(config: TrainConfig) -> dict[str, Any]:
    """`config.to_dict()` without the `OMITTED_AT_DEFAULT` fields that are at their default, nor the
    `ADDED_FIELDS` at the value every earlier run had."""
    return {k: v for k, v in config.to_dict().items()
            if not (k in OMITTED_AT_DEFAULT and v == _DEFAULTS[k]) and not (k in ADDED_FIELDS and v == ADDED_FIELDS[k])}


#: Fields that may differ between a run and its resumption. `allow_slow_dtype` only permits a slow run.
NON_NUMERIC_FIELDS = ("cache_dir", "checkpoint_every", "peak_flops", "allow_slow_dtype")
#: Fields set by whoever executes a run (a study's executor) rather than by what the run is: a study's
#: run identity leaves them out. `threads` changes float summation order on CPU, so a run resumed on
#: another thread count is still refused by the trainer; so do `nproc`, `parallel` and `tp` (how many
#: processes share one run and how), which change only the order of float sums.
EXECUTION_FIELDS = (*NON_NUMERIC_FIELDS, "threads", "nproc", "parallel", "tp", "reshard")


#: the most horizons one run may branch (each is a cooldown run of its own)
MAX_HORIZONS = 16


def decay_steps(total_steps: int, fraction: float) -> int:
    """Steps of a WSD run's cooldown: `fraction` of the run, rounded, at least 1."""
    return max(1, round(fraction * total_steps))


def horizon_steps(total_steps: int, fraction: float) -> int:
    """Steps of the run that horizon `fraction` stands for (rounded, at least 1)."""
    return max(1, round(fraction * total_steps))
