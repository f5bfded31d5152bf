"""What a hostile input costs before it is refused, and what a damaged store costs to repair.

1. Untrusted checkpoints: files laid out as `depthwidth train` writes them whose recorded shape claims
   10^12 layers, 16,000 layers (within the bounds, the weights of 2) or d_model 65,536 (a 48 GiB model,
   the weights of d_model 16). Each is loaded by `load_checkpoint_model` in a fresh process: the time
   from the call to the refusal, and the process's peak resident memory (torch's import included).
   Targets: refused in under 1 s, peak memory under 1 GiB.
2. A finished study of examples/tiny.toml (2 shapes x 2 learning rates, 2 benchmarks) whose study.sqlite is
   overwritten with random bytes after its first page: `depthwidth study repair` must give back exactly
   the stored losses, curves and benchmark results of before (and how long it takes is printed).

Exit status 1 when a target is missed.

    python benchmarks/bench_hardening.py
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, sys, time
from pathlib import Path
from depthwidth.bench.target import load_checkpoint_model
from depthwidth.errors import UserError
start = time.perf_counter()
try:
    load_checkpoint_model(Path(sys.argv[1]))
    outcome = "loaded"
except UserError as exc:
    outcome = str(exc)
print(json.dumps({"seconds": time.perf_counter() - start, "outcome": outcome}))
"""
TARGET_SECONDS, TARGET_BYTES = 1.0, 1024**3
SPEC = Path(__file__).resolve().parents[1] / "examples" / "tiny.toml"


def write_checkpoint(path: Path, **claims) -> None:
    import torch

    from depthwidth.model.transformer import Transformer
    from depthwidth.shapes.shape import Shape
    from depthwidth.artifact.checkpoint import CHECKPOINT_FORMAT

    shape = Shape(n_layers=2, d_model=16, n_heads=2, vocab_size=32, max_seq_len=16)
    meta = {"step": 1, "shape": {**shape.to_dict(), **claims}}
    torch.save({"format": CHECKPOINT_FORMAT, "model": Transformer(shape).state_dict(), "optimizer": {},
                "rng": {"cpu": torch.get_rng_state()}, "meta": json.dumps(meta)}, path)


def measured(argv: list[str]) -> tuple[str, str, float, int]:
    """(stdout, stderr, wall seconds, peak resident bytes) of a fresh process running `argv`."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.stdout.read(), proc.stderr.read()  # a few lines each
    _, _, usage = os.wait4(proc.pid, 0)
    return out, err, time.perf_counter() - start, usage.ru_maxrss * 1024


def checkpoints(root: Path) -> bool:
    ok = True
    cases = {"n_layers = 10^12": {"n_layers": 10**12}, "n_layers = 16,000": {"n_layers": 16000},
             "d_model = 65,536": {"d_model": 65536, "n_heads": 512, "head_dim": None, "n_kv_heads": None,
                                  "d_ff": None}}
    print(f"{'claimed shape':<20} {'refused in':>11} {'peak RSS':>10}  message")
    for label, claims in cases.items():
        path = root / "claims.pt"
        write_checkpoint(path, **claims)
        out, _, _, peak = measured([sys.executable, "-c", CHILD, str(path)])
        seconds, message = json.loads(out)["seconds"], json.loads(out)["outcome"]
        met = seconds < TARGET_SECONDS and peak < TARGET_BYTES and message != "loaded"
        ok &= met
        print(f"{label:<20} {seconds * 1e3:>8.1f} ms {peak / 2**20:>7.0f} MiB  {message[message.find(': ') + 2:][:90]}"
              + ("" if met else "   <- target missed"))
    write_checkpoint(root / "claims.pt", n_layers=10**12)
    _, err, seconds, peak = measured([sys.executable, "-m", "depthwidth", "bench", "--checkpoint",
                                      str(root / "claims.pt")])
    print(f"the whole `depthwidth bench --checkpoint` process for 10^12 layers (torch's import included): "
          f"{seconds:.2f} s, peak RSS {peak / 2**20:.0f} MiB, {len(err.splitlines())} line on stderr")
    return ok


def stored(folder: Path) -> dict:
    from depthwidth.study import Store

    with Store.open(folder) as store:
        return {r.run_id: (r.status, json.dumps(store.result(r.run_id).data, sort_keys=True),
                           [p.to_dict() for p in store.curves(r.run_id)]) for r in store.runs()}


def repair(root: Path) -> bool:
    spec, study = SPEC, root / "study"
    env = {**os.environ, "DEPTHWIDTH_CACHE": str(root / "cache")}
    subprocess.run([sys.executable, "-m", "depthwidth", "study", "run", str(spec), "--dir", str(study), "--json"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    before = stored(study)
    store = study / "study.sqlite"
    data = bytearray(store.read_bytes())
    rng = random.Random(0)
    data[4096:] = bytes(rng.randrange(256) for _ in range(len(data) - 4096))
    store.write_bytes(bytes(data))
    status = subprocess.run([sys.executable, "-m", "depthwidth", "study", "status", str(study)], env=env,
                            capture_output=True, text=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "depthwidth", "study", "repair", str(study)], check=True, env=env)
    seconds = time.perf_counter() - start
    after = stored(study)
    same = after == before
    print(f"status of the damaged store: exit {status.returncode}: {status.stderr.strip()[:140]}")
    print(f"repair: {seconds:.2f} s (a whole process); {len(before)} runs stored before, {len(after)} after; "
          f"losses, curves and results identical: {same}")
    return same and status.returncode == 2


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="bench-hardening-"))
    try:
        ok = checkpoints(root)
        print()
        ok &= repair(root)
    finally:
        shutil.rmtree(root)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
