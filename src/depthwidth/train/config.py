"""`TrainConfig`: everything that decides a training run besides the shape, as plain validated values.

Defaults follow nanoGPT (Karpathy 2022) where it has one: AdamW betas (0.9, 0.95), weight decay 0.1
on matrices only, gradient clipping at 1.0, cosine decay to lr/10 after a linear warmup.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from depthwidth.errors import UserError
from depthwidth.data.dataset import check_fractions
from depthwidth.data.tokenizers import parse_tokenizer_spec
from depthwidth.shapes.checks import check_int

SCHEDULES = ("cosine", "linear", "constant")
DTYPES = ("fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
ATTN_IMPLS = ("sdpa", "eager")


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainConfig:
    """One training protocol. Exactly one of `steps` and `tokens` sets the budget
    (tokens are rounded up to whole steps of batch_size * seq_len tokens)."""

    # data
    corpus: str = "shakespeare"  # named corpus, 'a+b' mixture, or a path to a text file/folder
    tokenizer: str = "byte"  # byte | char | bpe:N
    val_fraction: float = 0.1
    test_fraction: float = 0.0
    seq_len: int = 128
    batch_size: int = 32  # sequences per optimizer step
    micro_batch: int | None = None  # sequences per forward/backward (default batch_size: no accumulation)
    cache_dir: str | None = None  # default $DEPTHWIDTH_CACHE or ~/.cache/depthwidth
    # budget
    steps: int | None = None
    tokens: int | None = None
    # optimizer and schedule
    lr: float = 1e-3
    min_lr: float | None = None  # default lr / 10
    warmup: int = 0  # linear warmup steps
    schedule: str = "cosine"
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    decay_embeddings: bool = False  # norms and biases are never decayed
    grad_clip: float = 1.0  # 0 = no clipping (the norm is still recorded)
    # numerics and execution
    dtype: str = "fp32"  # fp32 | bf16 (autocast) | fp16 (CUDA only)
    device: str = "auto"
    threads: int | None = None  # CPU threads (default: torch's current setting, recorded)
    attn_impl: str = "sdpa"
    dropout: float = 0.0
    seed: int = 0
    # measurement and bookkeeping
    eval_every: int = 0  # steps between intermediate validation points (0: only at the end)
    eval_windows: int = 64  # fixed validation windows per slice
    checkpoint_every: int = 0  # steps between checkpoints when out_dir is given (0: only at the end)
    diverge_factor: float = 4.0  # loss > diverge_factor * ln(vocab) counts as diverged
    peak_flops: float | None = None  # FLOP/s that MFU divides by (default: measured)

    def __post_init__(self) -> None:
        if not isinstance(self.corpus, str) or not self.corpus:
            raise UserError(f"corpus={self.corpus!r} must be a corpus name, a mixture 'a+b' or a path")
        parse_tokenizer_spec(self.tokenizer)
        check_fractions(self.val_fraction, self.test_fraction)
        for name in ("seq_len", "batch_size", "eval_windows"):
            check_int(name, getattr(self, name))
        if self.micro_batch is not None:
            check_int("micro_batch", self.micro_batch)
            if self.batch_size % self.micro_batch:
                raise UserError(f"micro_batch={self.micro_batch} must divide batch_size={self.batch_size}")
        if (self.steps is None) == (self.tokens is None):
            raise UserError(f"steps={self.steps!r}, tokens={self.tokens!r}: give exactly one of steps and tokens")
        if self.steps is not None:
            check_int("steps", self.steps)
        if self.tokens is not None:
            check_int("tokens", self.tokens)
        for name in ("lr", "beta1", "beta2", "eps", "diverge_factor"):
            _number(name, getattr(self, name), low=0.0, low_open=True)
        for name in ("beta1", "beta2"):
            if not getattr(self, name) < 1:
                raise UserError(f"{name}={getattr(self, name)!r} must be in (0, 1)")
        if self.min_lr is not None:
            _number("min_lr", self.min_lr, low=0.0)
            if self.min_lr > self.lr:
                raise UserError(f"min_lr={self.min_lr!r} must not exceed lr={self.lr!r}")
        for name in ("weight_decay", "grad_clip"):
            _number(name, getattr(self, name), low=0.0)
        _number("dropout", self.dropout, low=0.0)
        if not self.dropout < 1:
            raise UserError(f"dropout={self.dropout!r} must be in [0, 1)")
        for name in ("warmup", "eval_every", "checkpoint_every"):
            check_int(name, getattr(self, name), 0)
        if self.warmup >= self.total_steps and self.warmup:
            raise UserError(f"warmup={self.warmup} must be fewer than the {self.total_steps} training steps")
        for name, allowed in (("schedule", SCHEDULES), ("dtype", DTYPES), ("device", DEVICES),
                              ("attn_impl", ATTN_IMPLS)):
            if getattr(self, name) not in allowed:
                raise UserError(f"{name}={getattr(self, name)!r} is not allowed; expected one of {', '.join(allowed)}")
        if not isinstance(self.decay_embeddings, bool):
            raise UserError(f"decay_embeddings={self.decay_embeddings!r} must be true or false")
        if self.threads is not None:
            check_int("threads", self.threads)
        check_int("seed", self.seed, 0)
        if self.seed >= 1 << 63:
            raise UserError(f"seed={self.seed} must be below 2**63")
        if self.peak_flops is not None:
            _number("peak_flops", self.peak_flops, low=0.0, low_open=True)

    # ---- derived ---------------------------------------------------------------------------
    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def total_steps(self) -> int:
        if self.steps is not None:
            return self.steps
        return max(1, math.ceil(self.tokens / self.tokens_per_step))

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
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"unknown train config field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data)

    def with_(self, **changes: Any) -> TrainConfig:
        return TrainConfig(**{**self.to_dict(), **changes})

    def config_hash(self) -> str:
        """sha256 of the fields that change the numbers a run produces (not where it caches,
        how often it checkpoints, or the MFU denominator)."""
        d = self.to_dict()
        for name in NON_NUMERIC_FIELDS:
            d.pop(name)
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


#: Fields that may differ between a run and its resumption.
NON_NUMERIC_FIELDS = ("cache_dir", "checkpoint_every", "peak_flops")


def lr_at(config: TrainConfig, step: int) -> float:
    """Learning rate of `step` (0-based): linear warmup over `warmup` steps to `lr`
    ((step + 1) / warmup), then cosine (Loshchilov & Hutter 2017), linear or constant decay
    reaching `final_lr` at the last step."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    if config.schedule == "constant":
        return config.lr
    span = config.total_steps - 1 - config.warmup
    progress = min(1.0, (step - config.warmup) / span) if span > 0 else 1.0
    low = config.final_lr
    if config.schedule == "linear":
        return config.lr - (config.lr - low) * progress
    return low + 0.5 * (1.0 + math.cos(math.pi * progress)) * (config.lr - low)


def _number(name: str, value: Any, *, low: float, low_open: bool = False) -> None:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low)
    if not ok:
        raise UserError(f"{name}={value!r} must be a finite number {'>' if low_open else '>='} {low:g}")
