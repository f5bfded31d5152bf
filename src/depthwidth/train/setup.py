"""Before a run starts: the device it runs on, whether the shape, config and data fit together, and
the process settings (threads, deterministic kernels) it runs under."""

from __future__ import annotations

import contextlib

import torch

from depthwidth.data.dataset import Dataset
from depthwidth.errors import UserError
from depthwidth.machine import check_dtype, check_fits, check_per_core, resolve_device as machine_resolve_device
from depthwidth.machine.host_memory import keep_freed_memory
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.artifact.config import TrainConfig
from depthwidth.artifact.model import run_multipliers


def resolve_device(config: TrainConfig) -> torch.device:
    """The torch device of `config.device`: "auto" is cuda:0 when torch sees a GPU, else the CPU;
    "cuda" is cuda:0; "cuda:N" must name a GPU torch sees (a UserError saying how many there are)."""
    device = torch.device(machine_resolve_device(config.device))
    return device if device.type == "cpu" else torch.device("cuda", device.index or 0)


def check_compatible(shape: Shape, config: TrainConfig, dataset: Dataset, device: torch.device) -> None:
    # (fp16 never gets here: `TrainConfig` offers fp32 and bf16 only, `artifact.config.DTYPES`)
    check_dtype(config.dtype, device=device, allowed=config.allow_slow_dtype)
    check_per_core("threads", config.threads)  # this machine's bound: libgomp ends a process it cannot serve
    if config.seq_len > shape.max_seq_len:
        raise UserError(
            f"seq_len={config.seq_len} exceeds the shape's max_seq_len={shape.max_seq_len} "
            f"({'learned position table' if shape.pos == 'learned' else 'position limit'}); "
            "raise max_seq_len or lower seq_len"
        )
    if not shape.lm_head or shape.kind != "decoder":
        raise UserError(f"kind={shape.kind!r}, lm_head={shape.lm_head}: training needs a decoder with an LM head")
    run_multipliers(shape, config)  # refuses a parametrization the shape cannot take
    check_fits(16 * count_params(shape).total, device=device,
               what=f"training {shape.label()} (fp32 weights, gradients and two AdamW moments)")
    if shape.vocab_size < dataset.vocab_size:
        raise UserError(
            f"vocab_size={shape.vocab_size} of the shape is smaller than tokenizer {dataset.tokenizer.spec!r}'s "
            f"vocabulary of {dataset.vocab_size}"
        )
    for name in ("corpus", "tokenizer", "val_fraction", "test_fraction"):
        mine = {"corpus": dataset.corpus_spec, "tokenizer": dataset.tokenizer.spec,
                "val_fraction": dataset.val_fraction, "test_fraction": dataset.test_fraction}[name]
        if mine != getattr(config, name):
            raise UserError(f"the dataset given has {name}={mine!r} but the config says {getattr(config, name)!r}")


def set_deterministic(mode: bool, *, warn_only: bool, compiled: bool = False) -> None:
    """`torch.use_deterministic_algorithms(mode, warn_only=...)` without importing torch._inductor
    when nothing is compiled: the torch function imports it to set inductor's own flag, 3.3 s of a
    run's start-up on this project's 2-core machine (torch 2.13), paid again by every worker process.
    That flag only matters to torch.compile, so it is set (the torch function called) when the run
    compiles or inductor is loaded already."""
    import sys

    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if compiled or setter is None or "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


@contextlib.contextmanager
def execution_settings(config: TrainConfig, device: torch.device):
    """Fix threads and request deterministic kernels for the run; restore both afterwards."""
    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    compiled = bool(getattr(config, "compile", False))
    if device.type == "cpu":
        keep_freed_memory()  # no page faults on the same buffers every step (machine/host_memory.py)
        set_deterministic(True, warn_only=True, compiled=compiled)
        # Deterministic mode also fills every new empty tensor with NaN (a debugging aid that cost
        # 2-3% of a step in bench_train.py); correct kernels never read it, so it stays off.
        torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)
        set_deterministic(det, warn_only=warn_only, compiled=compiled)
        torch.utils.deterministic.fill_uninitialized_memory = fill
