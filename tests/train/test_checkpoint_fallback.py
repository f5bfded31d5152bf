"""A run keeps its last two checkpoints and resumes from the last readable one, or from step 0, saying
why in its result's `resumes`; on CPU the numbers equal the uninterrupted run's either way."""

from __future__ import annotations

import pytest

from depthwidth.errors import UserError
from depthwidth.train import train
from depthwidth.artifact.folder import CHECKPOINT, CHECKPOINT_PREV


class Stop(Exception):
    """Raised from the progress callback: the run stops as a killed one would, checkpoints on disk."""


def _numbers(result):
    return ([(c["step"], c["loss"], c["lr"], c["grad_norm"]) for c in result.curve], result.val_loss,
            [(e["step"], e["val_loss"]) for e in result.evals])


@pytest.fixture
def interrupted(tiny_shape, tiny_config, tmp_path):
    """(config, the uninterrupted result, a run folder stopped after step 10 with checkpoints of steps 8 and 4)."""
    cfg = tiny_config.with_(steps=12, checkpoint_every=4, eval_every=6, dropout=0.1)
    reference = train(tiny_shape, cfg, out_dir=tmp_path / "reference")

    def stop_at_10(p):
        if p.phase == "train" and p.step == 10:
            raise Stop

    run = tmp_path / "run"
    with pytest.raises(Stop):
        train(tiny_shape, cfg, out_dir=run, progress=stop_at_10)
    assert sorted(p.name for p in run.iterdir()) == [CHECKPOINT_PREV, CHECKPOINT, "run.json"]
    return cfg, reference, run


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def test_a_resume_from_the_last_checkpoint_is_recorded(tiny_shape, interrupted):
    cfg, reference, run = interrupted
    resumed = train(tiny_shape, cfg, out_dir=run, resume=True)
    assert resumed.resumes == ["resumed at step 8 from checkpoint.pt"]
    assert _numbers(resumed) == _numbers(reference) and reference.resumes == []


def test_a_truncated_last_checkpoint_falls_back_to_the_one_before(tiny_shape, interrupted):
    cfg, reference, run = interrupted
    _truncate(run / CHECKPOINT)
    resumed = train(tiny_shape, cfg, out_dir=run, resume=True)
    (note,) = resumed.resumes
    assert note.startswith("resumed at step 4 from checkpoint.prev.pt: checkpoint.pt unreadable (cannot be read "
                           "(RuntimeError: PytorchStreamReader failed reading zip archive")
    assert resumed.status == "completed" and _numbers(resumed) == _numbers(reference)


def test_no_readable_checkpoint_starts_again_from_step_0(tiny_shape, interrupted):
    cfg, reference, run = interrupted
    _truncate(run / CHECKPOINT)
    (run / CHECKPOINT_PREV).write_bytes(b"\x00" * 64)
    resumed = train(tiny_shape, cfg, out_dir=run, resume=True)
    (note,) = resumed.resumes
    assert note.startswith("started again at step 0: checkpoint.pt unreadable (")
    assert "; checkpoint.prev.pt unreadable (" in note
    assert resumed.status == "completed" and _numbers(resumed) == _numbers(reference)


def test_a_readable_checkpoint_of_another_run_is_still_refused(tiny_shape, interrupted):
    cfg, _, run = interrupted
    _truncate(run / CHECKPOINT)  # the fallback finds the previous one, which belongs to other settings
    with pytest.raises(UserError, match="holds a checkpoint of a different run"):
        train(tiny_shape, cfg.with_(lr=3e-3), out_dir=run, resume=True)
