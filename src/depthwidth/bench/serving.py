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
- device (`BenchConfig.device`: cpu, cuda, cuda:N, auto): the model, the prompts and the KV cache live
  there; CUDA calls are timed with CUDA events (`bench.timing`), and each decode point is also timed
  replayed as a CUDA graph (variant "<dtype>+cudagraph", `bench.cudagraph`). int8 dynamic
  quantization (torch.ao) is CPU only and refused on CUDA.
- each timed call's aten ops are counted once (`bench.dispatch`): the prediction's fixed cost is that
  count times the profile's measured cost per dispatched op (`shapes.small_ops`).
Predictions come from `shapes.latency` (`predict_prefill`, `predict_decode`) with the hardware profile
of the device measured on (`depthwidth.machine`, "measured") or any other hardware argument of that
kind of device; a generation is predicted as one prefill plus its decode steps.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import torch

from depthwidth.bench.config import (  # re-exported: the bench's public names live here
    CPU_BENCH_DTYPES,
    GRAPH,
    BenchConfig,
    Progress,
    check_bench_device,
    resolve_device,
)
from depthwidth.bench.predict import Predictor
from depthwidth.bench.results import BenchResult, KVCacheCheck, LatencyPoint, ThroughputPoint
from depthwidth.bench.target import load_target, variant_model
from depthwidth.bench.timing import time_call
from depthwidth.errors import UserError
from depthwidth.machine import (
    MEASURED,
    cached_profile,
    capabilities,
    check_dtype,
    check_fits,
    check_per_core,
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


def machine_hardware(*, threads: int, dtypes: tuple[str, ...] | None = None, device: str = "cpu") -> HardwareSpec:
    """The measured `HardwareSpec` of `device` at `threads` threads: its stored profile when it fits,
    else a measurement saved for the next run (`machine.cached_profile`, with the per-op cost of our
    eager block), with the kernel curves, the in-forward factor and the per-dispatched-op cost added
    (one round, and saved) when the stored profile predates them (`bench.hw.add_small_op_costs`;
    `depthwidth hw measure` measures them in three); read as "measured" is everywhere
    (`machine.measured_hardware`: torch.mm rates, the path `nn.Linear` takes). `dtypes` default to
    those native on the device."""
    from depthwidth.bench.hw import add_small_op_costs, eager_block_overhead, has_small_op_costs
    from depthwidth.machine import ProfileMatch, find_profile, save_profile

    profile = cached_profile(threads=threads, dtypes=dtypes, device=device, block_overhead=eager_block_overhead)
    if not has_small_op_costs(profile):
        profile, _ = add_small_op_costs(profile, device=device, rounds=1)
        found = find_profile(ProfileMatch(threads=profile.threads, device=profile.device,
                                          device_name=profile.device_name, torch_version=profile.torch_version,
                                          full=True, complete=True, eager_block=True))
        if found is not None:
            save_profile(profile, found[0])
    return measured_hardware(profile)


def bench_hardware(hardware: HardwareSpec | str, *, threads: int, dtype: str = "fp32",
                   device: str = "cpu") -> HardwareSpec:
    """The spec a bench predicts with: a `HardwareSpec` as it is; "measured" -> `machine_hardware` of
    `device` (measured now when no stored profile fits, with a peak for `dtype`); a table name or a
    profile path -> `machine.resolve_hardware`. A spec of another kind of device than the one the
    bench measures on (an H100 row for a CPU run) is replaced by the measured device's own: a
    measurement is only ever set beside a prediction for the hardware it was taken on."""
    kind = "gpu" if device.startswith("cuda") else "cpu"
    if not (isinstance(hardware, str) and is_measured(hardware)):
        spec = hardware if isinstance(hardware, HardwareSpec) else resolve_hardware(
            hardware, argument="hardware", threads=threads)
        if spec.kind == kind:
            return spec
    native = capabilities(device).dtypes
    wanted = "fp32" if dtype == "int8" else dtype
    return machine_hardware(threads=threads, dtypes=tuple(dict.fromkeys((*native, wanted))), device=device)


def _prompt(shape: Shape, *, batch: int, length: int, gen: torch.Generator, device: str = "cpu") -> torch.Tensor:
    # drawn on the CPU (the same prompts on every device), then moved
    return torch.randint(0, shape.vocab_size, (batch, length), generator=gen).to(device)  # (B, T)


def _kv_check(cache: KVCache, *, shape: Shape, variant: str, batch: int) -> KVCacheCheck:
    from depthwidth.shapes.memory import kv_cache_bytes_per_token

    cached = [t[:, :, : cache.length] for t in cache.keys + cache.values]  # each (B, Hk, tokens, Dh)
    measured = sum(t.numel() * t.element_size() for t in cached)
    dtype = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[cache.keys[0].dtype]
    analytic = kv_cache_bytes_per_token(shape, dtype=dtype) * cache.length * batch
    return KVCacheCheck(variant=variant, dtype=dtype, batch=batch, tokens=cache.length,
                        measured_bytes=measured, analytic_bytes=analytic)


class _Session:
    """One bench run's measured points, its random prompts and its progress count."""

    def __init__(self, shape: Shape, config: BenchConfig, progress: Progress | None, *, device: str) -> None:
        self.shape, self.config, self.progress, self.device = shape, config, progress, device
        self.graphs = config.cuda_graphs and device.startswith("cuda")
        per_variant = len(config.prompt_lens) + len(config.contexts) * (2 if self.graphs else 1) + len(config.batches)
        self.total = per_variant * len(config.variants) + (1 if config.quantize else 0)
        self.done = 0
        self.gen = torch.Generator().manual_seed(config.seed)
        self.predictor: Predictor | None = None
        self.latency: list[LatencyPoint] = []
        self.throughput: list[ThroughputPoint] = []
        self.kv: list[KVCacheCheck] = []

    def tick(self, label: str, *, step: int = 1) -> None:
        self.done += step
        if self.progress is not None:
            self.progress(label, self.done, self.total)

    def prompt(self, *, batch: int, length: int) -> torch.Tensor:
        return _prompt(self.shape, batch=batch, length=length, gen=self.gen, device=self.device)

    def prefill(self, model, variant: str) -> None:
        """Time to first token at batch 1 per prompt length: one forward into an emptied cache."""
        for p in self.config.prompt_lens:
            idx = self.prompt(batch=1, length=p)  # (1, p)
            cache = new_cache(model, batch_size=1, max_len=p)
            ops = self._dispatched(model, idx, cache, cached=0)
            self._time(model, idx, cache, cached=0, variant=variant, kind="prefill", tokens=p,
                       predicted=self.predictor.prefill(variant=variant, batch=1, prompt_len=p, dispatched_ops=ops))
            self.tick(f"{variant} prefill {p}")

    def decode(self, model, variant: str) -> None:
        """One single-token step at batch 1 after exactly `context` cached tokens, per context; on
        CUDA also the same step replayed as a CUDA graph."""
        for c in self.config.contexts:
            cache = new_cache(model, batch_size=1, max_len=c + 1)
            model(self.prompt(batch=1, length=c), cache=cache)  # fill to the context
            self.kv.append(_kv_check(cache, shape=self.shape, variant=variant, batch=1))
            step = self.prompt(batch=1, length=1)  # (1, 1)
            ops = self._dispatched(model, step, cache, cached=c)
            self._time(model, step, cache, cached=c, variant=variant, kind="decode", tokens=c,
                       predicted=self.predictor.decode(variant=variant, batch=1, context=c, dispatched_ops=ops))
            self.tick(f"{variant} decode @{c}")
            if self.graphs:
                from depthwidth.bench.cudagraph import capture_decode

                replay = capture_decode(model, step, cache, context=c)
                timing = time_call(replay, repeat=self.config.repeat, warmup=self.config.warmup, device=self.device)
                predicted = self.predictor.decode(variant=variant, batch=1, context=c, execution="graph")
                self.latency.append(LatencyPoint(variant=f"{variant}+{GRAPH}", kind="decode", batch=1, tokens=c,
                                                 timing=timing, predicted_s=predicted))
                self.tick(f"{variant} decode @{c} (CUDA graph)")

    @staticmethod
    def _dispatched(model, idx, cache: KVCache, *, cached: int) -> int:
        """Aten ops one call dispatches (counted once, untimed; the cache put back after)."""
        from depthwidth.bench.dispatch import count_dispatched

        cache.length = cached
        ops = count_dispatched(lambda: model(idx, cache=cache))
        cache.length = cached
        return ops

    def _time(self, model, idx, cache: KVCache, *, cached: int, variant: str, kind: str, tokens: int,
              predicted: float) -> None:
        """Time `model(idx, cache=cache)` with the cache put back to `cached` tokens before each call."""

        def rewind() -> None:
            cache.length = cached

        timing = time_call(lambda: model(idx, cache=cache), repeat=self.config.repeat, warmup=self.config.warmup,
                           setup=rewind, device=self.device)
        self.latency.append(LatencyPoint(variant=variant, kind=kind, batch=1, tokens=tokens, timing=timing,
                                         predicted_s=predicted))

    def generate(self, model, variant: str) -> None:
        """Tokens/s of a greedy generation with the cache (prefill included), per batch size."""
        cfg = self.config
        p, n = cfg.throughput_prompt_len, cfg.new_tokens
        for batch in cfg.batches:
            idx = self.prompt(batch=batch, length=p)  # (B, p)
            cache = new_cache(model, batch_size=batch, max_len=p + n - 1)

            def rewind(c: KVCache = cache) -> None:
                c.length = 0

            timing = time_call(lambda x=idx, c=cache: generate(model, x, max_new_tokens=n, cache=c), repeat=cfg.repeat,
                               warmup=cfg.warmup, setup=rewind, device=self.device)
            self.kv.append(_kv_check(cache, shape=self.shape, variant=variant, batch=batch))
            predicted = self.predictor.generation(variant=variant, batch=batch, prompt_len=p, new_tokens=n)
            self.throughput.append(ThroughputPoint(variant=variant, batch=batch, prompt_len=p, new_tokens=n,
                                                   timing=timing, predicted_s=predicted))
            self.tick(f"{variant} throughput batch {batch}")


def _environment(config: BenchConfig, *, threads: int, device: str) -> dict[str, Any]:
    return {
        "torch": torch.__version__,
        "threads": threads,
        "dtype": config.dtype,
        "variants": list(config.variants),
        "quantized_engine": torch.backends.quantized.engine,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": device_name("cpu"),
        "device": device,
        "device_name": device_name(device),
    }


def bench(
    target: Shape | str | Path,
    config: BenchConfig,
    *,
    progress: Progress | None = None,
    hardware: HardwareSpec | str = MEASURED,
) -> BenchResult:
    """Measure serving latency and throughput of `target` (a Shape with random weights, speed only,
    or the path of a checkpoint written by our trainer) under `config`, on `config.device`.

    `hardware` is what to predict with (`bench_hardware`): a `HardwareSpec`, a table name, a profile
    path, or "measured" (default: the profile of the device measured on, measured once and cached
    when absent); a spec for another kind of device than the one measured on is replaced by that
    device's measured profile. The int8 variant (CPU only) is predicted with the CPU's int8 rate, or
    fp32 when it has none (a measured CPU profile has none). Raises UserError (bad config, a length
    that does not fit the model, a file that is not our checkpoint, an unknown hardware, a CUDA
    device torch does not see) or FileNotFoundError with a one-line reason.
    """
    if not isinstance(config, BenchConfig):
        raise UserError(f"config must be a BenchConfig, got {type(config).__name__}")
    check_per_core("threads", config.threads)  # this machine's bound: libgomp ends a process it cannot serve
    device = resolve_device(config.device)
    if config.quantize == "int8" and device != "cpu":
        raise UserError(f"quantize='int8' runs on the CPU only (torch.ao dynamic quantization), not on "
                        f"{device}; drop --quantize or use --device cpu")
    if device == "cpu" and config.dtype not in CPU_BENCH_DTYPES:
        raise UserError(f"dtype={config.dtype!r} is not allowed on the CPU; expected one of "
                        f"{', '.join(CPU_BENCH_DTYPES)}")
    check_dtype(config.dtype, device=device, allowed=config.allow_slow_dtype)
    loaded = load_target(target, attn_impl=config.attn_impl, seed=config.seed)
    config = config.fitted(loaded.shape)
    check_fits(config.peak_bytes(loaded.shape), device=device,
               what=f"the largest point of the benchmark of {loaded.label} (KV cache, token ids, logits)")
    eval_data = None
    if config.quantize == "int8":  # read the checkpoint's validation data now: a missing corpus fails fast
        from depthwidth.bench.quant_report import eval_data_for

        eval_data = eval_data_for(loaded)
    run = _Session(loaded.shape, config, progress, device=device)
    with torch_threads(config.threads) as threads, torch.inference_mode():
        if isinstance(hardware, str) and is_measured(hardware):
            run.tick("hardware profile", step=0)
        spec = bench_hardware(hardware, threads=threads, dtype=config.dtype, device=device)
        run.predictor = Predictor(loaded.shape, spec, attn_impl=config.attn_impl)
        for variant in config.variants:
            model = variant_model(loaded, variant).to(device)
            run.prefill(model, variant)
            run.decode(model, variant)
            run.generate(model, variant)
            del model
        loaded.model.to("cpu")  # the fp32 variant moved the loaded model itself
        quant = None
        if config.quantize == "int8":
            from depthwidth.bench.quant_report import quantization_report

            quant = quantization_report(loaded, config=config, data=eval_data)
            run.tick("int8 quantization report")
    return BenchResult(
        target=loaded.label, checkpoint=loaded.checkpoint, shape=loaded.shape.to_dict(), config=config.to_dict(),
        environment=_environment(config, threads=threads, device=device), hardware=spec.to_dict(),
        latency=tuple(run.latency), throughput=tuple(run.throughput), kv_cache=tuple(run.kv), quantization=quant,
    )


__all__ = [
    "GRAPH",
    "BenchConfig",
    "Progress",
    "bench",
    "bench_hardware",
    "check_bench_device",
    "machine_hardware",
    "resolve_device",
]
