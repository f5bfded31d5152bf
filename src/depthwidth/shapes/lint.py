"""`lint`: sizes that waste hardware, each with the fix.

Rules and why (each a `Finding` with a code):
- DW001 d_model, d_ff or vocab_size not a multiple of 64: tensor-core GEMM tiles are multiples of
  8/16 elements and the fast kernels of 64/128; ragged edges run padded or on slower kernels
  (NVIDIA "Matrix Multiplication Background" guide; Karpathy's nanoGPT pads GPT-2's vocabulary
  50257 -> 50304 for a ~25% faster step).
- DW002 head_dim not a multiple of 8 (error: fused attention kernels such as FlashAttention need it)
  or not 64/128 (warning: kernels are tuned for those; other sizes waste tiles).
- DW003 n_heads, d_ff or vocab_size not divisible by tp, or n_kv_heads neither divisible by tp nor
  dividing it (Megatron-LM splits heads, the MLP hidden size and the vocabulary over tensor-parallel
  ranks, and replicates kv heads when there are fewer than ranks).
- DW004 n_layers not divisible by pp (pipeline stages of unequal depth: the slowest sets the pace).
- DW005 input features of a linear layer not divisible by the quantization group size (group-wise
  int4/int8 weight quantization such as GPTQ/AWQ groups along the input dimension).
- DW006 with a hardware spec: bf16 weights alone exceed the memory of tp*pp devices.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.serial import Serializable
from depthwidth.shapes.checks import check_choice, check_int
from depthwidth.shapes.hardware import HardwareSpec, get_hardware
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape

SEVERITIES = ("warning", "error")


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding(Serializable):
    """One problem: `code` (DW001...), the `field` it concerns, what is wrong and the fix."""

    code: str
    field: str
    severity: str
    message: str
    fix: str

    def __post_init__(self) -> None:
        check_choice("severity", self.severity, SEVERITIES)

    def __str__(self) -> str:
        return f"{self.code} {self.message}: {self.fix}"


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _nearest_multiples(x: int, m: int) -> str:
    down, up = (x // m) * m, _round_up(x, m)
    return f"{down} or {up}" if down > 0 else f"{up}"


def _divisors(n: int, limit: int = 64) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def lint(
    shape: Shape, *, hardware: HardwareSpec | str | None = None, tp: int = 1, pp: int = 1, group_size: int = 128,
    multiple: int = 64,
) -> list[Finding]:
    """Findings for `shape` on `tp` x `pp` devices (see the module docstring); empty when all is well."""
    for name, value in (("tp", tp), ("pp", pp), ("group_size", group_size), ("multiple", multiple)):
        check_int(name, value)
    return [
        *_alignment(shape, multiple=multiple),
        *_head_dim(shape),
        *_tensor_parallel(shape, tp=tp, multiple=multiple),
        *_pipeline(shape, pp=pp),
        *_quantization(shape, group_size=group_size),
        *_capacity(shape, hardware=hardware, tp=tp, pp=pp),
    ]


def _alignment(s: Shape, *, multiple: int) -> list[Finding]:
    """DW001: d_model, d_ff and vocab_size multiples of `multiple`."""
    out: list[Finding] = []
    for name, value in (("d_model", s.d_model), ("d_ff", s.d_ff)):
        if value % multiple:
            out.append(Finding(code="DW001", field=name, severity="warning",
                               message=f"{name} {value} is not a multiple of {multiple}",
                               fix=f"use {name} {_nearest_multiples(value, multiple)}"))
    if s.vocab_size % multiple:
        out.append(Finding(code="DW001", field="vocab_size", severity="warning",
                           message=f"vocab_size {s.vocab_size} is not a multiple of {multiple}",
                           fix=f"pad vocab {s.vocab_size} -> {_round_up(s.vocab_size, multiple)}"))
    return out


def _head_dim(s: Shape) -> list[Finding]:
    """DW002: head_dim a multiple of 8 (error), and 64 or 128 (warning)."""
    if s.head_dim % 8:
        return [Finding(code="DW002", field="head_dim", severity="error",
                        message=f"head_dim {s.head_dim} is not a multiple of 8 (fused attention kernels need it)",
                        fix=_head_fix(s))]
    if s.head_dim not in (64, 128):
        return [Finding(code="DW002", field="head_dim", severity="warning",
                        message=f"head_dim {s.head_dim} is neither 64 nor 128 (the sizes kernels are tuned for)",
                        fix=_head_fix(s))]
    return []


def _tensor_parallel(s: Shape, *, tp: int, multiple: int) -> list[Finding]:
    """DW003: what tensor parallelism over tp ranks splits (heads, d_ff, vocabulary) divisible by tp."""
    out: list[Finding] = []
    if tp == 1:
        return out
    for name, value in (("n_heads", s.n_heads), ("n_kv_heads", s.n_kv_heads), ("d_ff", s.d_ff)):
        if name == "n_kv_heads" and tp % value == 0:
            continue  # fewer kv heads than ranks: each is replicated on tp / n_kv_heads ranks
        if value % tp:
            out.append(Finding(code="DW003", field=name, severity="error",
                               message=f"{name} {value} is not divisible by tp={tp}",
                               fix=f"use tp in {{{', '.join(map(str, _divisors(value)))}}} or {name} "
                                   f"{_nearest_multiples(value, tp)}"))
    if s.vocab_size % tp:
        out.append(Finding(code="DW003", field="vocab_size", severity="error",
                           message=f"vocab_size {s.vocab_size} is not divisible by tp={tp}",
                           fix=f"pad vocab {s.vocab_size} -> {_round_up(s.vocab_size, multiple * tp)}"))
    return out


def _pipeline(s: Shape, *, pp: int) -> list[Finding]:
    """DW004: n_layers divisible by pp."""
    if pp == 1 or s.n_layers % pp == 0:
        return []
    return [Finding(code="DW004", field="n_layers", severity="error",
                    message=f"n_layers {s.n_layers} is not divisible by pp={pp}",
                    fix=f"use n_layers {_nearest_multiples(s.n_layers, pp)} or pp in "
                        f"{{{', '.join(map(str, _divisors(s.n_layers)))}}}")]


def _quantization(s: Shape, *, group_size: int) -> list[Finding]:
    """DW005: the input features of every linear layer divisible by the quantization group size."""
    inputs = {"d_model": s.d_model, "d_ff": s.d_ff}
    if s.q_dim != s.d_model:
        inputs["n_heads*head_dim"] = s.q_dim
    return [
        Finding(code="DW005", field=name, severity="warning",
                message=f"{name} {value} (input features of a linear layer) is not divisible by the "
                        f"quantization group size {group_size}",
                fix=f"use {name} {_nearest_multiples(value, group_size)} or a group size dividing {value}")
        for name, value in inputs.items() if value % group_size
    ]


def _capacity(s: Shape, *, hardware: HardwareSpec | str | None, tp: int, pp: int) -> list[Finding]:
    """DW006: bf16 weights (2 bytes per parameter) within the memory of tp*pp devices."""
    if hardware is None:
        return []
    hw = hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)
    weights = count_params(s).total * 2  # bf16
    capacity = hw.mem_capacity * tp * pp
    if weights <= capacity:
        return []
    need = -(-weights // int(hw.mem_capacity))
    return [Finding(code="DW006", field="params", severity="error",
                    message=f"bf16 weights ({weights / 1e9:.1f} GB) exceed the memory of {tp * pp} "
                            f"{hw.name} ({capacity / 1e9:.0f} GB)",
                    fix=f"use tp*pp >= {need}")]


def _head_fix(s: Shape) -> str:
    options = [f"{s.d_model // hd} (head_dim {hd})" for hd in (64, 128) if s.d_model % hd == 0]
    if options:
        return "use n_heads " + " or ".join(options)
    return f"use a d_model that 64 divides, e.g. {_round_up(s.d_model, 64)}, with head_dim 64"


def tp_problem(shape: Shape, tp: int) -> str | None:
    """Why tensor parallelism over `tp` ranks cannot split `shape` (lint rule DW003, vocabulary aside:
    frameworks pad it), or None."""
    if tp == 1:
        return None
    for finding in lint(shape, tp=tp):
        if finding.code == "DW003" and finding.field != "vocab_size":
            return finding.message
    return None


__all__ = ["Finding", "lint", "tp_problem"]
