"""Measure the machine at hand: GEMM peak per dtype, memory-copy bandwidth and the fixed cost per op.

`measure_profile()` returns a `HardwareProfile`; `save_profile`/`load_profile` keep it as JSON (by
default at `default_profile_path()`); `profile_to_hardware()` turns it into the pure
`depthwidth.shapes.hardware.HardwareSpec` that the roofline (`shapes/latency.py`) and the planner use,
and the trainer divides by its peak for MFU.

What is timed (the best of several repeats after warm-ups, as STREAM reports its best time: other
processes on the machine can only slow a repeat down; torch is imported inside the functions so
that reading a profile never imports it):
- GEMM: an n x n x n product, 2 n^3 FLOPs. On CPU fp32 two paths are timed, `torch.mm` (MKL on most
  builds) and oneDNN (`torch._C._nn.mkldnn_linear` on mkldnn tensors), because on some CPUs the
  second is about twice as fast; the best path is the achievable peak and both are reported. On CUDA
  `torch.mm` (cuBLAS) with CUDA events; tf32 is fp32 with TF32 matmuls allowed.
- copy: `dst.copy_(src)` of a buffer larger than the caches; bandwidth counts bytes read + written,
  the convention of the roofline's byte counts.
- op overhead: the fixed seconds per inventory op of our own eager model (`_block_overhead`: time
  per added layer of a width-8 model at one token, over the ops `layer_ops` counts per layer), and,
  for reference, the seconds per call of tiny ops (add, mm, linear, layer_norm, gelu, softmax on 8x8
  tensors) in a loop: dispatch (and kernel launch on GPU) with no real work.
"""

from __future__ import annotations

import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.bench.hw_profile import (  # re-exported: the profile's stored form lives there
    CPU_DTYPES,
    CUDA_DTYPES,
    GemmResult,
    HardwareProfile,
    default_profile_path,
    load_profile,
    profile_to_hardware,
    save_profile,
)


# ---- measurement --------------------------------------------------------------------------------
def _best_seconds(fn, *, repeat: int, warmup: int, sync=None, min_seconds: float = 0.0) -> float:
    """Best time of at least `repeat` calls that together take at least `min_seconds`."""
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    best, spent, count = float("inf"), 0.0, 0
    while count < repeat or spent < min_seconds:
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        elapsed = time.perf_counter() - start
        best, spent, count = min(best, elapsed), spent + elapsed, count + 1
    return best


def _torch_dtype(torch, dtype: str):
    return {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]


def measure_gemm(
    *, dtype: str, device: str = "cpu", n: int | None = None, repeat: int = 5, min_seconds: float = 0.0,
) -> tuple[GemmResult, ...]:
    """(n, n) @ (n, n) through each available path (CPU: torch.mm and oneDNN; CUDA: torch.mm), 2 n^3
    FLOPs each, best of at least `repeat` runs lasting at least `min_seconds`, after two warm-ups.
    Uses its own random generator: the global RNG (and so a training run's reproducibility) is
    untouched. `device` is "cpu", "cuda" or "cuda:N". Default n: 2048 on CPU, 4096 on CUDA."""
    import torch

    kind = device.split(":")[0]
    allowed = CUDA_DTYPES if kind == "cuda" else CPU_DTYPES
    if kind not in ("cpu", "cuda"):
        raise UserError(f"device={device!r} is not allowed; expected cpu, cuda or cuda:N")
    if dtype not in allowed:
        why = " (fp16 runs at about 1 GFLOP/s on CPU: never use it there)" if dtype == "fp16" else ""
        raise UserError(f"dtype={dtype!r}: on {device} expected one of {', '.join(allowed)}{why}")
    n = n or (4096 if kind == "cuda" else 2048)
    tdt = _torch_dtype(torch, dtype)
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, generator=gen).to(tdt)  # (n, n)
    b = torch.randn(n, n, device=device, generator=gen).to(tdt)  # (n, n)
    flop = 2.0 * n**3
    if kind == "cuda":
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        try:
            t = _best_seconds(lambda: torch.mm(a, b), repeat=repeat, warmup=2, sync=torch.cuda.synchronize,
                              min_seconds=min_seconds)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        return (GemmResult(dtype=dtype, path="torch.mm", n=n, seconds=t, flops_per_s=flop / t),)
    t = _best_seconds(lambda: torch.mm(a, b), repeat=repeat, warmup=2, min_seconds=min_seconds)
    results = [GemmResult(dtype=dtype, path="torch.mm", n=n, seconds=t, flops_per_s=flop / t)]
    linear = getattr(getattr(torch._C, "_nn", None), "mkldnn_linear", None)
    if linear is not None and torch.backends.mkldnn.is_available():
        try:
            am, bm = a.to_mkldnn(), b.to_mkldnn()
            t = _best_seconds(lambda: linear(am, bm, None), repeat=repeat, warmup=2, min_seconds=min_seconds)
            results.append(GemmResult(dtype=dtype, path="mkldnn_linear", n=n, seconds=t, flops_per_s=flop / t))
        except RuntimeError:  # this build or CPU lacks the oneDNN kernel for the dtype
            pass
    return tuple(results)


