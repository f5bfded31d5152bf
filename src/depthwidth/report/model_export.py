"""A study's trained shapes as Hugging Face model folders: the recommended one (`best`) or every shape.

`best` is the shape `depthwidth recommend STUDY` picks with no limits (lowest validation loss; among
shapes whose losses are within seed noise, the fastest) on the study's own hardware. Each shape is
exported from its best seed's run at its selected learning rate (the lowest of its seed losses), with
`depthwidth.hf.export.export_run`; with every shape, each goes to `OUT/<budget>-<shape label>/`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.hf.export import ExportResult, check_target, export_run
from depthwidth.study.jobs import run_dir
from depthwidth.study.summary import ShapeResult


def _best_seed_run(result: ShapeResult) -> str:
    if not result.best_run_ids:
        raise UserError(f"{result.key} has no completed run to export")
    return min(zip(result.seed_losses, result.best_run_ids))[1]


def chosen_results(study_dir: str | os.PathLike, *, best: bool) -> list[ShapeResult]:
    """The recommended shape ([one]) or every shape with a completed run, in the study's order."""
    from depthwidth.report.build import default_hardware
    from depthwidth.report.data import load_study
    from depthwidth.report.recommend import Constraints, recommend

    study = load_study(study_dir)
    done = [r for r in study.results if r.best_run_ids and r.val_loss is not None]
    if not done:
        raise UserError(f"{study_dir}: no shape has a completed run yet; nothing to export")
    if not best:
        return done
    p = study.protocol
    rec = recommend(study.results, Constraints(hardware=default_hardware(study)), seq_len=p.seq_len or None,
                    batch_size=p.batch_size or 1)
    return [rec.chosen.result]


def folder_name(result: ShapeResult) -> str:
    """'<budget>-<shape label>' with anything but word characters, dots and dashes replaced."""
    return re.sub(r"[^\w.-]+", "_", f"{result.group}-{result.shape_label}")


def export_study(study_dir: str | os.PathLike, out_dir: str | os.PathLike, *, best: bool = True,
                 overwrite: bool = False) -> list[ExportResult]:
    """Export the recommended shape into `out_dir`, or every shape into a folder each below it."""
    results = chosen_results(study_dir, best=best)
    out = Path(out_dir)
    targets = [(r, out if best else out / folder_name(r)) for r in results]
    if not best:
        check_target(out, overwrite=overwrite)
    return [export_run(run_dir(study_dir, _best_seed_run(r)), target, overwrite=overwrite) for r, target in targets]


__all__ = ["chosen_results", "export_study", "folder_name"]
