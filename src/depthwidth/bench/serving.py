"""Serving benchmark: time to first token, per-token decode latency, batched throughput, KV-cache
bytes and int8 quantization, each latency next to its roofline prediction for this machine.

Method (what a serving engineer measures, e.g. vLLM's benchmark_latency / MLPerf inference):
- prefill: batch 1, a random prompt of each length into an empty KV cache; the time of that forward
  pass is the time to first token (our model computes the logits of every prompt position, so the
  prediction counts the LM head for all of them: `logits="all"`).
- decode: batch 1, the cache filled to each context length once (untimed); each repetition rewinds
  the cache to that length and times one single-token step, so every sample sees exactly `context`
  cached tokens.
- throughput: `batch` sequences, a prompt of `throughput_prompt_len`, then `new_tokens` greedy tokens
  with the cache (prefill included); tokens/s = batch * new_tokens / seconds.
- `warmup` untimed runs, then `repeat` timed ones: median, quartiles and min/max.
Predictions come from `shapes.latency` (`predict_prefill`, `predict_decode`) with the hardware profile
measured on this machine (`depthwidth.machine`, "measured") or any other hardware argument; a generation
is predicted as one prefill plus its decode steps.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from depthwidth.bench.results import BenchResult, KVCacheCheck, LatencyPoint, ThroughputPoint
from depthwidth.bench.target import load_target, variant_model
from depthwidth.bench.timing import time_call
from depthwidth.errors import UserError
from depthwidth.machine import (
    CPU_DTYPES,
    MEASURED,
    cached_profile,
    capabilities,
    device_name,
    is_measured,
    measured_hardware,
    resolve_hardware,
    torch_threads,
)
from depthwidth.model.cache import KVCache
from depthwidth.model.generate import generate, new_cache
from depthwidth.shapes.hardware import HardwareSpec
from depthwidth.shapes.shape import Shape

DTYPES = CPU_DTYPES  # the benchmark runs on the CPU, where fp16 is about 1 GFLOP/s
QUANTIZE = (None, "int8")
#: prompt and context lengths measured unless given (those that fit the model's position table)
DEFAULT_LENGTHS = (16, 64, 256)
#: Progress callback: (what is being measured, steps done, steps in all).
Progress = Callable[[str, int, int], None]


def _check_lengths(name: str, value: Any, *, allow_empty: bool = False) -> None:
    if not isinstance(value, tuple) or (not value and not allow_empty):
        raise UserError(f"{name}={value!r} must be a non-empty tuple of positive integers")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise UserError(f"{name} contains {v!r}; every entry must be a positive integer")
    if len(set(value)) != len(value):
        raise UserError(f"{name}={value!r} has repeated entries")


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchConfig:
    """What to measure and how.

    Fields:
        prompt_lens: prompt lengths for time to first token (batch 1); None: those of
            DEFAULT_LENGTHS that fit the model (`fitted`).
        contexts: cached-token counts for per-token decode latency (batch 1); None: likewise.
        batches: batch sizes for generation throughput (may be empty to skip it).
        dtype: "fp32" | "bf16" weights and activations (never fp16 on CPU).
        quantize: None | "int8": also measure an int8 dynamically quantized copy (fp32 activations).
        repeat: timed repetitions per point (>= 1).
        warmup: untimed runs before them (>= 0).
        threads: torch intra-op threads during the run; None keeps the current setting.
        new_tokens: tokens generated per sequence for throughput.
        throughput_prompt_len: prompt length for throughput.
        attn_impl: "sdpa" | "eager".
        seed: seeds the random weights (shape targets) and the random prompts.
        group_size: quantization group size the lint checks divisibility against.
    """

    prompt_lens: tuple[int, ...] | None = None
    contexts: tuple[int, ...] | None = None
    batches: tuple[int, ...] = (1, 4, 16, 64)
    dtype: str = "fp32"
    quantize: str | None = None
    repeat: int = 5
    warmup: int = 2
    threads: int | None = None
    new_tokens: int = 16
    throughput_prompt_len: int = 16
    attn_impl: str = "sdpa"
    seed: int = 0
    group_size: int = 128

    def __post_init__(self) -> None:
        for name in ("prompt_lens", "contexts", "batches"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        for name in ("prompt_lens", "contexts"):
            if getattr(self, name) is not None:
                _check_lengths(name, getattr(self, name))
        _check_lengths("batches", self.batches, allow_empty=True)
        if self.dtype not in DTYPES:
            raise UserError(
                f"dtype={self.dtype!r} is not allowed; expected one of {', '.join(DTYPES)} (no fp16 on CPU)"
            )
        if self.quantize not in QUANTIZE:
            raise UserError(f"quantize={self.quantize!r} is not allowed; expected None or 'int8'")
        for name, low in (("repeat", 1), ("warmup", 0), ("new_tokens", 1), ("throughput_prompt_len", 1),
                          ("group_size", 1), ("seed", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UserError(f"{name}={value!r} must be an integer >= {low}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise UserError(f"threads={self.threads!r} must be a positive integer or None")
        if self.attn_impl not in ("sdpa", "eager"):
            raise UserError(f"attn_impl={self.attn_impl!r} is not allowed; expected sdpa or eager")

    @property
    def variants(self) -> tuple[str, ...]:
        """Model variants measured side by side: the dtype, plus int8 when quantizing."""
        return (self.dtype, "int8") if self.quantize == "int8" and self.dtype != "int8" else (self.dtype,)

    def fitted(self, shape: Shape) -> BenchConfig:
        """This config with default lengths (None) replaced by the DEFAULT_LENGTHS that fit `shape`'s
        position table (prompts up to max_seq_len, contexts up to max_seq_len - 1), then checked."""
        limit = shape.max_seq_len
        changes = {}
        if self.prompt_lens is None:
            changes["prompt_lens"] = tuple(n for n in DEFAULT_LENGTHS if n <= limit) or (limit,)
        if self.contexts is None:
            if limit < 2:
                raise UserError(f"max_seq_len={limit} leaves no room for a decode step after a cached token")
            changes["contexts"] = tuple(n for n in DEFAULT_LENGTHS if n < limit) or (limit - 1,)
        config = replace(self, **changes) if changes else self
        config.check_fits(shape)
        return config

    def check_fits(self, shape: Shape) -> None:
        """ValueError naming the field when a length does not fit the model's position table."""
        if self.prompt_lens is None or self.contexts is None:
            raise UserError("prompt_lens/contexts are None: call fitted(shape) to choose them for a model")
        if not shape.causal or not shape.lm_head:
            raise UserError(
                f"serving needs a causal decoder with an LM head (kind={shape.kind!r}, lm_head={shape.lm_head})"
            )
        limit = shape.max_seq_len
        if max(self.prompt_lens) > limit:
            raise UserError(f"prompt_lens: {max(self.prompt_lens)} tokens exceed max_seq_len={limit} of the model")
        if max(self.contexts) + 1 > limit:
            raise UserError(
                f"contexts: a decode step after {max(self.contexts)} cached tokens needs "
                f"{max(self.contexts) + 1} positions, more than max_seq_len={limit} of the model"
            )
        if self.batches and self.throughput_prompt_len + self.new_tokens > limit:
            raise UserError(
                f"throughput_prompt_len + new_tokens = {self.throughput_prompt_len + self.new_tokens} "
                f"exceeds max_seq_len={limit} of the model"
            )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("prompt_lens", "contexts", "batches"):
            out[name] = None if out[name] is None else list(out[name])
        return out


