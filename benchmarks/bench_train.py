"""Trainer speed: `depthwidth.train.train` against a plain nanoGPT-style loop and against Hugging Face
`GPT2LMHeadModel` at the same shape, wall clock, interleaved.

Every contender trains a GPT-2-style shape (learned positions, LayerNorm, GELU-tanh, biases, tied head) from
the same initial weights (the same seed; Hugging Face gets our initial state through the export layout), on the
same batches (`BatchStream`), with the same AdamW parameter groups, threads and dtype:
- ours: `train(shape, config)` at its defaults (AdamW `fused`, gradient clipping at 1.0), everything it does per
  step (learning rate per group, batch, stream hash, loss and gradient-norm bookkeeping, progress);
- plain: our `Transformer` in the shortest loop (set lr, batch, forward, backward, step, zero_grad, loss.item())
  with torch's default AdamW (on CPU the per-tensor loop) and no clipping - the loop a user writes;
- plain+clip: the same with nanoGPT's clipping at 1.0 (settings apart, the same loop);
- plain+mem: the plain loop in a process whose C allocator keeps freed memory, as every trainer process has it
  (`machine/host_memory.py`: on CPU, glibc otherwise maps and faults in a step's buffers again every step);
  ours/plain+mem is what remains once a user copies that setting (no target: informational);
- same: the shortest loop with ours' AdamW and clipping: ours/same is the trainer's own overhead, and its losses
  must match ours bit for bit;
- hand: the GPT-2 a user writes by hand (`handwritten_gpt.py`: fused qkv, SDPA, tanh-GELU MLP, tied head) in the
  `same` loop, from our initial weights: the same computation as ours, op for op, so its losses match ours bit
  for bit and ours/hand is what our model and trainer cost beyond the model's arithmetic;
- hf: `GPT2LMHeadModel` (SDPA attention) in the `same` loop: another implementation of the same model (its
  losses match ours to float tolerance, not bitwise).
Contenders run in two spawned worker processes, alternating: `ours`, `same` and `plain+mem` in one whose
allocator keeps freed memory, `plain`, `plain+clip`, `hand` and `hf` in one with the C library's allocator as a
user's script has it (the setting is process-wide and cannot be undone, so one process cannot hold both).
So ours/plain splits into implementation (ours/same: the trainer; same/plain+clip: the AdamW) and settings
(plain+clip/plain: clipping).
Each contender runs `--steps` steps per round; the first `--warmup` steps (allocator, kernel choice) are
excluded by count; its time is the wall clock from the end of the warm-up to the end of the last step (the
device synchronized at both ends), so everything done per step counts. Rounds rotate the order so that other
load hits all alike; tokens/s is the median over rounds, and each ratio's range within single rounds is the
noise band. MFU is model FLOPs
(`shapes.flops`, train per token) x tokens/s over the measured GEMM peak (`machine.peak_flops`) and, on a
GPU with a table row, over the vendor's dense peak.

Quiet check: for every row the CPU time that other processes used while it ran (from /proc/stat minus our
own) is printed in cores; above 0.25 the row is marked `NOISY` and the summary says the machine was not
quiet. Run it through the quiet wrapper where one exists.

Targets: ours/plain and ours/plain+clip >= 1.05, ours/same and ours/hand >= 1.0 (a row whose range within rounds
reaches the target counts as within noise) and ours/hf >= 1.2. Exit status 1 when a row misses beyond noise.

    python benchmarks/bench_train.py [--steps 10] [--warmup 2] [--rounds 3] [--dtypes fp32,bf16]
        [--shapes 16x64,4x128,1x256,8x256] [--seq-len 128] [--batch 32] [--threads N] [--device cpu]
        [--contenders ours,same,hand,hf]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from depthwidth.data import BatchStream, load_dataset
from depthwidth.machine import capabilities, peak_flops
from depthwidth.model import Transformer
from depthwidth.shapes import Shape, count_params
from depthwidth.shapes.flops import flops
from depthwidth.train import TrainConfig, lr_at, param_groups, train

TARGET_PLAIN, TARGET_SAME, TARGET_HAND, TARGET_HF, NOISY_CORES = 1.05, 1.0, 1.0, 1.2, 0.25
#: contender -> (AdamW, clipping, model) of its plain loop (`ours` is the trainer): the model is our
#: `Transformer`, the hand-written GPT (`handwritten_gpt.py`) or Hugging Face's `GPT2LMHeadModel`
PLAIN = {"plain": ("default", False, "ours"), "plain+clip": ("default", True, "ours"),
         "plain+mem": ("default", False, "ours"), "same": (None, True, "ours"), "hand": (None, True, "hand"),
         "hf": (None, True, "hf")}
CONTENDERS = ("ours", *PLAIN)
HERE = Path(__file__).resolve().parent
#: which worker process runs a contender: "user" keeps the C library's allocator as a user's own script has
#: it; "kept" has `machine.host_memory.keep_freed_memory` applied, as every trainer process does
WORKER = {"ours": "kept", "same": "kept", "plain+mem": "kept", "plain": "user", "plain+clip": "user", "hand": "user",
          "hf": "user"}


def busy_jiffies(pids=()) -> tuple[float, float]:
    """(CPU seconds all processes used, CPU seconds this process and the processes `pids` used) so far."""
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    t = os.times()
    own = t.user + t.system
    for pid in pids:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        own += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return (sum(v) - v[3] - v[4]) / tick, own


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def groups_of(named, config: TrainConfig, embeddings: tuple[str, ...]) -> list[dict]:
    decay = [p for n, p in named if p.dim() >= 2 and n not in embeddings]
    rest = [p for n, p in named if not (p.dim() >= 2 and n not in embeddings)]
    return [{"params": decay, "weight_decay": config.weight_decay}, {"params": rest, "weight_decay": 0.0}]


#: the AdamW implementations a plain loop may use: torch's default (on CPU the per-tensor loop), or the one
#: `TrainConfig.adamw` names
ADAMW = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def plain_loop(model, groups, config: TrainConfig, stream: BatchStream, device, *, warmup: int, hf: bool,
               adamw: str = "default", clip: bool = False, on_warm=None):
    """The shortest training loop; returns (seconds from the end of step `warmup` to the end, losses).
    `adamw`: which AdamW (`ADAMW`); `clip`: clip the gradient norm at config.grad_clip as nanoGPT does."""
    torch.manual_seed(config.seed)
    opt = torch.optim.AdamW(groups, lr=config.lr, betas=(config.beta1, config.beta2), eps=config.eps, **ADAMW[adamw])
    params = [p for g in groups for p in g["params"]]
    amp = (torch.autocast(device.type, dtype=torch.bfloat16) if config.dtype == "bf16"
           else contextlib.nullcontext())
    losses, t0 = [], None
    for step in range(config.total_steps):
        if step == warmup:
            sync(device)
            t0 = time.perf_counter()
            if on_warm is not None:
                on_warm()
        for g in opt.param_groups:
            g["lr"] = lr_at(config, step)
        x, y = stream.batch(step)
        x, y = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
        with amp:
            if hf:
                logits = model(input_ids=x).logits
                loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
            else:
                _, loss = model(x, y)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    sync(device)
    return time.perf_counter() - t0, losses


def run_ours(shape, config, dataset, device, *, warmup: int):
    marks = {}

    def progress(p):
        if p.phase == "train" and p.step in (warmup, config.total_steps):
            marks[p.step] = time.perf_counter()  # the trainer has synchronized: it read the loss

    result = train(shape, config, dataset=dataset, progress=progress)
    if result.status != "completed" or warmup not in marks:
        raise SystemExit(f"ours: {result.status} {result.error or ''} (progress at {sorted(marks)})")
    return marks[config.total_steps] - marks[warmup], [c["loss"] for c in result.curve], result


def hf_model(shape: Shape, device):
    from transformers import GPT2Config, GPT2LMHeadModel

    from depthwidth.hfio.arch import choose_arch, hf_config
    from depthwidth.hfio.layout import to_hf_state

    cfg = {k: v for k, v in hf_config(shape).items() if k not in ("architectures", "model_type", "depthwidth")}
    model = GPT2LMHeadModel(GPT2Config(**cfg, attn_implementation="sdpa"))
    torch.manual_seed(0)
    ours = Transformer(shape)  # the same initial weights as ours and plain (seed 0)
    model.load_state_dict(to_hf_state(ours.state_dict(), choose_arch(shape)), strict=False)
    model.tie_weights()
    return model.to(device).train()


def hand_model(shape: Shape, device):
    """The hand-written GPT of `shape` (a GPT-2-style one) with our initial weights (seed 0)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from handwritten_gpt import GPT, from_ours

    model = GPT(n_layers=shape.n_layers, d_model=shape.d_model, n_heads=shape.n_heads, vocab_size=shape.vocab_size,
                max_seq_len=shape.max_seq_len, d_ff=shape.d_ff, eps=shape.norm_eps)
    torch.manual_seed(0)
    model.load_state_dict(from_ours(Transformer(shape).state_dict()))
    return model.to(device).train()


