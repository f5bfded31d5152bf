"""How a run executes on its device, and what that costs or promises: the dtype it really trains in,
torch.compile, TF32 and deterministic kernels on CUDA, warm-up accounting, and the batch of each step.

- dtype (`run_dtype`): on CPU `config.dtype` as given (CPU defaults and run hashes unchanged). On CUDA
  `config.cuda_dtype` when set, else `config.dtype` when it is not the default fp32, else bf16 autocast
  where the GPU computes bf16 natively (Ampere and later) and fp32 elsewhere. The config stays as
  given (its hash is that of the request: `cuda_dtype` is left out of it while unset, so every stored
  hash stands, and an explicit `cuda_dtype = "fp32"` hashes apart from the default); the result
  records the resolved dtype (`TrainResult.dtype`).
- fp32 on CUDA runs its matmuls in TF32 (`TrainResult.tf32`), as PyTorch users of the field expect.
- compile (`compiles`): `config.compile`, default on for CUDA and off on CPU (a compile takes ~20 s on a
  2-core CPU and pays only for long runs). `compile = "auto"` compiles on CUDA and, on CPU, where this
  machine's measured compile seconds are paid back within the run (`resolve_compile`,
  `train/compile_auto.py`); `TrainResult.compile_auto` records the decision. Only the training
  forward/backward is compiled; evaluation runs the same weights eagerly. `TrainResult.compiled` records it.
- determinism: on CPU a run is bit for bit repeatable and resumable (deterministic algorithms, fixed
  threads: `setup.execution_settings`). On CUDA `config.deterministic` sets CUBLAS_WORKSPACE_CONFIG
  (before CUDA's first cuBLAS call: `prepare_deterministic`, called first thing by `train`), requests
  deterministic kernels, turns cuDNN autotuning off and runs attention through the math SDPA kernel
  (flash attention's backward promises no fixed order). Without it, repeated and resumed CUDA runs
  match to a float tolerance only (tests/train/test_speed_gpu.py states it).
- warm-up: the first `WARMUP_STEPS` steps a process runs (allocator, kernel choice, compilation) are
  timed one by one on every device, flagged `"warmup": true` in the curve and left out of tokens/s.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import torch


#: steps at the start of each process's share of a run that tokens/s leaves out (by count, every device)
WARMUP_STEPS = 2
#: steps whose losses are read (one host sync) together on CUDA; every step on CPU (no sync to save)
CUDA_FLUSH_EVERY = 16
#: the torch.compile backend (tests use "aot_eager", which traces the same graphs without code generation)
COMPILE_BACKEND = "inductor"
CUBLAS_WORKSPACE = ":4096:8"


def run_dtype(config, device: torch.device) -> str:
    """The dtype the run trains in on `device` (module docstring)."""
    if device.type != "cuda":
        return config.dtype
    if config.cuda_dtype is not None:
        return config.cuda_dtype
    if config.dtype != "fp32":
        return config.dtype
    from depthwidth.machine import capabilities

    return "bf16" if capabilities(device).bf16_native else "fp32"


def compiles(config, device: torch.device) -> bool | str:
    """True or False, or "auto" on CPU (decided by `resolve_compile` once the run's steps are known)."""
    if config.compile == "auto":
        return True if device.type == "cuda" else "auto"
    return config.compile if config.compile is not None else device.type == "cuda"


def resolve_compile(config, device: torch.device, shape, *, steps: int, dtype: str, threads: int,
                    cache) -> tuple[bool, dict | None]:
    """(whether the run's `steps` steps left compile, the "auto" decision's record or None)."""
    from depthwidth.train.compile_auto import decide, inductor_cache

    wanted = compiles(config, device)
    if wanted:
        inductor_cache(cache)  # every compiled run keeps inductor's caches under the cache folder
    if wanted != "auto":
        return bool(wanted), None
    decision = decide(shape, steps=steps, seq_len=config.seq_len, batch=config.micro_batch_size, dtype=dtype,
                      threads=threads, cache=cache, backend=COMPILE_BACKEND)
    return decision.compile, decision.to_dict()


def record_compile(run) -> None:
    """After a completed run compiled by "auto": keep its compile and step seconds for the next run of its
    shape (the first step, timed alone, holds the compile)."""
    if not (run.compile_auto and run.compiled and len(run.curve) > WARMUP_STEPS):
        return
    from depthwidth.train.compile_auto import record

    timed = sorted(c["seconds"] for c in timed_curve(run.curve))
    steady = timed[len(timed) // 2]
    record(run.shape, seq_len=run.config.seq_len, batch=run.config.micro_batch_size, dtype=run.dtype,
           threads=run.threads, eager_step_s=run.compile_auto["eager_step_s"], compiled_step_s=steady,
           compile_s=max(0.0, run.curve[0]["seconds"] - steady), cache=run.cache_dir)


def compile_model(model: torch.nn.Module):
    """The model's compiled forward (the module itself, with its state dict, stays as it is)."""
    return torch.compile(model, backend=COMPILE_BACKEND)


def flush_every(device: torch.device) -> int:
    return CUDA_FLUSH_EVERY if device.type == "cuda" else 1


def timed_curve(curve: list[dict]) -> list[dict]:
    """The curve points tokens/s counts: all but the warm-up steps (all of them when nothing else is left)."""
    return [c for c in curve if not c.get("warmup")] or curve


def prepare_deterministic(config) -> None:
    """Set CUBLAS_WORKSPACE_CONFIG for a deterministic CUDA run; it must be set before the process's
    first cuBLAS call, so a process that already ran CUDA work without it gets a warning."""
    if not config.deterministic or os.environ.get("CUBLAS_WORKSPACE_CONFIG"):
        return
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        warnings.warn("deterministic=true: CUDA was already started in this process without "
                      f"CUBLAS_WORKSPACE_CONFIG; cuBLAS may not be deterministic (set CUBLAS_WORKSPACE_CONFIG="
                      f"{CUBLAS_WORKSPACE} before starting, or run in a new process)", stacklevel=2)


@contextlib.contextmanager
def device_settings(config, device: torch.device):
    """CUDA only: TF32 matmuls and, with `config.deterministic`, deterministic kernels and math SDPA;
    everything is restored afterwards. Yields whether TF32 is on."""
    if device.type != "cuda":
        yield False
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cudnn = torch.backends.cudnn
    saved = (torch.backends.cuda.matmul.allow_tf32, cudnn.allow_tf32, cudnn.deterministic, cudnn.benchmark,
             torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = True
    with contextlib.ExitStack() as stack:
        if config.deterministic:
            prepare_deterministic(config)
            torch.use_deterministic_algorithms(True, warn_only=True)
            cudnn.deterministic, cudnn.benchmark = True, False
            stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        try:
            yield True
        finally:
            torch.backends.cuda.matmul.allow_tf32, cudnn.allow_tf32, cudnn.deterministic, cudnn.benchmark = saved[:4]
            torch.use_deterministic_algorithms(saved[4], warn_only=saved[5])


class BatchFeeder:
    """The (positions, inputs, targets) of each step on the run's device. On CUDA the batch is copied from
    pinned memory without blocking the host, and the next step's batch is gathered and sent while the
    current one computes (torch's pinned-memory cache keeps a block until its copy has run). On CPU the
    arrays are wrapped as they are (no copy)."""

    def __init__(self, stream, device: torch.device, steps: int) -> None:
        self.stream, self.device, self.steps = stream, device, steps
        self.cuda = device.type == "cuda"
        self._ahead = None

    def _prepare(self, step: int):
        positions = self.stream.positions(step)
        x, y = self.stream.rows(step, positions)  # (B, T) each
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        if self.cuda:
            x = x.pin_memory().to(self.device, non_blocking=True)
            y = y.pin_memory().to(self.device, non_blocking=True)
        return step, positions, x, y

    def get(self, step: int):
        ahead = self._ahead
        item = ahead if ahead is not None and ahead[0] == step else self._prepare(step)
        self._ahead = self._prepare(step + 1) if self.cuda and step + 1 < self.steps else None
        return item[1:]


def vendor_peak(device: torch.device, dtype: str) -> tuple[float | None, str]:
    """The vendor's dense peak FLOP/s of this GPU in the dtype its matmuls run in (TF32 for fp32 on CUDA)
    and the table row it comes from; (None, "") on CPU or for a GPU the table does not hold."""
    if device.type != "cuda":
        return None, ""
    from depthwidth.shapes.hardware import HARDWARE, match_gpu

    row = match_gpu(torch.cuda.get_device_name(device),
                    mem_capacity=torch.cuda.get_device_properties(device).total_memory)
    rates = HARDWARE[row].peak_flops if row is not None else {}
    wanted = "tf32" if dtype == "fp32" else dtype
    return (float(rates[wanted]), f"table:{row}") if wanted in rates else (None, "")


__all__ = ["BatchFeeder", "COMPILE_BACKEND", "CUDA_FLUSH_EVERY", "WARMUP_STEPS", "compile_model", "compiles",
           "device_settings", "flush_every", "prepare_deterministic", "run_dtype", "timed_curve", "vendor_peak"]