def _copy_bandwidth(torch, *, device: str, nbytes: int, repeat: int) -> float:
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    sync = torch.cuda.synchronize if device == "cuda" else None
    t = _best_seconds(lambda: dst.copy_(src), repeat=repeat, warmup=1, sync=sync)
    return 2.0 * src.numel() * 4 / t  # bytes read + written


def _op_overheads(torch, *, device: str, calls: int, repeat: int) -> dict[str, float]:
    F = torch.nn.functional
    x = torch.ones(8, 8, device=device)  # (8, 8)
    w = torch.ones(8, 8, device=device)
    ops = {
        "add": lambda: torch.add(x, w),
        "mm": lambda: torch.mm(x, w),
        "linear": lambda: F.linear(x, w),
        "layer_norm": lambda: F.layer_norm(x, (8,)),
        "gelu": lambda: F.gelu(x, approximate="tanh"),
        "softmax": lambda: torch.softmax(x, dim=-1),
    }
    sync = torch.cuda.synchronize if device == "cuda" else None
    out = {}
    for name, op in ops.items():
        def loop(op=op):
            for _ in range(calls):
                op()
        out[name] = _best_seconds(loop, repeat=repeat, warmup=1, sync=sync) / calls
    return out


def _block_overhead(torch, *, device: str, repeat: int) -> float:
    """Fixed seconds per inventory op of our own eager model: a 1-token forward of a tiny Transformer
    (width 8, where FLOPs and bytes are negligible) at 1 and 9 layers; the time per added layer,
    divided by the ops `layer_ops` counts per layer. An eager block dispatches about three times as
    many kernels (views, splits, residual adds, norms' statistics) as the inventory's matmul-level
    ops, so the cost of an 8x8 op alone understates the fixed cost a real layer pays."""
    from depthwidth.model.transformer import Transformer
    from depthwidth.shapes.flops import layer_ops
    from depthwidth.shapes.shape import Shape

    times = {}
    for n_layers in (1, 9):
        shape = Shape(n_layers=n_layers, d_model=8, n_heads=1, vocab_size=8, max_seq_len=8)
        model = Transformer(shape).to(device).eval()
        idx = torch.zeros(1, 1, dtype=torch.long, device=device)
        sync = torch.cuda.synchronize if device == "cuda" else None

        def forward(model=model, idx=idx):
            with torch.no_grad():
                for _ in range(20):
                    model(idx)
        times[n_layers] = _best_seconds(forward, repeat=repeat, warmup=1, sync=sync) / 20
    per_layer_ops = sum(1 for op in layer_ops(shape, batch=1, new_tokens=1) if op.repeat == n_layers)
    return max(0.0, (times[9] - times[1]) / 8 / per_layer_ops)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def measure_profile(
    *, dtypes: tuple[str, ...] = ("fp32", "bf16"), threads: int | None = None, quick: bool = False,
    device: str | None = None,
) -> HardwareProfile:
    """Time GEMMs per dtype, a memory copy and tiny ops on `device` (default: cuda if available, else cpu).

    quick: n=512 GEMMs, a 32 MiB copy and 200-call loops (about a second on a 2-core CPU; numbers are
    rougher and lower than the full run, which uses n=2048 on CPU (4096 on GPU), a 256 MiB copy (1 GiB
    on GPU) and 2000-call loops). fp16 is refused on CPU (about 1 GFLOP/s there; never use it).
    """
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda"):
        raise UserError(f"device={device!r} is not allowed; expected cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("device='cuda' but torch sees no CUDA device")
    allowed = CUDA_DTYPES if device == "cuda" else CPU_DTYPES
    dtypes = tuple(dtypes)
    bad = [d for d in dtypes if d not in allowed]
    if not dtypes or bad:
        why = " (fp16 runs at about 1 GFLOP/s on CPU: never use it there)" if "fp16" in bad and device == "cpu" else ""
        raise UserError(f"dtypes={dtypes!r}: on {device} expected some of {', '.join(allowed)}{why}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise UserError(f"threads={threads!r} must be a positive integer")
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        gpu = device == "cuda"
        n = 512 if quick else (4096 if gpu else 2048)
        repeat = 3 if quick else (10 if gpu else 7)
        gemm: list[GemmResult] = []
        for dtype in dtypes:
            gemm.extend(measure_gemm(dtype=dtype, device=device, n=n, repeat=repeat))
        peak = {d: max(g.flops_per_s for g in gemm if g.dtype == d) for d in dtypes}
        nbytes = (32 if quick else (1024 if gpu else 256)) * 2**20
        bandwidth = _copy_bandwidth(torch, device=device, nbytes=nbytes, repeat=repeat)
        overheads = _op_overheads(torch, device=device, calls=200 if quick else 2000, repeat=3 if quick else 5)
        overheads["eager_block_op"] = _block_overhead(torch, device=device, repeat=3 if quick else 7)
        if gpu:
            props = torch.cuda.get_device_properties(0)
            name, capacity = props.name, float(props.total_memory)
        else:
            name = _cpu_name()
            capacity = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        return HardwareProfile(
            device=device, device_name=name, threads=torch.get_num_threads(), gemm=tuple(gemm), peak_flops=peak,
            copy_bandwidth=bandwidth, op_overhead_s=overheads["eager_block_op"], op_overheads=overheads,
            mem_capacity=capacity, torch_version=torch.__version__,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"), quick=quick,
        )
    finally:
        torch.set_num_threads(old_threads)


def cached_profile(
    *, path: str | os.PathLike | None = None, dtypes: tuple[str, ...] = ("fp32", "bf16"),
    threads: int | None = None, device: str = "cpu",
) -> HardwareProfile:
    """The stored profile if it matches (device, threads, torch version, dtypes, full run), else a new
    measurement, saved. The one place the trainer and the benchmarks get a measured peak from."""
    import torch

    want_threads = threads if threads is not None else torch.get_num_threads()
    target = Path(path) if path is not None else default_profile_path()
    if target.is_file():
        try:
            profile = load_profile(target)
        except ValueError:
            profile = None  # unreadable: measured again and overwritten below
        if (profile is not None and profile.device == device and profile.threads == want_threads
                and profile.torch_version == torch.__version__ and not profile.quick
                and all(d in profile.peak_flops for d in dtypes)):
            return profile
    profile = measure_profile(dtypes=dtypes, threads=want_threads, device=device)
    save_profile(profile, target)
    return profile


__all__ = [
    "GemmResult", "HardwareProfile", "cached_profile", "default_profile_path", "load_profile",
    "measure_gemm", "measure_profile", "profile_to_hardware", "save_profile",
]
