"""Where a training step's time goes: `depthwidth.train.train` against the plain loop of bench_train.py, phase by
phase, wall clock.

Each phase is timed by wrapping the function that does it, for both sides alike: the model's forward
(`Transformer.forward`), backward (`Tensor.backward`), clipping (`clip_grad_norm_`), the optimizer step
(`AdamW.step`), `zero_grad`; for ours also the batch (`_Run._batch`: positions, hashing, the copy to the
device), the bookkeeping flush (`_Run._flush`: the loss read-back, curve points, progress) and the rest of the
step (learning rate per group, the loop); for the plain loop the batch (`BatchStream.batch` and the copy).
"other" is the wall time of the timed steps less every timed phase. Rounds alternate ours and plain; each
cell is the median over rounds of the mean ms per step (warm-up steps excluded).

    python benchmarks/profile_train_step.py [--shapes 16x64,1x256] [--steps 12] [--warmup 2] [--rounds 3]
        [--adamw fused,foreach] [--threads N] [--batch 32] [--seq-len 128]

`--adamw` runs ours once per AdamW implementation (the plain loop always uses torch's default AdamW, no
clipping: the loop of a user who writes their own).

`--models` compares the models alone instead, in one process: our `Transformer` against the hand-written GPT-2
of `handwritten_gpt.py` with the same weights, forward and backward of the same batch (no optimizer), rounds
alternating. Printed per shape: the aten ops each dispatches per step (forward, backward; counted, so
deterministic), the median wall ms of forward and backward, the host time between ops (wall less the self time
of every top-level op under torch.profiler), and every op whose count or self time per call differs.

    python benchmarks/profile_train_step.py --models [--shapes 16x64,1x256] [--dtype fp32|bf16] [--rounds 5]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).parent))
from bench_train import busy_jiffies, groups_of, plain_loop  # noqa: E402

import depthwidth.train.loop as loop_mod  # noqa: E402
from depthwidth.data import BatchStream, load_dataset  # noqa: E402
from depthwidth.model import Transformer  # noqa: E402
from depthwidth.shapes import Shape  # noqa: E402
from depthwidth.train import TrainConfig, train  # noqa: E402

PHASES = ("batch", "forward", "backward", "clip", "optimizer", "zero_grad", "flush")


class Timers:
    """Accumulated wall seconds per phase while `active`; nested phases count in the outer one only."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.active = False
        self._depth = 0

    def wrap(self, owner, name: str, phase: str):
        real = getattr(owner, name)
        timers = self

        def timed(*args, **kwargs):
            if not timers.active or timers._depth:
                return real(*args, **kwargs)
            timers._depth += 1
            t = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                timers.seconds[phase] += time.perf_counter() - t
                timers._depth -= 1

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, real)


def patched(timers: Timers):
    stack = contextlib.ExitStack()
    for owner, name, phase in ((Transformer, "forward", "forward"), (torch.Tensor, "backward", "backward"),
                               (torch.nn.utils, "clip_grad_norm_", "clip"), (torch.optim.AdamW, "step", "optimizer"),
                               (torch.optim.Optimizer, "zero_grad", "zero_grad"), (loop_mod._Run, "_batch", "batch"),
                               (loop_mod._Run, "_flush", "flush"), (BatchStream, "batch", "batch")):
        stack.callback(timers.wrap(owner, name, phase))
    return stack


def ours(shape, config, dataset, timers: Timers, warmup: int) -> float:
    marks = {}

    def progress(p):
        if p.phase == "train" and p.step in (warmup, config.total_steps):
            marks[p.step] = time.perf_counter()
            timers.active = p.step == warmup  # from the end of the warm-up to the last step

    timers.active = False
    result = train(shape, config, dataset=dataset, progress=progress)
    timers.active = False
    if result.status != "completed":
        raise SystemExit(f"ours: {result.status} {result.error}")
    return marks[config.total_steps] - marks[warmup]


def plain(shape, config, dataset, timers: Timers, warmup: int) -> float:
    torch.manual_seed(config.seed)
    model = Transformer(shape).train()
    groups = groups_of(list(model.named_parameters()), config, ("embed.weight", "pos_embed.weight"))
    stream = BatchStream(dataset, seq_len=config.seq_len, batch_size=config.batch_size, seed=config.seed)
    timers.active = False
    seconds, _ = plain_loop(model, groups, config, stream, torch.device("cpu"), warmup=warmup, hf=False,
                            adamw="default", clip=False, on_warm=lambda: setattr(timers, "active", True))
    timers.active = False
    return seconds