def machine_hardware(*, threads: int, dtypes: tuple[str, ...] | None = None) -> HardwareSpec:
    """This machine's measured `HardwareSpec` at `threads` threads: its stored profile when it fits,
    else a measurement saved for the next run (`machine.cached_profile`, with the per-op cost of our
    eager block), read as "measured" is everywhere (`machine.measured_hardware`: torch.mm rates, the
    path `nn.Linear` takes). `dtypes` default to those native on this machine."""
    from depthwidth.bench.hw import eager_block_overhead

    profile = cached_profile(threads=threads, dtypes=dtypes, block_overhead=eager_block_overhead)
    return measured_hardware(profile)


def bench_hardware(hardware: HardwareSpec | str, *, threads: int, dtype: str = "fp32") -> HardwareSpec:
    """The spec a bench predicts with: a `HardwareSpec` as it is; "measured" -> `machine_hardware`
    (measured now when no stored profile fits, with a peak for `dtype`); a table name or a profile
    path -> `machine.resolve_hardware`."""
    if isinstance(hardware, str) and is_measured(hardware):
        dtypes = tuple(dict.fromkeys((*capabilities("cpu").dtypes, dtype)))
        return machine_hardware(threads=threads, dtypes=dtypes)
    return resolve_hardware(hardware, argument="hardware", threads=threads)


def _prompt(shape: Shape, *, batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, shape.vocab_size, (batch, length), generator=gen)  # (B, T)