def vendor_peak(device, dtype: str) -> float | None:
    if device.type != "cuda":
        return None
    try:
        from depthwidth.shapes.hardware import HARDWARE, match_gpu
    except ImportError:
        return None
    row = match_gpu(torch.cuda.get_device_name(device), mem_capacity=torch.cuda.get_device_properties(device)
                    .total_memory)
    return HARDWARE[row].peak("bf16" if dtype == "bf16" else "tf32") if row else None


def run_contender(c: str, dims, dtype: str, args, dataset, device):
    """One contender's timed run at one shape: (seconds, losses, the run's vendor MFU or None)."""
    L, H = dims
    shape, config, stream = row_setup(dims, dtype, args, dataset, device)
    gc.collect()  # the previous contender's garbage is nobody's cost
    if c == "ours":
        s, losses, result = run_ours(shape, config, dataset, device, warmup=args.warmup)
        return s, losses, result.mfu_vendor
    adamw, clip, kind = PLAIN[c]
    torch.set_num_threads(args.threads)
    torch.manual_seed(config.seed)
    if kind == "ours":
        model = Transformer(shape).to(device).train()
        groups = groups_of(list(model.named_parameters()), config, ("embed.weight", "pos_embed.weight"))
    elif kind == "hand":
        model = hand_model(shape, device)
        groups = groups_of(list(model.named_parameters()), config, ("wte.weight", "wpe.weight"))
    else:
        model = hf_model(shape, device)
        groups = groups_of(list(model.named_parameters()), config, ("transformer.wte.weight", "transformer.wpe.weight"))
    s, losses = plain_loop(model, groups, config, stream, device, warmup=args.warmup, hf=kind == "hf",
                           adamw=adamw or config.adamw, clip=clip)
    return s, losses, None


