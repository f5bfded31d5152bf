"""Serving latency and memory of each shape on a target hardware: measured where measured, predicted
otherwise, and always saying which.

A bench run's measurement applies to the target when the target is the hardware it ran on: the
device it measured on (`ShapeResult.bench_device`, "cpu" for results of before devices) is of the
target's kind, and the target is the hardware name of the profile its predictions used, or both are
a CPU ("cpu", "measured-cpu"), or the target is `STUDY` (the study's own machine). A CPU
measurement is never shown as measured for a GPU row (nor a GPU one for a CPU row); then the
roofline of `depthwidth.shapes.latency.predict_decode` / `predict_prefill` for the target's
`HardwareSpec` gives the number. A measurement is labelled with the device it was measured on
("measured on cpu", "measured on cuda:0"). Batch 1 throughout (the latency a single user sees).
Predictions for a table row assume eager execution (`LatencyBreakdown.execution`), which the label
says.

A target is a row of `depthwidth.shapes.hardware.HARDWARE` or `STUDY` ("study": the machine the study
measured on, whose measurements it holds; `resolve_target`). It is never `depthwidth.machine.MEASURED`:
"measured" means the machine a command runs on (`depthwidth.machine.resolve_hardware`), which need
not be the one the study ran on, so a report refuses it and names "study" instead.

Memory ("serving", the default): weights plus the KV cache of one sequence at the context, in the
serving dtype - `count_params(shape).total` x bytes per element + `kv_cache_bytes_per_token` x context
(analytic, exact for our model: the bench checks its KV cache against the same formula). Memory
("training"): the peak training memory per device the study measured, else
`shapes.memory.memory(...).total_training_bytes` for the study's sequence length and batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.machine import MEASURED
from depthwidth.shapes.memory import KV_DTYPES
from depthwidth.study.summary import ShapeResult

MEMORY_KINDS = ("serving", "training")
#: serving dtypes of the predictions and of serving memory: those with a storage size (weights and
#: the KV cache are both kept in it)
SERVING_DTYPES = KV_DTYPES
#: the target "the study's machine": its own measurements, wherever the report is written
STUDY = "study"


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetEstimate:
    """Batch-1 latency and memory of one shape on the target hardware, each with its source."""

    key: str
    hardware: str
    decode_ms: float | None
    decode_source: str  # "measured on cpu (the study's machine)" | "predicted for h100-sxm (eager)" | "unavailable ..."
    prefill_ms: float | None
    prefill_source: str
    memory_bytes: float | None
    memory_source: str
    memory_kind: str
    context: int
    prompt_len: int

    @property
    def decode_measured(self) -> bool:
        return self.decode_source.startswith("measured")

    def to_dict(self) -> dict:
        return {"key": self.key, "hardware": self.hardware, "decode_ms": self.decode_ms,
                "decode_source": self.decode_source, "prefill_ms": self.prefill_ms,
                "prefill_source": self.prefill_source, "memory_bytes": self.memory_bytes,
                "memory_source": self.memory_source, "memory_kind": self.memory_kind, "context": self.context,
                "prompt_len": self.prompt_len}


def resolve_target(value: str, *, argument: str = "hardware") -> str:
    """The canonical target of a report or recommendation: STUDY ("study", any case: the study's own
    machine), else the HARDWARE row name (`depthwidth.shapes.hardware.get_hardware`: aliases and case
    resolved). Anything else is a one-line UserError naming `argument` and the choices; "measured"
    (this machine's profile) and a profile file are refused: a report predicts for table rows, and
    its measurements are the study's."""
    from pathlib import Path

    from depthwidth.machine import is_measured
    from depthwidth.shapes.hardware import get_hardware

    choices = f"a row of `depthwidth hw list` or {STUDY!r} (the study's own measurements, on the machine it ran on)"
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{argument}={value!r}: expected {choices}")
    text = value.strip()
    if text.lower() == STUDY:
        return STUDY
    if is_measured(text):
        raise UserError(f"{argument} {value!r} means this machine's profile, which is not a report target; use "
                        f"{argument} {STUDY} for the study's own measurements, or a row of `depthwidth hw list`")
    try:
        return get_hardware(text).name
    except UserError as exc:
        if text.lower().endswith(".json") or Path(text).expanduser().is_file():
            raise UserError(f"{argument} {value!r}: a report's target is {choices}, not a profile file") from None
        raise UserError(f"{argument}: {exc}; or {STUDY!r} (the study's own measurements)") from None


def hardware_label(name: str) -> str:
    """How a target is named in text: "the study's machine" for the study's own measurements."""
    return "the study's machine" if name == STUDY else name


def device_kind_of(device: str | None) -> str:
    """"cpu" or "gpu" of a bench's device ("cpu", "cuda", "cuda:N"; None: a result of before devices,
    which always measured on the CPU)."""
    return "gpu" if (device or "cpu").startswith("cuda") else "cpu"


def measured_applies(target: str, bench_hardware: str | None, bench_device: str | None = None) -> bool:
    """Whether a bench run's measurements count for `target` (a `resolve_target` name), given the
    name of the hardware its predictions used and the device it measured on: always for STUDY
    (they were taken on the study's machine); for a table row only when the row is of the measured
    device's kind, and the bench predicted for that row, or for "cpu" when it used a measured CPU
    profile (named "measured-cpu" by `depthwidth.machine.profile_to_hardware`)."""
    from depthwidth.shapes.hardware import HARDWARE

    if bench_hardware is None:
        return False
    if target == STUDY:
        return True
    if HARDWARE[target].kind != device_kind_of(bench_device):
        return False
    bench = bench_hardware.lower()
    return bench == target or (target == "cpu" and bench in ("cpu", f"{MEASURED}-cpu"))


def estimate_target(
    result: ShapeResult,
    *,
    hardware: str,
    context: int | None = None,
    prompt_len: int | None = None,
    dtype: str = "bf16",
    memory: str = "serving",
    seq_len: int | None = None,
    batch_size: int = 1,
) -> TargetEstimate:
    """Latency and memory of `result`'s shape on `hardware` (module docstring: the rules).

    context / prompt_len default to the lengths the bench measured, else `seq_len`, else the shape's
    max_seq_len. dtype is the serving dtype of predictions and of serving memory.
    """
    from depthwidth.shapes.hardware import dtype_bytes
    from depthwidth.shapes.latency import predict_decode, predict_prefill
    from depthwidth.shapes.memory import kv_cache_bytes_per_token
    from depthwidth.shapes.params import count_params

    if memory not in MEMORY_KINDS:
        raise UserError(f"memory={memory!r} is not allowed; expected one of {', '.join(MEMORY_KINDS)}")
    target = resolve_target(hardware)
    shape = result.shape
    default_len = seq_len or shape.max_seq_len
    context = context or result.bench_context or default_len
    prompt_len = prompt_len or result.bench_prompt_len or default_len
    for name, value in (("context", context), ("prompt_len", prompt_len)):
        if value > shape.max_seq_len:
            raise UserError(f"{name}={value} exceeds max_seq_len={shape.max_seq_len} of {result.shape_label}")
    bench_device = getattr(result, "bench_device", None) or "cpu"
    measured = measured_applies(target, result.bench_hardware, bench_device)
    where = hardware_label(target)

    def pick(measured_ms, measured_len, want_len, predict) -> tuple[float | None, str]:
        if measured and measured_ms is not None and measured_len == want_len:
            return measured_ms, f"measured on {bench_device} (the study's machine)"
        if target == STUDY:
            return None, "unavailable (not measured at this length)"
        return predict() * 1e3, f"predicted for {target} (eager)"

    decode_ms, decode_source = pick(
        result.measured_decode_ms, result.bench_context, context,
        lambda: predict_decode(shape, hardware=target, batch=1, context=context, dtype=dtype).total_s)
    prefill_ms, prefill_source = pick(
        result.measured_prefill_ms, result.bench_prompt_len, prompt_len,
        lambda: predict_prefill(shape, hardware=target, batch=1, prompt_len=prompt_len, dtype=dtype).total_s)

    if memory == "serving":
        nbytes = count_params(shape).total * dtype_bytes(dtype) + kv_cache_bytes_per_token(shape, dtype=dtype) * context
        memory_source = f"analytic: {dtype} weights + KV cache of {context} tokens"
    elif result.peak_memory_bytes is not None:
        nbytes, memory_source = float(result.peak_memory_bytes), "measured peak training memory"
    else:
        from depthwidth.shapes.memory import memory as memory_of

        nbytes = memory_of(shape, seq_len=seq_len or shape.max_seq_len, micro_batch=batch_size).total_training_bytes
        memory_source = "analytic training memory (fp32, AdamW)"
    return TargetEstimate(key=result.key, hardware=where, decode_ms=decode_ms, decode_source=decode_source,
                          prefill_ms=prefill_ms, prefill_source=prefill_source, memory_bytes=float(nbytes),
                          memory_source=memory_source, memory_kind=memory, context=context, prompt_len=prompt_len)


__all__ = ["MEMORY_KINDS", "SERVING_DTYPES", "STUDY", "TargetEstimate", "device_kind_of", "estimate_target",
           "hardware_label", "measured_applies", "resolve_target"]