def _kv_check(cache: KVCache, *, shape: Shape, variant: str, batch: int) -> KVCacheCheck:
    from depthwidth.shapes.memory import kv_cache_bytes_per_token

    cached = [t[:, :, : cache.length] for t in cache.keys + cache.values]  # each (B, Hk, tokens, Dh)
    measured = sum(t.numel() * t.element_size() for t in cached)
    dtype = {torch.float32: "fp32", torch.bfloat16: "bf16"}[cache.keys[0].dtype]
    analytic = kv_cache_bytes_per_token(shape, dtype=dtype) * cache.length * batch
    return KVCacheCheck(variant=variant, dtype=dtype, batch=batch, tokens=cache.length,
                        measured_bytes=measured, analytic_bytes=analytic)


class _Predictor:
    """Roofline predictions for one shape on the measured hardware profile (memoised)."""

    def __init__(self, shape: Shape, hardware: Any, *, attn_impl: str) -> None:
        self.shape, self.hardware, self.attn_impl = shape, hardware, attn_impl
        self._memo: dict[tuple, float] = {}

    def _dtype(self, variant: str) -> str:
        # int8 dynamic quantization keeps fp32 activations and KV cache; the roofline's int8 rate is
        # used when the profile has one, otherwise fp32 (weights-only saving is then not predicted)
        if variant == "int8" and "int8" not in self.hardware.peak_flops:
            return "fp32"
        return variant

    def prefill(self, *, variant: str, batch: int, prompt_len: int) -> float:
        from depthwidth.shapes.latency import predict_prefill

        key = ("p", variant, batch, prompt_len)
        if key not in self._memo:
            self._memo[key] = predict_prefill(self.shape, hardware=self.hardware, batch=batch,
                                              prompt_len=prompt_len, dtype=self._dtype(variant),
                                              attn_impl=self.attn_impl, logits="all").total_s
        return self._memo[key]

    def decode(self, *, variant: str, batch: int, context: int) -> float:
        from depthwidth.shapes.latency import predict_decode

        key = ("d", variant, batch, context)
        if key not in self._memo:
            self._memo[key] = predict_decode(self.shape, hardware=self.hardware, batch=batch,
                                             context=context, dtype=self._dtype(variant),
                                             attn_impl=self.attn_impl).total_s
        return self._memo[key]

    def generation(self, *, variant: str, batch: int, prompt_len: int, new_tokens: int) -> float:
        """One prefill (gives the first token) plus new_tokens - 1 decode steps."""
        total = self.prefill(variant=variant, batch=batch, prompt_len=prompt_len)
        for i in range(new_tokens - 1):
            total += self.decode(variant=variant, batch=batch, context=prompt_len + i)
        return total


class _Session:
    """One bench run's measured points, its random prompts and its progress count."""

    def __init__(self, shape: Shape, config: BenchConfig, progress: Progress | None) -> None:
        self.shape, self.config, self.progress = shape, config, progress
        per_variant = len(config.prompt_lens) + len(config.contexts) + len(config.batches)
        self.total = per_variant * len(config.variants) + (1 if config.quantize else 0)
        self.done = 0
        self.gen = torch.Generator().manual_seed(config.seed)
        self.predictor: _Predictor | None = None
        self.latency: list[LatencyPoint] = []
        self.throughput: list[ThroughputPoint] = []
        self.kv: list[KVCacheCheck] = []

    def tick(self, label: str, *, step: int = 1) -> None:
        self.done += step
        if self.progress is not None:
            self.progress(label, self.done, self.total)

    def prefill(self, model, variant: str) -> None:
        """Time to first token at batch 1 per prompt length: one forward into an emptied cache."""
        for p in self.config.prompt_lens:
            idx = _prompt(self.shape, batch=1, length=p, gen=self.gen)  # (1, p)
            cache = new_cache(model, batch_size=1, max_len=p)
            self._time(model, idx, cache, cached=0, variant=variant, kind="prefill", tokens=p,
                       predicted=self.predictor.prefill(variant=variant, batch=1, prompt_len=p))
            self.tick(f"{variant} prefill {p}")

    def decode(self, model, variant: str) -> None:
        """One single-token step at batch 1 after exactly `context` cached tokens, per context."""
        for c in self.config.contexts:
            cache = new_cache(model, batch_size=1, max_len=c + 1)
            model(_prompt(self.shape, batch=1, length=c, gen=self.gen), cache=cache)  # fill to the context
            self.kv.append(_kv_check(cache, shape=self.shape, variant=variant, batch=1))
            step = _prompt(self.shape, batch=1, length=1, gen=self.gen)  # (1, 1)
            self._time(model, step, cache, cached=c, variant=variant, kind="decode", tokens=c,
                       predicted=self.predictor.decode(variant=variant, batch=1, context=c))
            self.tick(f"{variant} decode @{c}")

    def _time(self, model, idx, cache: KVCache, *, cached: int, variant: str, kind: str, tokens: int,
              predicted: float) -> None:
        """Time `model(idx, cache=cache)` with the cache put back to `cached` tokens before each call."""

        def rewind() -> None:
            cache.length = cached

        timing = time_call(lambda: model(idx, cache=cache), repeat=self.config.repeat, warmup=self.config.warmup,
                           setup=rewind)
        self.latency.append(LatencyPoint(variant=variant, kind=kind, batch=1, tokens=tokens, timing=timing,
                                         predicted_s=predicted))

    def generate(self, model, variant: str) -> None:
        """Tokens/s of a greedy generation with the cache (prefill included), per batch size."""
        cfg = self.config
        p, n = cfg.throughput_prompt_len, cfg.new_tokens
        for batch in cfg.batches:
            idx = _prompt(self.shape, batch=batch, length=p, gen=self.gen)  # (B, p)
            cache = new_cache(model, batch_size=batch, max_len=p + n - 1)

            def rewind(c: KVCache = cache) -> None:
                c.length = 0

            timing = time_call(lambda x=idx, c=cache: generate(model, x, max_new_tokens=n, cache=c), repeat=cfg.repeat,
                               warmup=cfg.warmup, setup=rewind)
            self.kv.append(_kv_check(cache, shape=self.shape, variant=variant, batch=batch))
            predicted = self.predictor.generation(variant=variant, batch=batch, prompt_len=p, new_tokens=n)
            self.throughput.append(ThroughputPoint(variant=variant, batch=batch, prompt_len=p, new_tokens=n,
                                                   timing=timing, predicted_s=predicted))
            self.tick(f"{variant} throughput batch {batch}")