class OpCounter(TorchDispatchMode):
    """Counts the aten ops dispatched while it is active, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


class HFLoss(torch.nn.Module):
    """`GPT2LMHeadModel` with the (logits, loss) interface of our model (the loss as bench_train.py's loop has it)."""

    def __init__(self, hf) -> None:
        super().__init__()
        self.hf = hf

    def forward(self, idx, targets):
        logits = self.hf(input_ids=idx).logits
        return logits, torch.nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def model_set(L: int, H: int, vocab: int, seq_len: int, *, with_hf: bool) -> dict[str, torch.nn.Module]:
    """Our Transformer, the hand-written GPT-2 and (with_hf, where transformers is installed) Hugging Face's, of
    one GPT-2-style shape, all with our initial weights (seed 0)."""
    from bench_train import hand_model, hf_model

    shape = Shape(n_layers=L, d_model=H, n_heads=max(1, H // 64), vocab_size=vocab, max_seq_len=seq_len, bias="all")
    torch.manual_seed(0)
    out = {"ours": Transformer(shape).train(), "hand": hand_model(shape, torch.device("cpu"))}
    if with_hf:
        try:
            out["hf"] = HFLoss(hf_model(shape, torch.device("cpu")))
        except ImportError:
            print("hf: transformers is not installed; left out")
    return out


def fwd_bwd(model, x, y, amp):
    """(forward seconds, backward seconds, loss) of one step; gradients dropped afterwards."""
    t0 = time.perf_counter()
    with amp:
        _, loss = model(x, y)
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    for p in model.parameters():
        p.grad = None
    return t1 - t0, t2 - t1, loss.detach()


def op_profile(model, x, y, amp, steps: int = 3) -> tuple[float, dict[str, tuple[float, float]]]:
    """(host ms per step between top-level ops, {op: (calls, self ms) per step}) under torch.profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            fwd_bwd(model, x, y, amp)
        wall = time.perf_counter() - t0
    top = [e for e in prof.events() if e.cpu_parent is None and not e.name.startswith("ProfilerStep")]
    host = 1e3 * (wall - sum(e.cpu_time_total for e in top) / 1e6) / steps
    return host, {e.key: (e.count / steps, e.self_cpu_time_total / 1e3 / steps) for e in prof.key_averages()}


def profile_models(args, dataset) -> int:
    """The `--models` comparison (see the module docstring)."""
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if args.dtype == "bf16" else contextlib.nullcontext()
    stream = BatchStream(dataset, seq_len=args.seq_len, batch_size=args.batch, seed=0)
    x, y = (torch.from_numpy(a) for a in stream.batch(0))
    print(f"models alone (forward + backward, no optimizer): seq {args.seq_len}, batch {args.batch}, {args.dtype}, "
          f"{args.steps} steps ({args.warmup} warm-up) x {args.rounds} rounds, {args.threads} threads, torch "
          f"{torch.__version__}; load average {os.getloadavg()[0]:.2f}")
    for dims in args.shapes.split(","):
        L, H = (int(v) for v in dims.split("x"))
        models = model_set(L, H, dataset.vocab_size, args.seq_len, with_hf=not args.no_hf)
        names = list(models)
        counts, losses = {}, {}
        for name, model in models.items():
            fwd, bwd = OpCounter(), OpCounter()
            with fwd, amp:
                _, loss = model(x, y)
            with bwd:
                loss.backward()
            model.zero_grad(set_to_none=True)
            counts[name] = (fwd.counts, bwd.counts)
            losses[name] = loss.item()
        ms = {name: {"forward": [], "backward": []} for name in names}
        busy0, wall0 = busy_jiffies(), time.perf_counter()
        for r in range(args.rounds + 1):  # round 0 warms every model up and is not counted
            for name in names[r % len(names):] + names[: r % len(names)]:
                times = [fwd_bwd(models[name], x, y, amp)[:2] for _ in range(args.steps)][args.warmup:]
                if r:
                    ms[name]["forward"].append(1e3 * statistics.mean(t[0] for t in times))
                    ms[name]["backward"].append(1e3 * statistics.mean(t[1] for t in times))
        busy1 = busy_jiffies()
        other = max(0.0, (busy1[0] - busy0[0]) - (busy1[1] - busy0[1])) / (time.perf_counter() - wall0)
        host, events = {}, {}
        for name in names * 2:  # the second pass of each is kept (warm)
            host[name], events[name] = op_profile(models[name], x, y, amp)
        same = ", ".join(f"{n} {'bit for bit' if losses[n] == losses['ours'] else 'DIFFERS'}" for n in names[1:])
        print(f"\nL{L}-H{H}: loss ours {losses['ours']:.6f} ({same}); other processes used {other:.2f} cores "
              "meanwhile" + (" (NOT quiet)" if other > 0.25 else ""))
        print(f"{'':>24} " + " ".join(f"{n:>10}" for n in names) + " " + " ".join(f"{n + '/ours':>22}"
                                                                               for n in names[1:]))
        for i, phase in enumerate(("forward", "backward")):
            print(f"{phase + ' aten ops':>24} " + " ".join(f"{sum(counts[n][i].values()):>10}" for n in names))
        for phase in ("forward", "backward"):
            med = {n: statistics.median(ms[n][phase]) for n in names}
            cells = []
            for n in names[1:]:
                pair = [a / b for a, b in zip(ms[n][phase], ms["ours"][phase])]
                cell = f"{med[n] / med['ours']:.3f} ({min(pair):.2f}-{max(pair):.2f})"
                cells.append(f"{cell:>22}")
            print(f"{phase + ' ms':>24} " + " ".join(f"{med[n]:>10.2f}" for n in names) + " " + " ".join(cells))
        print(f"{'host ms between ops':>24} " + " ".join(f"{host[n]:>10.2f}" for n in names) + "  (profiled)")
        for other_name in names[1:]:
            for i, phase in enumerate(("forward", "backward")):
                a, b = counts["ours"][i], counts[other_name][i]
                for op in sorted(k for k in set(a) | set(b) if a[k] != b[k]):
                    print(f"{phase + ' count ours ' + other_name:>24} {a[op]:>10} {b[op]:>10}   {op}")
        differ = []
        for key in set(events["ours"]) | set(events["hand"]):
            (co, to), (ch, th) = events["ours"].get(key, (0, 0.0)), events["hand"].get(key, (0, 0.0))
            if co != ch or abs(to - th) > max(args.op_ms, 0.05 * max(to, th)):
                differ.append((to - th, key, co, ch, to, th))
        print(f"{'self ms per step':>24} (ours against hand: ops whose count differs or whose self time differs by "
              f"more than {args.op_ms} ms and 5%; ours - hand, largest first)")
        for d, key, co, ch, to, th in sorted(differ, reverse=True)[: args.top]:
            print(f"{key[:40]:>40} calls {co:>6.0f} {ch:>6.0f}  ms {to:>8.3f} {th:>8.3f}  {d:>+8.3f}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="16x64,1x256")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--adamw", default="fused,foreach")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--models", action="store_true", help="compare the models alone: ours against handwritten_gpt.py")
    p.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"), help="--models: autocast to bf16 or not")
    p.add_argument("--op-ms", type=float, default=0.05, help="--models: smallest self-time difference shown")
    p.add_argument("--top", type=int, default=25, help="--models: how many differing ops to show")
    p.add_argument("--no-hf", action="store_true", help="--models: leave Hugging Face's GPT2LMHeadModel out")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dataset = load_dataset(corpus="shakespeare", tokenizer="byte")
    if args.models:
        return profile_models(args, dataset)
    kernels = args.adamw.split(",")
    print(f"per-phase wall ms per step: seq {args.seq_len}, batch {args.batch}, {args.steps} steps "
          f"({args.warmup} warm-up) x {args.rounds} rounds, {args.threads} threads, torch {torch.__version__}; "
          f"load average {os.getloadavg()[0]:.2f}")
    timers = Timers()
    with patched(timers):
        for dims in args.shapes.split(","):
            L, H = (int(v) for v in dims.split("x"))
            shape = Shape(n_layers=L, d_model=H, n_heads=max(1, H // 64), vocab_size=dataset.vocab_size,
                          max_seq_len=args.seq_len, bias="all")
            base = TrainConfig(corpus="shakespeare", seq_len=args.seq_len, batch_size=args.batch, steps=args.steps,
                               threads=args.threads, eval_windows=2, device="cpu")
            who = {**{f"ours {k}": (ours, base.with_(adamw=k)) for k in kernels}, "plain": (plain, base)}
            cells: dict[str, dict[str, list[float]]] = {w: collections.defaultdict(list) for w in who}
            timed_steps = args.steps - args.warmup
            busy0, wall0 = busy_jiffies(), time.perf_counter()
            for r in range(args.rounds + 1):  # round 0 warms every contender up and is not counted
                names = list(who)[r % len(who):] + list(who)[: r % len(who)]
                for name in names:
                    fn, config = who[name]
                    timers.seconds.clear()
                    wall = fn(shape, config, dataset, timers, args.warmup)
                    if r == 0:
                        continue
                    for phase in PHASES:
                        cells[name][phase].append(1e3 * timers.seconds.get(phase, 0.0) / timed_steps)
                    cells[name]["other"].append(1e3 * (wall - sum(timers.seconds.values())) / timed_steps)
                    cells[name]["total"].append(1e3 * wall / timed_steps)
            busy1 = busy_jiffies()
            other_cores = max(0.0, (busy1[0] - busy0[0]) - (busy1[1] - busy0[1])) / (time.perf_counter() - wall0)
            print(f"\nL{L}-H{H}: other processes used {other_cores:.2f} cores meanwhile"
                  + (" (NOT quiet)" if other_cores > 0.25 else ""))
            print(f"{'phase':>10} " + " ".join(f"{w:>13}" for w in who))
            for phase in (*PHASES, "other", "total"):
                print(f"{phase:>10} " + " ".join(f"{statistics.median(cells[w][phase]):>13.2f}" for w in who))
            plain_total = statistics.median(cells["plain"]["total"])
            print(f"{'plain/ours':>10} " + " ".join(f"{plain_total / statistics.median(cells[w]['total']):>13.3f}"
                                                  for w in who))
    return 0


if __name__ == "__main__":
    sys.exit(main())
