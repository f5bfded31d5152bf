"""A training subprocess killed with SIGKILL after a checkpoint resumes to the uninterrupted run,
bit for bit (losses, learning rates, gradient norms, validation losses, stream hash)."""

import json
import os
import signal
import subprocess
import sys
import textwrap

from depthwidth.train import train

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from depthwidth.shapes import Shape
    from depthwidth.train import TrainConfig, train
    shape = Shape.from_dict(json.loads(sys.argv[1]))
    config = TrainConfig.from_dict(json.loads(sys.argv[2]))
    def progress(p):
        print(p.phase, p.step, flush=True)
        if p.phase == "train" and p.step == int(sys.argv[4]):
            time.sleep(60)  # parked mid-run until the parent kills us
    train(shape, config, out_dir=sys.argv[3], progress=progress)
    """
)


def _numbers(result):
    return [(c["step"], c["loss"], c["lr"], c["grad_norm"]) for c in result.curve]


def test_sigkill_then_resume_equals_uninterrupted_bit_for_bit(tiny_shape, tiny_config, tmp_path):
    cfg = tiny_config.with_(steps=16, checkpoint_every=5, eval_every=4, dropout=0.1)
    reference = train(tiny_shape, cfg, out_dir=tmp_path / "reference")

    run = tmp_path / "killed"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(tiny_shape.to_dict()), json.dumps(cfg.to_dict()), str(run), "12"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        for line in child.stdout:
            if line.split() == ["train", "12"]:
                break
        else:
            raise AssertionError(f"child ended early with status {child.wait()}")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    # the checkpoints of steps 10 and 5; nothing looks finished
    assert sorted(os.listdir(run)) == ["checkpoint.prev.pt", "checkpoint.pt", "run.json"]

    resumed = train(tiny_shape, cfg, out_dir=run, resume=True)
    assert resumed.status == "completed"
    assert _numbers(resumed) == _numbers(reference)
    assert resumed.val_loss == reference.val_loss
    assert resumed.val_loss_by_position == reference.val_loss_by_position
    assert [(e["step"], e["val_loss"]) for e in resumed.evals] == [(e["step"], e["val_loss"]) for e in reference.evals]
    assert resumed.batch_stream_hash == reference.batch_stream_hash
    assert json.loads((run / "result.json").read_text())["status"] == "completed"
