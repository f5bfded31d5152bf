"""Measure the machine at hand: GEMM peak per dtype, memory-copy bandwidth and the fixed cost per op.

`measure_profile()` returns a `HardwareProfile`; `cached_profile()` returns the stored one when it
fits, else measures and saves one (`depthwidth.machine.paths.profile_path`).

What is timed (the best of several repeats after warm-ups, as STREAM reports its best time: other
processes on the machine can only slow a repeat down; torch is imported inside the functions, so
that reading a profile never imports it):
- GEMM: an n x n x n product, 2 n^3 FLOPs. On CPU two paths are timed, `torch.mm` (MKL on most
  builds) and oneDNN (`torch._C._nn.mkldnn_linear` on mkldnn tensors), because on some CPUs the
  second is about twice as fast; the best path is the achievable peak and both are reported. On CUDA
  `torch.mm` (cuBLAS) with CUDA events; tf32 is fp32 with TF32 matmuls allowed.
- capabilities first: only the dtypes asked for are timed (default: the native ones,
  `device.DeviceCapabilities.dtypes`), each first on a probe GEMM of n=128 (milliseconds even when
  emulated). A dtype the device does not compute natively, or whose probe runs more than
  `EMULATED_SLOWDOWN` times slower than fp32's, is recorded as emulated with that slowdown and its
  probe as its only row (never an n=2048 timing: emulated bf16 ran at 0.32 GFLOP/s, 54 s per call, on
  an AVX2-only EPYC). Each native dtype then gets `DTYPE_SECONDS` at most: its n is halved until
  the timed calls fit, judged by the probe's rate.
- copy: `dst.copy_(src)` of a buffer larger than the caches; bandwidth counts bytes read + written,
  the convention of the roofline's byte counts.
- op overhead: the seconds per call of tiny ops (add, mm, linear, layer_norm, gelu, softmax on 8x8
  tensors) in a loop: dispatch (and kernel launch on GPU) with no real work. The fixed cost per op
  that predictions use (`op_overhead_s`) is `block_overhead(device=, repeat=)` when the caller
  passes one (`depthwidth.bench.hw.eager_block_overhead` times our own eager Transformer block, which
  dispatches about three kernels per inventory op), else the largest tiny-op cost (a lower bound).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from depthwidth.errors import UserError
from depthwidth.machine.device import DeviceCapabilities, capabilities, device_kind, profile_dtypes
from depthwidth.machine.paths import profile_path
from depthwidth.machine.processes import check_per_core
from depthwidth.machine.profile import (
    GemmResult,
    HardwareProfile,
    best_rates,
    save_profile,
    utc_now,
)
from depthwidth.machine.stored import EAGER_BLOCK_OP, ProfileMatch, find_profile

#: (device=..., repeat=...) -> fixed seconds per inventory op, timed on a model of a higher layer
BlockOverhead = Callable[..., float]
_FP16_CPU = " (fp16 runs at about 1 GFLOP/s on CPU: never use it there)"
#: the probe GEMM's size: 4 MFLOP, 13 ms even at the 0.32 GFLOP/s of emulated bf16
PROBE_N = 128
#: a dtype whose probe runs this many times slower than fp32's is emulated (native bf16 or fp16 is
#: at least as fast as fp32; emulated bf16 is 100-300x slower)
EMULATED_SLOWDOWN = 8.0
#: time cap per dtype of a full profile (seconds; a quick one takes a quarter)
DTYPE_SECONDS = 3.0


def best_seconds(fn: Callable[[], Any], *, repeat: int, warmup: int, sync: Callable[[], Any] | None = None,
                 min_seconds: float = 0.0, max_seconds: float = float("inf")) -> float:
    """Best time of at least `repeat` calls of `fn` that together take at least `min_seconds`, after
    `warmup` untimed calls; `sync` (e.g. torch.cuda.synchronize) ends each timed call. The timed
    calls stop early, after at least one, once they took `max_seconds` together."""
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    best, spent, count = float("inf"), 0.0, 0
    while (count < repeat or spent < min_seconds) and not (count and spent >= max_seconds):
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        elapsed = time.perf_counter() - start
        best, spent, count = min(best, elapsed), spent + elapsed, count + 1
    return best


@contextmanager
def torch_threads(n: int | None) -> Iterator[int]:
    """Run with `n` torch intra-op threads (None: keep the setting); yields the count in effect and
    restores the previous one afterwards."""
    import torch

    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise UserError(f"threads={n!r} must be a positive integer")
    check_per_core("threads", n)  # libgomp ends the process when it cannot start them (machine/processes.py)
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def _check_dtypes(dtypes: tuple[str, ...], kind: str) -> None:
    allowed = profile_dtypes(kind)
    bad = [d for d in dtypes if d not in allowed]
    if not dtypes or bad:
        why = _FP16_CPU if "fp16" in bad and kind == "cpu" else ""
        raise UserError(f"dtypes={dtypes!r}: on {kind} expected some of {', '.join(allowed)}{why}")


def default_gemm_n(*, device: Any = "cpu", dtype: str = "fp32", quick: bool = False) -> int:
    """GEMM size timed unless given: CUDA 8192 (quick 1024); CPU 2048 (quick 512); a dtype the CPU
    only emulates 256 (quick 128), so that timing it takes a second, not minutes."""
    if device_kind(device) == "cuda":  # (measure_profile probes each dtype first on any device)
        return 1024 if quick else 8192
    if dtype != "fp32" and not capabilities(device).is_native(dtype):
        return 2 * PROBE_N if not quick else PROBE_N
    return 512 if quick else 2048


def measure_gemm(*, dtype: str, device: Any = "cpu", n: int | None = None, repeat: int = 5,
                 min_seconds: float = 0.0, max_seconds: float = float("inf")) -> tuple[GemmResult, ...]:
    """(n, n) @ (n, n) through each available path (CPU: torch.mm and oneDNN; CUDA: torch.mm), 2 n^3
    FLOPs each, best of at least `repeat` runs lasting at least `min_seconds` (and at most
    `max_seconds` per path, `best_seconds`), after two warm-ups.
    Uses its own random generator: the global RNG (and so a training run's reproducibility) is
    untouched. `device` is "cpu", "cuda", "cuda:N" or a torch.device; n defaults to `default_gemm_n`."""
    import torch

    kind = device_kind(device)
    _check_dtypes((dtype,), kind)
    device = str(device)
    n = n or default_gemm_n(device=device, dtype=dtype)
    tdt = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, generator=gen).to(tdt)  # (n, n)
    b = torch.randn(n, n, device=device, generator=gen).to(tdt)  # (n, n)
    flop = 2.0 * n**3

    def result(path: str, seconds: float) -> GemmResult:
        return GemmResult(dtype=dtype, path=path, n=n, seconds=seconds, flops_per_s=flop / seconds)

    if kind == "cuda":
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        try:
            t = best_seconds(lambda: torch.mm(a, b), repeat=repeat, warmup=2, sync=torch.cuda.synchronize,
                             min_seconds=min_seconds, max_seconds=max_seconds)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        return (result("torch.mm", t),)
    results = [result("torch.mm", best_seconds(lambda: torch.mm(a, b), repeat=repeat, warmup=2,
                                               min_seconds=min_seconds, max_seconds=max_seconds))]
    linear = getattr(getattr(torch._C, "_nn", None), "mkldnn_linear", None)
    if linear is not None and torch.backends.mkldnn.is_available():
        try:
            am, bm = a.to_mkldnn(), b.to_mkldnn()
            results.append(result("mkldnn_linear", best_seconds(lambda: linear(am, bm, None), repeat=repeat,
                                                                warmup=2, min_seconds=min_seconds,
                                                                max_seconds=max_seconds)))
        except RuntimeError:  # this build or CPU lacks the oneDNN kernel for the dtype
            pass
    return tuple(results)


def _sync(torch, device: str):
    return torch.cuda.synchronize if device_kind(device) == "cuda" else None


def measure_copy_bandwidth(*, device: Any = "cpu", nbytes: int = 256 * 2**20, repeat: int = 5) -> float:
    """Bytes/s of `dst.copy_(src)` for an fp32 buffer of `nbytes`, counting bytes read + written."""
    import torch

    src = torch.empty(nbytes // 4, dtype=torch.float32, device=str(device)).fill_(1.0)
    dst = torch.empty_like(src)
    t = best_seconds(lambda: dst.copy_(src), repeat=repeat, warmup=1, sync=_sync(torch, str(device)))
    return 2.0 * src.numel() * 4 / t


def measure_op_overheads(*, device: Any = "cpu", calls: int = 2000, repeat: int = 5) -> dict[str, float]:
    """Seconds per call of each tiny op (8x8 tensors: no real work), best of `repeat` loops of `calls`."""
    import torch

    F = torch.nn.functional
    x = torch.ones(8, 8, device=str(device))  # (8, 8)
    w = torch.ones(8, 8, device=str(device))
    ops = {
        "add": lambda: torch.add(x, w),
        "mm": lambda: torch.mm(x, w),
        "linear": lambda: F.linear(x, w),
        "layer_norm": lambda: F.layer_norm(x, (8,)),
        "gelu": lambda: F.gelu(x, approximate="tanh"),
        "softmax": lambda: torch.softmax(x, dim=-1),
    }
    out = {}
    for name, op in ops.items():
        def loop(op=op):
            for _ in range(calls):
                op()
        out[name] = best_seconds(loop, repeat=repeat, warmup=1, sync=_sync(torch, str(device))) / calls
    return out


def memory_capacity(device: Any = "cpu") -> float:
    """Bytes of device memory: the GPU's total memory, or the machine's physical RAM."""
    if device_kind(device) == "cuda":
        import torch

        return float(torch.cuda.get_device_properties(torch.device(str(device)).index or 0).total_memory)
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def gemm_profile(gemm: tuple[GemmResult, ...], *, device: Any, threads: int) -> HardwareProfile:
    """A GEMM-only profile of this machine holding `gemm` (no bandwidth or per-op cost measured)."""
    import torch

    return HardwareProfile(
        device=device_kind(device), device_name=capabilities(device).name, threads=threads, gemm=gemm,
        peak_flops=best_rates(gemm), copy_bandwidth=None, op_overhead_s=None, op_overheads={},
        mem_capacity=memory_capacity(device), torch_version=torch.__version__, created=utc_now(),
    )


def probe_gemm(*, dtype: str, device: Any = "cpu", n: int = PROBE_N) -> GemmResult:
    """The fastest path of a small (n=128) GEMM of `dtype`: milliseconds even where it is emulated."""
    return max(measure_gemm(dtype=dtype, device=device, n=n, repeat=3), key=lambda g: g.flops_per_s)


def fitted_n(n: int, *, flops_per_s: float, calls: int, seconds: float) -> int:
    """`n` halved (down to PROBE_N) until `calls` GEMMs of n^3 at `flops_per_s` take at most `seconds`."""
    while n > PROBE_N and calls * 2.0 * n**3 / flops_per_s > seconds:
        n //= 2
    return n


def measure_dtypes(dtypes: tuple[str, ...], *, device: Any, quick: bool, repeat: int,
                   caps: DeviceCapabilities) -> tuple[tuple[GemmResult, ...], dict[str, float]]:
    """(GEMM rows, emulated dtype -> slowdown against fp32) of the dtypes asked for (module docstring)."""
    reference = probe_gemm(dtype="fp32", device=device).flops_per_s
    cap = DTYPE_SECONDS / (4 if quick else 1)
    rows: list[GemmResult] = []
    emulated: dict[str, float] = {}
    for dtype in dtypes:
        probe = reference if dtype == "fp32" else None
        row = None
        if probe is None:
            row = probe_gemm(dtype=dtype, device=device)
            probe = row.flops_per_s
        slowdown = reference / probe
        if row is not None and (not caps.is_native(dtype) or slowdown > EMULATED_SLOWDOWN):
            emulated[dtype] = slowdown
            rows.append(row)
            continue
        paths = 1 if device_kind(device) == "cuda" else 2
        # two warm-ups and one timed call per path fit in the cap (the probe's rate is a lower bound)
        n = fitted_n(default_gemm_n(device=device, dtype=dtype, quick=quick), flops_per_s=probe,
                     calls=3 * paths, seconds=cap)
        rows.extend(measure_gemm(dtype=dtype, device=device, n=n, repeat=repeat, max_seconds=cap / paths))
    return tuple(rows), emulated


def measure_profile(
    *, dtypes: tuple[str, ...] | None = None, threads: int | None = None, quick: bool = False,
    device: str | None = None, block_overhead: BlockOverhead | None = None,
) -> HardwareProfile:
    """Time GEMMs per dtype, a memory copy and tiny ops on `device` ("cpu", "cuda", "cuda:N"; default:
    cuda if available, else cpu).

    dtypes default to `capabilities(device).dtypes` (fp32, plus bf16 only where it is native); each
    asked for is probed first and an emulated one is only probed (module docstring).
    quick: n=512 GEMMs (1024 on GPU), a 32 MiB copy and 200-call loops (about a second on a 2-core
    CPU; numbers are rougher and lower than the full run's n=2048 (8192 on GPU), 256 MiB copy (1 GiB
    on GPU) and 2000-call loops). fp16 is refused on CPU (about 1 GFLOP/s there; never use it).
    """
    import torch

    device = str(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    kind = device_kind(device)
    caps = capabilities(device)
    dtypes = caps.dtypes if dtypes is None else tuple(dtypes)
    _check_dtypes(dtypes, kind)
    gpu = kind == "cuda"
    repeat = 3 if quick else (10 if gpu else 7)
    with torch_threads(threads) as used:
        gemm, emulated = measure_dtypes(dtypes, device=device, quick=quick, repeat=repeat, caps=caps)
        nbytes = (32 if quick else (1024 if gpu else 256)) * 2**20
        bandwidth = measure_copy_bandwidth(device=device, nbytes=nbytes, repeat=repeat)
        overheads = measure_op_overheads(device=device, calls=200 if quick else 2000, repeat=3 if quick else 5)
        if block_overhead is not None:
            overheads[EAGER_BLOCK_OP] = block_overhead(device=device, repeat=3 if quick else 7)
    per_op = overheads.get(EAGER_BLOCK_OP, max(overheads.values()))
    return HardwareProfile(
        device=kind, device_name=caps.name, threads=used, gemm=gemm, peak_flops=best_rates(gemm),
        copy_bandwidth=bandwidth, op_overhead_s=per_op, op_overheads=overheads, mem_capacity=memory_capacity(device),
        torch_version=torch.__version__, created=utc_now(), quick=quick, emulated=emulated,
    )


def cached_profile(
    *, dtypes: tuple[str, ...] | None = None, threads: int | None = None, device: str = "cpu",
    cache: str | os.PathLike | None = None, block_overhead: BlockOverhead | None = None,
) -> HardwareProfile:
    """The stored profile of this device if it fits (a full, complete run on this device kind and
    name, with these threads on a CPU, this torch, these dtypes, and the eager-block cost when
    `block_overhead` is given), else a new measurement, saved to `profile_path` of the device and
    threads (a CUDA profile and a CPU one never share a file)."""
    import torch

    want_threads = threads if threads is not None else torch.get_num_threads()
    caps = capabilities(device)
    dtypes = caps.dtypes if dtypes is None else tuple(dtypes)
    cpu = caps.device == "cpu"
    match = ProfileMatch(threads=want_threads if cpu else None, device=caps.device, device_name=caps.name,
                         torch_version=torch.__version__, dtypes=dtypes, full=True, complete=True,
                         eager_block=block_overhead is not None)
    found = find_profile(match, cache=cache)
    if found is not None:
        return found[1]
    profile = measure_profile(dtypes=dtypes, threads=want_threads, device=str(device), block_overhead=block_overhead)
    save_profile(profile, profile_path(threads=want_threads, cache=cache, device=caps.device, device_name=caps.name))
    return profile


__all__ = [
    "DTYPE_SECONDS",
    "EMULATED_SLOWDOWN",
    "PROBE_N",
    "BlockOverhead",
    "best_seconds",
    "cached_profile",
    "default_gemm_n",
    "fitted_n",
    "gemm_profile",
    "measure_copy_bandwidth",
    "measure_dtypes",
    "measure_gemm",
    "measure_op_overheads",
    "measure_profile",
    "memory_capacity",
    "probe_gemm",
    "torch_threads",
]
