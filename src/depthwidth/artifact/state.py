"""`TrainState`: what a checkpoint saves and restores - the model (wrapped or not), its optimizer, the device
whose RNG travels with them, and the bookkeeping `CheckpointMeta`. The trainer keeps one and hands it to
the checkpoint writers (`artifact.checkpoint.save_state`, `train.dist_checkpoint`), which read nothing else
of the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from depthwidth.artifact import checkpoint as ckpt
from depthwidth.artifact.folder import CHECKPOINT
from depthwidth.artifact.records import CheckpointMeta


@dataclass(kw_only=True, slots=True)
class TrainState:
    """The live state of a run that a checkpoint holds (mutable: the trainer updates `meta` as it goes)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    device: torch.device
    meta: CheckpointMeta

    def rng(self) -> dict[str, torch.Tensor]:
        """The RNG states a checkpoint carries (CPU, and the GPU's on CUDA)."""
        return ckpt.rng_state(self.device)

    def restore(self, payload: dict) -> None:
        """Load a one-process checkpoint's model, optimizer and RNG states (`ckpt.load_checkpoint`'s payload)."""
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        ckpt.set_rng_state(payload["rng"], self.device)


def save_state(run_dir: Path, state: TrainState) -> Path:
    """Write `state` as the run folder's checkpoint.pt (atomically, the previous one kept)."""
    path = Path(run_dir) / CHECKPOINT
    ckpt.save_checkpoint(path, model=state.model, optimizer=state.optimizer, device=state.device,
                         meta=state.meta.to_dict())
    return path


__all__ = ["TrainState", "save_state"]
