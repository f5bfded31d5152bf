"""The collective bandwidth of a torch.distributed backend on this machine, measured.

`measure_link(backend, ranks)` starts `ranks` local processes of a `gloo` (CPU) or `nccl` (CUDA) group
and times all-reduces of 4 KiB to 16 MiB (fp32, best of a few repeats after a warm-up). A ring
all-reduce of n bytes over r ranks takes 2(r-1)/r x n / bw + 2(r-1) x latency (Patarasuk and Yuan
2009), so a least-squares line through (2(r-1)/r x n, t) gives the bus bandwidth bw (its inverse
slope) and the latency per ring step (its intercept / 2(r-1)). The result is saved next to this
machine's profile (`collective-<backend>-<ranks>.json` in the cache folder) and read by the trainer,
which predicts each measured collective's time from it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from depthwidth.machine.paths import cache_dir

SIZES = (1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24)
QUICK_SIZES = (1 << 12, 1 << 16, 1 << 20)


@dataclass(frozen=True, kw_only=True, slots=True)
class LinkMeasurement:
    backend: str
    ranks: int
    bandwidth: float  # bytes/s, ring bus bandwidth
    latency_s: float  # per ring step
    points: list  # [bytes, seconds] per all-reduce size
    created: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def link_path(backend: str, ranks: int, *, cache: str | None = None) -> Path:
    return Path(cache_dir(cache)) / f"collective-{backend}-{ranks}.json"


def load_link(backend: str, ranks: int, *, cache: str | None = None) -> LinkMeasurement | None:
    """The saved measurement for `backend` with `ranks` processes (or with 2, the one `hw measure` makes)."""
    for r in dict.fromkeys((ranks, 2)):
        path = link_path(backend, r, cache=cache)
        if path.is_file():
            try:
                return LinkMeasurement(**json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, TypeError):
                return None
    return None


def fit_ring(points: list, ranks: int) -> tuple[float, float]:
    """(bandwidth, latency per ring step) of a least-squares line t = a + x / bw, x = 2(r-1)/r x n."""
    xs = [2 * (ranks - 1) / ranks * n for n, _ in points]
    ts = [t for _, t in points]
    mx, mt = sum(xs) / len(xs), sum(ts) / len(ts)
    slope = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sum((x - mx) ** 2 for x in xs)
    intercept = max(0.0, mt - slope * mx)
    return 1.0 / slope, intercept / (2 * (ranks - 1))


def measure_link(*, backend: str = "gloo", ranks: int = 2, quick: bool = False,
                 cache: str | None = None) -> LinkMeasurement:
    import tempfile

    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="dwlink-") as tmp:
        mp.start_processes(_worker, args=(ranks, port, backend, QUICK_SIZES if quick else SIZES, tmp),
                           nprocs=ranks, start_method="spawn", join=True)
        points = json.loads(Path(tmp, "points.json").read_text(encoding="utf-8"))
    bandwidth, latency = fit_ring(points, ranks)
    result = LinkMeasurement(backend=backend, ranks=ranks, bandwidth=bandwidth, latency_s=latency, points=points,
                             created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    path = link_path(backend, ranks, cache=cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")
    return result


def _worker(rank: int, ranks: int, port: int, backend: str, sizes, tmp: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // ranks))
    dist.init_process_group(backend, rank=rank, world_size=ranks)
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    points = []
    for nbytes in sizes:
        x = torch.ones(nbytes // 4, device=device)
        best = float("inf")
        for i in range(4):
            dist.barrier()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i:
                best = min(best, time.perf_counter() - t0)
        points.append([nbytes, best])
    if rank == 0:
        Path(tmp, "points.json").write_text(json.dumps(points), encoding="utf-8")
    dist.destroy_process_group()


__all__ = ["LinkMeasurement", "fit_ring", "link_path", "load_link", "measure_link"]
