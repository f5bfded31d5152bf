"""What a serving benchmark measures and how (`BenchConfig`), and where it runs (`resolve_device`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from depthwidth.errors import UserError
from depthwidth.machine import CPU_PROFILE_DTYPES, check_device, resolve_device
from depthwidth.model.kernels import ATTN_IMPLS
from depthwidth.shapes.activations import FLOAT_DTYPES
from depthwidth.shapes.shape import Shape

#: the dtypes of a benchmarked model's weights and activations (`--dtype`): any float dtype, fp16 on CUDA only
BENCH_DTYPES = FLOAT_DTYPES
#: those a benchmark runs in on the CPU: the ones a CPU profile times, so every latency has its
#: prediction (never fp16, about 1 GFLOP/s there)
CPU_BENCH_DTYPES = tuple(d for d in BENCH_DTYPES if d in CPU_PROFILE_DTYPES)
#: the variant label of CUDA-graph decode points (`bench.cudagraph`), after the dtype: "bf16+cudagraph"
GRAPH = "cudagraph"
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
        dtype: weights and activations, one of BENCH_DTYPES (on the CPU one of CPU_BENCH_DTYPES).
        quantize: None | "int8": also measure an int8 dynamically quantized copy (fp32 activations).
        repeat: timed repetitions per point (>= 1).
        warmup: untimed runs before them (>= 0).
        threads: torch intra-op threads during the run; None keeps the current setting.
        new_tokens: tokens generated per sequence for throughput.
        throughput_prompt_len: prompt length for throughput.
        attn_impl: one of `depthwidth.model.kernels.ATTN_IMPLS`.
        seed: seeds the random weights (shape targets) and the random prompts.
        group_size: quantization group size the lint checks divisibility against.
        allow_slow_dtype: measure in a dtype this machine only emulates (refused otherwise,
            `depthwidth.machine.check_dtype`).
        device: "cpu" | "cuda" | "cuda:N" | "auto" (cuda when torch sees one, else cpu): where the
            model, the prompts and the KV cache live, and the hardware the profile is measured on.
        cuda_graphs: on CUDA, also time each decode point replayed as a CUDA graph (`bench.cudagraph`,
            variant "<dtype>+cudagraph", predicted with execution "graph"); ignored on the CPU.
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
    allow_slow_dtype: bool = False
    device: str = "cpu"
    cuda_graphs: bool = True

    def __post_init__(self) -> None:
        for name in ("prompt_lens", "contexts", "batches"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        for name in ("prompt_lens", "contexts"):
            if getattr(self, name) is not None:
                _check_lengths(name, getattr(self, name))
        _check_lengths("batches", self.batches, allow_empty=True)
        check_bench_device(self.device)
        cuda = self.device.startswith("cuda")
        allowed = BENCH_DTYPES if cuda else CPU_BENCH_DTYPES
        if self.dtype not in allowed and not (self.device == "auto" and self.dtype in BENCH_DTYPES):
            raise UserError(
                f"dtype={self.dtype!r} is not allowed; expected one of {', '.join(allowed)} (no fp16 on CPU)"
            )
        if self.quantize not in QUANTIZE:
            raise UserError(f"quantize={self.quantize!r} is not allowed; expected one of "
                            f"{', '.join(map(repr, QUANTIZE))}")
        if self.quantize == "int8" and cuda:
            raise UserError(f"quantize='int8' runs on the CPU only (torch.ao dynamic quantization), not on "
                            f"device={self.device!r}; drop --quantize or use --device cpu")
        if not isinstance(self.cuda_graphs, bool):
            raise UserError(f"cuda_graphs={self.cuda_graphs!r} must be true or false")
        for name, low in (("repeat", 1), ("warmup", 0), ("new_tokens", 1), ("throughput_prompt_len", 1),
                          ("group_size", 1), ("seed", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UserError(f"{name}={value!r} must be an integer >= {low}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise UserError(f"threads={self.threads!r} must be a positive integer or None")
        if self.attn_impl not in ATTN_IMPLS:
            raise UserError(f"attn_impl={self.attn_impl!r} is not allowed; expected one of {', '.join(ATTN_IMPLS)}")

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
        for name, default in (("allow_slow_dtype", False), ("device", "cpu"), ("cuda_graphs", True)):
            if out[name] == default:  # written only when set: results of earlier versions stay the same
                del out[name]
        return out


#: The bench's device setting is the one every model run takes (`depthwidth.machine.check_device`);
#: `resolve_device` turns "auto" into this machine's device and refuses a GPU torch does not see.
check_bench_device = check_device


__all__ = ["BENCH_DTYPES", "CPU_BENCH_DTYPES", "DEFAULT_LENGTHS", "GRAPH", "QUANTIZE", "BenchConfig", "Progress",
           "check_bench_device", "resolve_device"]