def _environment(config: BenchConfig, *, threads: int) -> dict[str, Any]:
    return {
        "torch": torch.__version__,
        "threads": threads,
        "dtype": config.dtype,
        "variants": list(config.variants),
        "quantized_engine": torch.backends.quantized.engine,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": device_name("cpu"),
    }


def bench(
    target: Shape | str | Path,
    config: BenchConfig,
    *,
    progress: Progress | None = None,
    hardware: HardwareSpec | str = MEASURED,
) -> BenchResult:
    """Measure serving latency and throughput of `target` (a Shape with random weights, speed only,
    or the path of a checkpoint written by our trainer) under `config`.

    `hardware` is what to predict with (`bench_hardware`): a `HardwareSpec`, a table name, a profile
    path, or "measured" (default: this machine's profile, measured once and cached when absent). The
    int8 variant is predicted with the fp32 rate when the hardware has no int8 one (a measured CPU
    profile has none). Raises UserError (bad config, a length that does not fit the model, a file
    that is not our checkpoint, an unknown hardware) or FileNotFoundError with a one-line reason.
    """
    if not isinstance(config, BenchConfig):
        raise UserError(f"config must be a BenchConfig, got {type(config).__name__}")
    loaded = load_target(target, attn_impl=config.attn_impl, seed=config.seed)
    config = config.fitted(loaded.shape)
    eval_data = None
    if config.quantize == "int8":  # read the checkpoint's validation data now: a missing corpus fails fast
        from depthwidth.bench.quant_report import eval_data_for

        eval_data = eval_data_for(loaded)
    run = _Session(loaded.shape, config, progress)
    with torch_threads(config.threads) as threads, torch.inference_mode():
        if isinstance(hardware, str) and is_measured(hardware):
            run.tick("hardware profile", step=0)
        spec = bench_hardware(hardware, threads=threads, dtype=config.dtype)
        run.predictor = _Predictor(loaded.shape, spec, attn_impl=config.attn_impl)
        for variant in config.variants:
            model = variant_model(loaded, variant)
            run.prefill(model, variant)
            run.decode(model, variant)
            run.generate(model, variant)
            del model
        quant = None
        if config.quantize == "int8":
            from depthwidth.bench.quant_report import quantization_report

            quant = quantization_report(loaded, config=config, data=eval_data)
            run.tick("int8 quantization report")
    return BenchResult(
        target=loaded.label, checkpoint=loaded.checkpoint, shape=loaded.shape.to_dict(), config=config.to_dict(),
        environment=_environment(config, threads=threads), hardware=spec.to_dict(), latency=tuple(run.latency),
        throughput=tuple(run.throughput), kv_cache=tuple(run.kv), quantization=quant,
    )


__all__ = ["BenchConfig", "Progress", "bench", "bench_hardware", "machine_hardware"]
