"""`compile = "auto"`: torch.compile a run only where its compile time is paid back within the run.

On a GPU compiling pays almost always (`compile` defaults on there, and "auto" compiles). On a CPU the
compile takes tens of seconds (inductor generates and builds C++ for every graph) and speeds a step up by
fusing its elementwise work, so it pays for long runs of small shapes and not for short ones. "auto" decides
per run, before it starts, from what was measured on this machine:

- the reference (`measure_reference`, once per machine, torch threads, torch version and dtype; about a
  minute): two GPT-2-style shapes (1 and 3 layers x 128 wide, seq 128, batch 16, vocab 256) trained a few steps
  eagerly and compiled. It gives the eager rate (training FLOPs per second), the compiled speed-up and the
  compile seconds against depth: a line through the two depths (dynamo traces every layer), never below the
  first depth's, whose compile is the process's first and also pays inductor's start-up (measured on a
  2-core Xeon: L1 21.1 s, then L3 9.0 s in the same process, so every depth is judged at 21.1 s).
- the shape's own record, once a run of the same shape, batch geometry and dtype has been compiled here
  (`record`): its eager step seconds, compiled step seconds and compile seconds, measured in that run.
  Later runs judge from it (a cached compile is cheaper: inductor's caches live under the cache folder,
  `<cache>/inductor`, so the runs of a study compile a shape once).

The run compiles when `steps x t_eager x (1 - 1/speedup) > compile seconds`, i.e. past the break-even step
count `compile / (t_eager x (1 - 1/speedup))`; the decision and its numbers are the result's `compile_auto`.
Compiled kernels round differently from eager ones (losses equal to about 1e-4, not bit for bit), so "auto"
is a value to ask for, never the default: the default (unset) stays eager on CPU and every stored run stands.
The figures are kept in `<cache>/compile-cost.json`, keyed by machine, threads and torch version.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass

import torch

from depthwidth.files import write_json
from depthwidth.machine import capabilities
from depthwidth.machine.paths import cache_dir
from depthwidth.shapes.flops import flops
from depthwidth.shapes.shape import Shape

FILE = "compile-cost.json"
#: the reference shapes' depths, width, batch geometry and timed steps (after `WARM` untimed ones)
REF_DEPTHS, REF_WIDTH, REF_SEQ, REF_BATCH, REF_STEPS, WARM = (1, 3), 128, 128, 16, 6, 2


@dataclass(frozen=True)
class Decision:
    compile: bool
    reason: str
    eager_step_s: float
    compiled_step_s: float
    compile_s: float
    break_even_steps: float | None  # None: compiling never pays (no speed-up)
    steps: int
    source: str  # "reference" or "this shape's record"

    def to_dict(self) -> dict:
        return asdict(self)


def _key(threads: int) -> str:
    return f"{capabilities(torch.device('cpu')).name}|threads {threads}|torch {torch.__version__}"


def _geometry(shape: Shape, seq_len: int, batch: int, dtype: str) -> str:
    return f"{shape.label}|v{shape.vocab_size}|{seq_len}x{batch}|{dtype}"


def _load(cache) -> dict:
    path = cache_dir(cache) / FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _store(cache, key: str, update) -> None:
    data = _load(cache)
    entry = data.setdefault(key, {"reference": {}, "shapes": {}})
    update(entry)
    path = cache_dir(cache) / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)


def inductor_cache(cache=None) -> None:
    """Point inductor's caches at `<cache>/inductor` unless the user set TORCHINDUCTOR_CACHE_DIR."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_dir(cache) / "inductor"))


