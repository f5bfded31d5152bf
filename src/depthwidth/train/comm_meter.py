"""Communication of a multi-process run, measured per optimizer step and per kind of collective.

Method: timing around the collectives. `CommMeter` is a `TorchDispatchMode` active during each training
step; it sees every collective the step issues through the dispatcher - DDP's bucketed all-reduces
(`c10d::allreduce_`), FSDP2's all-gathers and reduce-scatters (`c10d::_allgather_base_`,
`c10d::_reduce_scatter_base_`) and DTensor's functional collectives (`_c10d_functional::all_reduce`, ...)
- counts its bytes and times it from issue until its work is complete (the meter waits for it at once,
so DDP's and FSDP2's overlap of communication with the backward pass is removed while metering: the
time is the collective's whole time, an upper bound of its exposed time). Bytes of a collective: the
tensor each rank contributes to an all-reduce, the unsharded tensor of a reduce-scatter (its input) and
of an all-gather (its output). The scalars the trainer reduces for its own bookkeeping (the loss, the
gradient norm) are not counted (`paused`).
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode

KINDS = ("all_reduce", "reduce_scatter", "all_gather")
METHOD = "timing around each collective (a TorchDispatchMode that waits for it)"

#: op name (namespace::name) -> (kind, which argument holds the bytes: "in", "out", "list")
_OPS = {
    "c10d::allreduce_": ("all_reduce", "list"),
    "c10d::allreduce_coalesced_": ("all_reduce", "list"),
    "c10d::_allgather_base_": ("all_gather", "out"),
    "c10d::allgather_into_tensor_coalesced_": ("all_gather", "out"),
    "c10d::_reduce_scatter_base_": ("reduce_scatter", "in"),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce_scatter", "in"),
    "_c10d_functional::all_reduce": ("all_reduce", "in"),
    "_c10d_functional::all_reduce_": ("all_reduce", "in"),
    "_c10d_functional::all_gather_into_tensor": ("all_gather", "gathered"),
    "_c10d_functional::reduce_scatter_tensor": ("reduce_scatter", "in"),
}


def _nbytes(t) -> int:
    if isinstance(t, (list, tuple)):
        return sum(_nbytes(x) for x in t)
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


class CommMeter(TorchDispatchMode):
    """Per step: {kind: [calls, bytes, seconds]}; `steps[i]` is the i-th metered step."""

    def __init__(self) -> None:
        super().__init__()
        self._paused = 0
        self.current: dict[str, list] = defaultdict(lambda: [0, 0, 0.0])
        self.steps: list[dict[str, list]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        op = _OPS.get(func._schema.name) if not self._paused else None
        if op is None:
            return func(*args, **kwargs)
        kind, where = op
        t0 = time.perf_counter()
        out = func(*args, **kwargs)
        if func._schema.name.startswith("c10d::"):
            work = out[-1] if isinstance(out, tuple) else out
            work.wait()
        else:
            torch.ops._c10d_functional.wait_tensor(out)
        seconds = time.perf_counter() - t0
        if where == "list":
            nbytes = _nbytes(args[0])
        elif where == "out":
            nbytes = _nbytes(args[0])
        elif where == "gathered":
            nbytes = _nbytes(args[0]) * int(args[1])
        else:
            nbytes = _nbytes(args[1] if func._schema.name.startswith("c10d::") else args[0])
        entry = self.current[kind]
        entry[0] += 1
        entry[1] += nbytes
        entry[2] += seconds
        return out

    @contextlib.contextmanager
    def paused(self):
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    @contextlib.contextmanager
    def step(self):
        """Meter one optimizer step (enter the dispatch mode, file the step's totals on exit)."""
        self.current = defaultdict(lambda: [0, 0, 0.0])
        with self:
            yield
        self.steps.append(dict(self.current))

    def summary(self, *, skip_first: bool = True) -> dict[str, dict[str, float]]:
        """Mean per step, by kind: calls, bytes, seconds (the first step, warm-up, left out when there are more)."""
        steps = self.steps[1:] if skip_first and len(self.steps) > 1 else self.steps
        out = {}
        for kind in KINDS:
            rows = [s.get(kind, [0, 0, 0.0]) for s in steps]
            if not any(r[0] for r in rows):
                continue
            n = len(rows)
            out[kind] = {"calls": sum(r[0] for r in rows) / n, "bytes": sum(r[1] for r in rows) / n,
                         "seconds": sum(r[2] for r in rows) / n,
                         "bytes_each_step": sorted({r[1] for r in rows})}
        return out


__all__ = ["CommMeter", "KINDS", "METHOD"]


def comm_fields(*, ctx, shape, config, device, curve: list[dict]) -> dict:
    """`TrainResult.comm` and `comm_fraction` of a multi-process run: the meter's per-step means next to the
    analytic bytes (`depthwidth.shapes.collectives`) and their time from the measured link of the backend
    (`depthwidth hw measure --collectives`; no predicted time without one)."""
    from depthwidth.machine.collective import load_link
    from depthwidth.shapes.collectives import step_collectives, with_seconds

    cfg = config  # ctx: this rank's DistContext; curve: the run's CurvePoint dicts
    measured = ctx.meter.summary()
    predicted = step_collectives(shape, nproc=ctx.world, parallel=cfg.parallel, tp=ctx.tp,
                                 batch_size=cfg.batch_size, micro_batch=cfg.micro_batch_size, seq_len=cfg.seq_len,
                                 act_bytes=2 if cfg.dtype == "bf16" else 4, reshard=cfg.reshard)
    backend = "nccl" if device.type == "cuda" else "gloo"
    link = load_link(backend, ctx.world, cache=cfg.cache_dir)
    if link is not None:
        predicted = with_seconds(predicted, bandwidth=link.bandwidth, latency_s=link.latency_s,
                                 measured_calls={k: v["calls"] for k, v in measured.items()})
    kinds = {}
    for kind in KINDS:
        if kind not in measured and kind not in predicted:
            continue
        m, p = measured.get(kind, {}), predicted.get(kind)
        kinds[kind] = {"calls": m.get("calls", 0), "bytes": m.get("bytes", 0), "seconds": m.get("seconds", 0.0),
                       "bytes_each_step": m.get("bytes_each_step", []),
                       "predicted_calls": p.calls if p else 0, "predicted_bytes": p.bytes if p else 0,
                       "predicted_seconds": p.seconds if p else None}
    timed = [c for c in curve if c["step"] > 0] or curve
    step_s = sum(c["seconds"] for c in timed) / len(timed) if timed else None
    comm_s = sum(k["seconds"] for k in kinds.values())
    comm = {"method": METHOD, "backend": backend, "nproc": ctx.world, "dp": ctx.dp, "tp": ctx.tp,
            "parallel": cfg.parallel, "tokens_per_step": cfg.tokens_per_step, "kinds": kinds,
            "link": {"bandwidth": link.bandwidth, "latency_s": link.latency_s} if link else None}
    return {"comm": comm, "comm_fraction": comm_s / step_s if step_s else None}
