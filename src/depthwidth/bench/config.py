"""What a serving benchmark measures and how (`BenchConfig`), and where it runs (`resolve_device`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from depthwidth.errors import UserError
from depthwidth.machine import CPU_PROFILE_DTYPES, check_device, resolve_device
from depthwidth.model.kernels import ATTN_IMPLS
from depthwidth.artifact.config import LIMITS as RUN_LIMITS
from depthwidth.shapes.activations import FLOAT_DTYPES
from depthwidth.shapes.checks import check_int, shown
from depthwidth.shapes.memory import KV_DTYPES, kv_cache_bytes_per_token
from depthwidth.shapes.shape import LIMITS as SHAPE_LIMITS, Shape

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
#: Upper bounds of a benchmark's sizes (flags, a study's [bench]), each far above any real measurement, so
#: that a typo (--batches 1000000000) is refused at once; what the largest point holds in memory is then
#: checked against the machine before anything is timed (`peak_bytes`, in `bench`).
LIMITS = {
    "points": (64, "values per list, each point timed `repeat` times; a sweep has 3 to 10"),
    "length": (SHAPE_LIMITS["max_seq_len"][0], "the longest context a Shape may have"),
    "batch": (1 << 16, "16x the largest serving batches, which hold a few thousand sequences"),
    "repeat": (10_000, "timed repetitions per point; 5 to 50 give a steady median"),
    "warmup": (10_000, "as many untimed runs as timed ones may be"),
    "group_size": (SHAPE_LIMITS["d_ff"][0], "the widest MLP a Shape may have"),
    "threads": RUN_LIMITS["threads"],
}
#: the limit of each list's values
_LIST_LIMITS = {"prompt_lens": "length", "contexts": "length", "batches": "batch"}


def _check_lengths(name: str, value: Any, *, allow_empty: bool = False) -> None:
    if not isinstance(value, tuple) or (not value and not allow_empty):
        raise UserError(f"{name}={shown(value)} must be a non-empty tuple of positive integers")
    most, why = LIMITS["points"]
    if len(value) > most:
        raise UserError(f"{name} has {len(value):,} values, above the limit of {most} ({why})")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise UserError(f"{name} contains {shown(v)}; every entry must be a positive integer")
        check_int(name, v, 1, *LIMITS[_LIST_LIMITS[name]])
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
        for name, low, limit in (("repeat", 1, "repeat"), ("warmup", 0, "warmup"), ("new_tokens", 1, "length"),
                                 ("throughput_prompt_len", 1, "length"), ("group_size", 1, "group_size"),
                                 ("seed", 0, None)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UserError(f"{name}={shown(value)} must be an integer >= {low}")
            if limit is not None:
                check_int(name, value, low, *LIMITS[limit])
        if self.seed >= 1 << 63:
            raise UserError(f"seed={shown(self.seed)} must be below 2**63")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise UserError(f"threads={shown(self.threads)} must be a positive integer or None")
        if self.threads is not None:
            check_int("threads", self.threads, 1, *LIMITS["threads"])
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

    def peak_bytes(self, shape: Shape) -> int:
        """A lower bound of what the largest point allocates besides the weights: its KV cache (every
        layer, in the benchmark's dtype), its token ids (int64) and one row of logits per sequence (fp32).
        Needs the lengths (`fitted`)."""
        kv = kv_cache_bytes_per_token(shape, dtype=self.dtype if self.dtype in KV_DTYPES else "fp32")
        points = [(1, p) for p in self.prompt_lens or ()] + [(1, c + 1) for c in self.contexts or ()]
        points += [(b, self.throughput_prompt_len + self.new_tokens) for b in self.batches]
        return max((b * t * (kv + 8) + b * shape.vocab_size * 4 for b, t in points), default=0)

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