def _time_steps(model, forward, batch, steps: int, dtype: str) -> tuple[float, list[float]]:
    """(seconds of the first step, seconds of each later step) of AdamW training through `forward`."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if dtype == "bf16" else None
    x, y = batch
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        if amp is not None:
            with amp:
                _, loss = forward(x, y)
        else:
            _, loss = forward(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        times.append(time.perf_counter() - t)
    return times[0], times[1:]


def measure_reference(*, dtype: str, threads: int, cache=None, backend: str = "inductor") -> dict:
    """Time the reference shapes eagerly and compiled (module docstring); stored and returned."""
    from depthwidth.model import Transformer

    inductor_cache(cache)
    rows = []
    g = torch.Generator().manual_seed(0)
    batch = (torch.randint(0, 256, (REF_BATCH, REF_SEQ), generator=g),
             torch.randint(0, 256, (REF_BATCH, REF_SEQ), generator=g))
    for depth in REF_DEPTHS:
        shape = Shape(n_layers=depth, d_model=REF_WIDTH, n_heads=REF_WIDTH // 32, vocab_size=256,
                      max_seq_len=REF_SEQ, bias="all")
        torch.manual_seed(0)
        model = Transformer(shape).train()
        _, eager = _time_steps(model, model, batch, WARM + REF_STEPS, dtype)
        torch._dynamo.reset()  # a fresh compile: what a run's first compile costs
        first, compiled = _time_steps(model, torch.compile(model, backend=backend), batch, WARM + REF_STEPS, dtype)
        t_eager, t_comp = sorted(eager[WARM - 1:])[len(eager[WARM - 1:]) // 2], min(compiled[WARM - 1:])
        rows.append({"n_layers": depth, "eager_step_s": t_eager, "compiled_step_s": t_comp,
                     "compile_s": max(0.0, first - t_eager),
                     "flops_per_step": flops(shape, seq_len=REF_SEQ).train_per_token * REF_SEQ * REF_BATCH})
    ref = {"rows": rows, "backend": backend, "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _store(cache, _key(threads), lambda e: e["reference"].__setitem__(dtype, ref))
    return ref


def record(shape: Shape, *, seq_len: int, batch: int, dtype: str, threads: int, eager_step_s: float,
           compiled_step_s: float, compile_s: float, cache=None) -> None:
    """Keep what a compiled run of `shape` measured, for the next run of the same geometry."""
    row = {"eager_step_s": eager_step_s, "compiled_step_s": compiled_step_s, "compile_s": compile_s}
    _store(cache, _key(threads), lambda e: e["shapes"].__setitem__(_geometry(shape, seq_len, batch, dtype), row))


def decide(shape: Shape, *, steps: int, seq_len: int, batch: int, dtype: str, threads: int, cache=None,
           backend: str = "inductor") -> Decision:
    """Whether a CPU run of `steps` steps of `shape` should compile (module docstring)."""
    entry = _load(cache).get(_key(threads), {})
    own = entry.get("shapes", {}).get(_geometry(shape, seq_len, batch, dtype))
    if own:
        eager, comp, cost, source = own["eager_step_s"], own["compiled_step_s"], own["compile_s"], "this shape's record"
    else:
        ref = entry.get("reference", {}).get(dtype) or measure_reference(dtype=dtype, threads=threads, cache=cache,
                                                                          backend=backend)
        (a, b) = ref["rows"][0], ref["rows"][-1]
        per_step = flops(shape, seq_len=seq_len).train_per_token * seq_len * batch
        eager = per_step * b["eager_step_s"] / b["flops_per_step"]  # the reference's eager FLOP rate
        speedup = sum(r["eager_step_s"] / r["compiled_step_s"] for r in ref["rows"]) / len(ref["rows"])
        comp = eager / speedup
        slope = (b["compile_s"] - a["compile_s"]) / max(1, b["n_layers"] - a["n_layers"])
        cost = max(a["compile_s"], a["compile_s"] + slope * (shape.n_layers - a["n_layers"]))
        source = "reference"
    saving = eager - comp
    even = cost / saving if saving > 0 else None
    go = even is not None and steps > even
    why = (f"compiled: {steps} steps, past the break-even {even:,.0f}" if go else
           f"eager: {steps} steps, below the break-even {even:,.0f}" if even is not None else
           "eager: compiling does not speed this shape up here")
    return Decision(compile=go, reason=why, eager_step_s=eager, compiled_step_s=comp, compile_s=cost,
                    break_even_steps=None if even is None or not math.isfinite(even) else even, steps=steps,
                    source=source)


__all__ = ["Decision", "decide", "inductor_cache", "measure_reference", "record"]