def row_setup(dims, dtype, args, dataset, device):
    L, H = dims
    shape = Shape(n_layers=L, d_model=H, n_heads=max(1, H // 64), vocab_size=dataset.vocab_size,
                  max_seq_len=args.seq_len, bias="all")
    config = TrainConfig(corpus=args.corpus, seq_len=args.seq_len, batch_size=args.batch, steps=args.steps,
                         threads=args.threads, dtype=dtype, eval_windows=2, device=str(device))
    return shape, config, BatchStream(dataset, seq_len=args.seq_len, batch_size=args.batch, seed=config.seed)


def _worker(conn, kind: str, corpus: str, device: str) -> None:
    """A contender process: runs what it is sent, one at a time, until it gets None."""
    if kind == "kept":
        from depthwidth.machine.host_memory import keep_freed_memory

        keep_freed_memory()
    dataset = load_dataset(corpus=corpus, tokenizer="byte")
    while (job := conn.recv()) is not None:
        c, dims, dtype, args = job
        conn.send(run_contender(c, dims, dtype, args, dataset, torch.device(device)))


class Workers:
    """The two contender processes (spawned: nothing of this process's heap or torch state carries over)."""

    def __init__(self, corpus: str, device: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conns, self.procs = {}, []
        for kind in ("user", "kept"):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(theirs, kind, corpus, device), daemon=True)
            proc.start()
            self.conns[kind] = mine
            self.procs.append(proc)

    def run(self, c: str, dims, dtype: str, args):
        conn = self.conns[WORKER[c]]
        conn.send((c, dims, dtype, args))
        return conn.recv()

    def close(self) -> None:
        for conn in self.conns.values():
            conn.send(None)
        for proc in self.procs:
            proc.join(timeout=30)


def bench_row(dims, dtype, args, dataset, device, have_hf, workers: Workers, who=None):
    shape, config, _ = row_setup(dims, dtype, args, dataset, device)
    who = [c for c in (who or CONTENDERS) if c != "hf" or have_hf]
    seconds = {c: [] for c in who}
    losses, mfu_vendor = {}, None
    pids = [p.pid for p in workers.procs]
    busy0 = busy_jiffies(pids)
    wall0 = time.perf_counter()
    for r in range(args.rounds):
        for c in who[r % len(who):] + who[: r % len(who)]:
            s, losses[c], vendor = workers.run(c, dims, dtype, args)
            mfu_vendor = vendor if c == "ours" else mfu_vendor
            seconds[c].append(s)
    busy1 = busy_jiffies(pids)
    wall = time.perf_counter() - wall0
    other = max(0.0, (busy1[0] - busy0[0]) - (busy1[1] - busy0[1])) / wall  # the rest of the machine
    timed = (args.steps - args.warmup) * config.tokens_per_step
    tps = {c: timed / statistics.median(v) for c, v in seconds.items()}
    pair = {c: [p / o for o, p in zip(seconds["ours"], seconds[c])] for c in who if c != "ours"}
    per_token = flops(shape, seq_len=args.seq_len).train_per_token
    return dict(shape=shape, tps=tps, pair=pair, other=other, losses=losses, per_token=per_token,
                mfu_vendor=mfu_vendor, params=count_params(shape).total)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per run, warm-up included (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="first steps left out of the timing (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="rotating rounds per row (default 3: each contender "
                        "goes first once)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (default: all cores)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--shapes", default="16x64,4x128,1x256,8x256", help="LxH,... deep-narrow to shallow-wide")
    parser.add_argument("--dtypes", default=None, help="fp32,bf16 (default: fp32, and bf16 where native)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--corpus", default="shakespeare")
    parser.add_argument("--no-hf", action="store_true", help="leave Hugging Face out")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help=f"which to run, ours always among them (default: all of {','.join(CONTENDERS)})")
    args = parser.parse_args()
    chosen = args.contenders.split(",")
    if unknown := [c for c in chosen if c not in CONTENDERS]:
        parser.error(f"--contenders: unknown {', '.join(unknown)}; expected some of {', '.join(CONTENDERS)}")
    args.contenders = ["ours", *[c for c in CONTENDERS if c in chosen and c != "ours"]]
    if not 0 < args.warmup < args.steps:
        parser.error("--warmup must be at least 1 and below --steps")
    device = torch.device(args.device)
    caps = capabilities(device)
    dtypes = args.dtypes.split(",") if args.dtypes else ["fp32", *(["bf16"] if caps.is_native("bf16") else [])]
    have_hf = not args.no_hf
    if have_hf:
        try:
            import transformers  # noqa: F401  (installed by the test extra, which `make bench` installs)
        except ImportError:
            print("hf: transformers is not installed (pip install -e '.[test]'); the hf column is left out")
            have_hf = False
    dims = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    dataset = load_dataset(corpus=args.corpus, tokenizer="byte")
    # one untimed pass of every contender first: imports and first-call costs land in no row
    workers = Workers(args.corpus, args.device)
    try:
        return report(args, dtypes, dims, dataset, device, have_hf, caps, workers)
    finally:
        workers.close()


def report(args, dtypes, dims, dataset, device, have_hf, caps, workers) -> int:
    who = args.contenders
    bench_row((1, 64), dtypes[0], argparse.Namespace(**{**vars(args), "steps": 3, "warmup": 1, "rounds": 1}),
              dataset, device, have_hf, workers, who)
    print(f"trainer vs plain loops vs HF GPT2LMHeadModel: {args.corpus}, byte tokens (vocab {dataset.vocab_size}), "
          f"seq {args.seq_len}, batch {args.batch}, {args.steps} steps ({args.warmup} warm-up) x {args.rounds} "
          f"rounds, {args.threads} threads, torch {torch.__version__}")
    print(f"device: {caps.describe()}; load average at start: {os.getloadavg()[0]:.2f} (1 min)")
    print("contenders: ours = depthwidth.train.train (AdamW fused, clip 1.0, every bookkeeping step); plain = the "
          "shortest loop with torch's default AdamW and no clipping (what a user writes); plain+clip = the same with "
          "nanoGPT's clipping at 1.0; plain+mem = plain in a process whose allocator keeps freed memory as ours' does "
          "(machine/host_memory.py); ours, same and plain+mem run in one worker process, plain, plain+clip, hand and "
          "hf in another with the C library's allocator as a user's script has it; same = the shortest loop with "
          "ours' AdamW and clipping (what is the trainer's own overhead); hand = the hand-written GPT-2 "
          "(handwritten_gpt.py) in the `same` loop; hf = GPT2LMHeadModel in the `same` loop")
    others = [c for c in who if c != "ours" and (c != "hf" or have_hf)]
    print(f"{'L-H':>8} {'params':>9} {'dtype':>5} {'ours tok/s':>10} "
          + " ".join(f"{'ours/' + c:>15}" for c in others)
          + f" {'MFU ours':>8} {'peak GF':>7} {'bits':>5} {'hf dloss':>8} {'other':>6}")
    ok, noisy = True, False
    for dtype in dtypes:
        peak = peak_flops(dtype=dtype, device=device, threads=args.threads)
        vendor = vendor_peak(device, dtype)
        for d in dims:
            row = bench_row(d, dtype, args, dataset, device, have_hf, workers, who)
            tps, pair = row["tps"], row["pair"]
            ratio = {c: tps["ours"] / tps[c] for c in others}
            mfu = row["per_token"] * tps["ours"] / peak.flops_per_s
            same = all(row["losses"]["ours"] == row["losses"][c] for c in ("same", "hand") if c in tps)
            dloss = (max(abs(a - b) for a, b in zip(row["losses"]["ours"], row["losses"]["hf"]))
                     if "hf" in tps else None)
            quiet = row["other"] <= NOISY_CORES
            noisy = noisy or not quiet
            target = {"plain": TARGET_PLAIN, "plain+clip": TARGET_PLAIN, "same": TARGET_SAME, "hand": TARGET_HAND,
                      "hf": TARGET_HF}
            missed = [c for c in others if c in target and ratio[c] < target[c] and max(pair[c]) < target[c]]
            ok = ok and not missed
            s = row["shape"]
            cells = " ".join(f"{f'{ratio[c]:.3f} ({min(pair[c]):.2f}-{max(pair[c]):.2f})':>15}" for c in others)
            print(f"{f'L{s.n_layers}-H{s.d_model}':>8} {row['params']:>9,} {dtype:>5} {tps['ours']:>10,.0f} {cells} "
                  f"{100 * mfu:>7.1f}% {peak.flops_per_s / 1e9:>7,.0f} {'same' if same else 'DIFF':>5} "
                  f"{f'{dloss:.1e}' if dloss is not None else '-':>8} {row['other']:>5.2f}{'' if quiet else ' NOISY'}"
                  + (f"  MISSED: {', '.join(missed)}" if missed else ""), flush=True)
            if vendor:
                print(f"{'':>8} MFU vs the vendor dense peak ({vendor / 1e12:,.0f} TFLOP/s): ours "
                      f"{100 * row['per_token'] * tps['ours'] / vendor:.1f}%; the run recorded "
                      f"{100 * (row['mfu_vendor'] or 0):.1f}%")
    if "same" in who:
        tiny = argparse.Namespace(**{**vars(args), "steps": 60, "warmup": 5, "rounds": 4, "seq_len": 32, "batch": 4})
        small = [c for c in ("ours", "same", "hand") if c in who]
        row = bench_row((2, 32), dtypes[0], tiny, dataset, device, False, workers, small)
        step = {c: tiny.batch * tiny.seq_len / v for c, v in row["tps"].items()}
        hand = (f", hand {1e3 * step['hand']:.3f} ms (ours/hand {row['tps']['ours'] / row['tps']['hand']:.3f}, "
                f"pair {min(row['pair']['hand']):.3f}-{max(row['pair']['hand']):.3f})" if "hand" in step else "")
        print(f"trainer overhead per step, where a step costs little (L2-H32, seq 32, batch 4, {tiny.steps} steps x "
              f"{tiny.rounds} rounds): ours {1e3 * step['ours']:.3f} ms, same {1e3 * step['same']:.3f} ms, "
              f"difference {1e3 * (step['ours'] - step['same']):+.3f} ms "
              f"(ours/same {row['tps']['ours'] / row['tps']['same']:.3f}, "
              f"pair {min(row['pair']['same']):.3f}-{max(row['pair']['same']):.3f}){hand}, other {row['other']:.2f} "
              "cores")
    print(f"columns: tok/s = median over rounds of (timed steps x batch tokens) / wall seconds; ours/X = tok/s ratio "
          f"(in brackets its range within single rounds, the noise band); MFU = model FLOPs x tok/s / measured GEMM "
          f"peak ({peak.source}); bits = the losses of ours, `same` and `hand` bit for bit; hf dloss = largest "
          "|ours - hf| loss over the steps; other = CPU cores other processes used meanwhile")
    print(f"machine {'NOT quiet (a row has other > ' + str(NOISY_CORES) + ' cores)' if noisy else 'quiet'}; "
          f"load average at end: {os.getloadavg()[0]:.2f}")
    print(f"targets ours/plain and ours/plain+clip >= {TARGET_PLAIN}, ours/same >= {TARGET_SAME}, ours/hand >= "
          f"{TARGET_HAND}, ours/hf >= {TARGET_HF} (a row whose round range reaches the target counts as within noise): "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
