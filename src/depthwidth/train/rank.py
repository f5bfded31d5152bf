"""One rank of a run started by `depthwidth.train.launch.spawn`: `python -m depthwidth.train.rank TMP` reads
the launcher's arguments from TMP/args.json, runs `train(...)` (RANK, WORLD_SIZE and the rendezvous are in
its environment) and writes rank 0's result (or a UserError's line) back into TMP. It is its own module so
that the launcher, which the trainer calls, never imports the trainer. First of all it ties its life to
the launcher's (`machine.die_with_parent`): a launcher that is killed takes its ranks with it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.machine.processes import die_with_parent
from depthwidth.train.launch import ARGS_FILE, ERROR_FILE, LAUNCHER_ENV, RESULT_FILE


def main(tmp: str) -> None:
    """Run this rank's `train(...)` with the arguments the launcher wrote into `tmp`."""
    if LAUNCHER_ENV in os.environ:
        die_with_parent(int(os.environ[LAUNCHER_ENV]))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    args = json.loads(Path(tmp, ARGS_FILE).read_text(encoding="utf-8"))
    import torch

    from depthwidth.shapes.shape import Shape
    from depthwidth.artifact.config import TrainConfig
    from depthwidth.train.loop import train

    cfg = TrainConfig.from_dict(args["config"])
    if cfg.threads is None:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    try:
        result = train(Shape.from_dict(args["shape"]), cfg, out_dir=args["out_dir"], resume=args["resume"])
    except UserError as exc:
        Path(tmp, ERROR_FILE).write_text(str(exc), encoding="utf-8")
        sys.exit(2)
    if rank == 0:
        Path(tmp, RESULT_FILE).write_text(json.dumps(result.to_dict()), encoding="utf-8")
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
