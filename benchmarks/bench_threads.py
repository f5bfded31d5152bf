"""Which split of the machine's cores trains fastest: one run on all cores, or one run per core.

For each shape, the same training step (our Transformer, AdamW, fp32, random tokens) runs as
  split A: 1 process x C threads         (C = the cores this process may use)
  split B: C processes x 1 thread each   (side by side)
each for `--seconds` after its warm-up (3 steps), all processes of a split starting at the same moment; the
result is the tokens/s of all its processes together. Splits alternate over `--rounds` rounds and
each keeps its best round. Run it on a quiet machine (`uptime` is printed before and after); the
study runner's default (`depthwidth.study.executors.local.threads_per_run`) encodes what it found.

    python benchmarks/bench_threads.py [--seconds 6] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

#: (label, n_layers, d_model, seq_len, batch): the test suite's tiny shape, the demo's members, larger ones
SHAPES = (
    ("tiny L1-H32 s32 b8", 1, 32, 32, 8),
    ("demo L13-H56 s128 b16", 13, 56, 128, 16),
    ("demo L4-H104 s128 b16", 4, 104, 128, 16),
    ("demo L2-H144 s128 b16", 2, 144, 128, 16),
    ("L8-H256 s128 b32", 8, 256, 128, 32),
    ("L8-H512 s256 b16", 8, 512, 256, 16),
)

WORKER = r"""
import json, sys, time
import torch
from depthwidth.model.transformer import Transformer
from depthwidth.shapes.shape import Shape
layers, width, seq, batch, threads, seconds = json.loads(sys.argv[1])
torch.set_num_threads(threads)
torch.manual_seed(0)
shape = Shape(n_layers=layers, d_model=width, n_heads=max(1, width // 8), vocab_size=256, max_seq_len=seq)
model = Transformer(shape)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randint(0, 256, (batch, seq + 1))
def step():
    _, loss = model(x[:, :-1], x[:, 1:])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
for _ in range(3):
    step()
print("ready", flush=True)
sys.stdin.readline()  # every process of the split starts timing at the same moment
steps, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds:
    step()
    steps += 1
print(json.dumps({"tokens_per_s": steps * batch * seq / (time.perf_counter() - t0)}))
"""


def split(shape: tuple, *, processes: int, threads: int, seconds: float) -> float:
    _, layers, width, seq, batch = shape
    arg = json.dumps([layers, width, seq, batch, threads, seconds])
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, arg], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for _ in range(processes)]
    for p in procs:  # each has imported torch and warmed up
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate()[0] for p in procs]
    return sum(json.loads(o.strip().splitlines()[-1])["tokens_per_s"] for o in outs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shapes", default=None, help="comma-separated indices into SHAPES (default: all)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    shapes = SHAPES if args.shapes is None else tuple(SHAPES[int(i)] for i in args.shapes.split(","))
    print("uptime before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"{cores} cores; {args.seconds:g} s per split, best of {args.rounds} rounds")
    print(f"{'shape':24s} {f'1x{cores} tok/s':>12s} {f'{cores}x1 tok/s':>12s} {'ratio':>7s}")
    for shape in shapes:
        best = {"one": 0.0, "many": 0.0}
        for _ in range(args.rounds):
            best["one"] = max(best["one"], split(shape, processes=1, threads=cores, seconds=args.seconds))
            best["many"] = max(best["many"], split(shape, processes=cores, threads=1, seconds=args.seconds))
        print(f"{shape[0]:24s} {best['one']:12.0f} {best['many']:12.0f} {best['many'] / best['one']:7.2f}",
              flush=True)
    print("uptime after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
