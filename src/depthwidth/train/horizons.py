"""Several token budgets from one run: the cooldown branches of a WSD run (`TrainConfig.horizons`).

A WSD run (`schedule = "wsd"`) stays at its peak learning rate until its last `decay_fraction` of steps, and
that stable phase does not depend on the run's length. So the run of `h * steps` steps (same seed, same
batches, same learning rates) is, up to the start of its own cooldown, exactly the longer run: it can branch
from the longer run's state there and train only its cooldown (Hägele et al. 2024, "Scaling laws and
compute-optimal training beyond fixed training durations", arXiv 2405.18392: a 10-20% cooldown matches a
cosine run of that length; Hu et al. 2024, MiniCPM, arXiv 2404.06395). On CPU the branch is bit-identical
to the standalone run of its length (tests/train/test_horizons.py).

The trainer keeps, at each branch's start, a checkpoint in `<run>/horizons/<h>/` recorded as the branch's own
run (config `branch_config`), and after the full run trains every branch as an ordinary resumable run of that
folder. The full run's result lists one `horizon_entry` per horizon, the last being the run itself.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from depthwidth.artifact.config import TrainConfig
from depthwidth.artifact.schedule import branch_config, cooldown_start
from depthwidth.artifact.folder import CHECKPOINT, RESULT
from depthwidth.artifact.records import CheckpointMeta
from depthwidth.artifact.result import TrainResult
from depthwidth.errors import UserError

HORIZONS_DIR = "horizons"


def branches(config: TrainConfig) -> dict[int, list[tuple[float, TrainConfig]]]:
    """{step at which a branch starts: [(fraction, its config), ...]} for every horizon before the last."""
    out: dict[int, list[tuple[float, TrainConfig]]] = {}
    for fraction in (config.horizons or ())[:-1]:
        branch = branch_config(config, fraction)
        out.setdefault(cooldown_start(branch), []).append((fraction, branch))
    return out


def branch_dir(root: Path, fraction: float) -> Path:
    return Path(root) / HORIZONS_DIR / f"{fraction:g}"


def check_horizons(config: TrainConfig) -> None:
    """What the trainer cannot branch yet: one run over several processes."""
    if config.horizons and config.nproc > 1:
        raise UserError(f"horizons with nproc={config.nproc}: cooldown branches are trained in one process only; "
                        "use nproc=1 or drop horizons")


def horizon_entry(fraction: float, result: TrainResult, *, branched_at: int | None) -> dict:
    """One horizon of a run's result: its budget, where its cooldown branched, and what it measured."""
    return {"fraction": fraction, "steps": result.steps, "tokens": result.tokens, "branched_at": branched_at,
            "status": result.status, "val_loss": result.val_loss, "val_loss_by_slice": result.val_loss_by_slice,
            "train_seconds": result.train_seconds, "tokens_per_s": result.tokens_per_s}


def save_branches(group: list[tuple[float, TrainConfig]], *, root: Path, step: int, total: int, shape, dataset,
                  meta: CheckpointMeta, model, optimizer, device) -> None:
    """Leave, for each horizon of `group` whose cooldown starts after `step` steps, a checkpoint recorded as
    that shorter run's own (its config; the curve and evaluations so far are the long run's), in its folder.
    A branch whose folder holds its finished result (a long run started again from an earlier checkpoint)
    is left as it is: its record is never replaced."""
    from depthwidth.artifact import checkpoint as ckpt  # torch: not for `check_horizons` (a study's preflight)
    from depthwidth.train.run_dir import prepare_run_dir

    for fraction, branch in group:
        folder = branch_dir(root, fraction)
        if (folder / RESULT).is_file():
            continue
        prepare_run_dir(folder, shape=shape, config=branch, dataset=dataset)
        record = dataclasses.replace(meta, config=branch.to_dict(),
                                     resumes=[f"branched at step {step} from the run of {total} steps"])
        ckpt.save_checkpoint(folder / CHECKPOINT, model=model, optimizer=optimizer, device=device,
                             meta=record.to_dict())


def with_horizons(train, shape, config: TrainConfig, result: TrainResult, *, root: Path, dataset,
                  progress=None) -> TrainResult:
    """`result` of the full run with every cooldown branch trained (`train`, the trainer itself, on each branch
    folder under `root` with resume=True: the checkpoint the full run left there, or the branch's finished
    result) and one `horizon_entry` per horizon listed, the last being the run itself."""
    entries = []
    for start, group in sorted(branches(config).items()):
        for fraction, branch in group:
            done = train(shape, branch, out_dir=branch_dir(root, fraction), resume=True, progress=progress,
                         dataset=dataset)
            entries.append(horizon_entry(fraction, done, branched_at=start))
    entries.sort(key=lambda e: e["fraction"])
    entries.append(horizon_entry(1.0, result, branched_at=None))
    return dataclasses.replace(result, horizons=entries)


__all__ = ["HORIZONS_DIR", "branch_config", "branch_dir", "branches", "check_horizons", "horizon_entry", "save_branches", "with_horizons"]
