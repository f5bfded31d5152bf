"""A study's trained shapes as Hugging Face model folders: the recommended one (`best`) or every shape.

`best` is the shape `depthwidth recommend STUDY` picks with no limits (lowest validation loss; among
shapes whose losses are within seed noise, the fastest) on the study's own hardware. Each shape is
exported from its best seed's run at its selected learning rate (the lowest of its seed losses), with
`depthwidth.hf.export.export_run`; with every shape, each goes to `OUT/<budget>-<shape label>/`.

Each shape is all or nothing (`export_run` writes through a temporary folder inside its target). With
every shape, `OUT/.depthwidth-study-export.json` marks an export under way until the last shape is
written: a rerun after a failure (a full disk, a killed process) finds it and resumes without `--force`,
writing every shape again over what the failed attempt left; a finished export is refused like any
non-empty folder unless `--force`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.files import file_kind, read_json_object, staged_folder, write_json
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
    if rec.chosen is None:  # nothing learned at the target scale (study.validity): there is no best shape
        raise UserError(f"--best: {study_dir} recommends no shape ({rec.verdict.rstrip('.')}); export every shape "
                        "with --all")
    return [rec.chosen.result]


def folder_name(result: ShapeResult) -> str:
    """'<budget>-<shape label>' with anything but word characters, dots and dashes replaced."""
    return re.sub(r"[^\w.-]+", "_", f"{result.group}-{result.shape_label}")


#: the file that marks an export of every shape under way in its folder
UNDER_WAY = ".depthwidth-study-export.json"


def _resuming(out: Path, study: str) -> bool:
    """`out` holds the mark of an unfinished export of every shape of `study`."""
    mark = out / UNDER_WAY
    if file_kind(mark) == "missing":
        return False
    started = read_json_object(mark, what="study export mark").get("study")
    if started != study:
        raise UserError(f"-o {out} holds an unfinished export of another study ({mark}); choose a new folder, "
                        "or replace it (--force)")
    return True


def export_study(study_dir: str | os.PathLike, out_dir: str | os.PathLike, *, best: bool = True,
                 overwrite: bool = False) -> list[ExportResult]:
    """Export the recommended shape into `out_dir`, or every shape into a folder each below it."""
    results = chosen_results(study_dir, best=best)
    out = Path(out_dir)
    if best:
        return [export_run(run_dir(study_dir, _best_seed_run(results[0])), out, overwrite=overwrite)]
    study = str(Path(study_dir).resolve())
    resuming = not overwrite and file_kind(out) == "a folder" and _resuming(out, study)
    if not resuming:
        check_target(out, overwrite=overwrite)
    with staged_folder(out, what="the export") as tmp:  # a full disk here: one line, nothing left
        write_json(tmp / UNDER_WAY, {"study": study, "shapes": [folder_name(r) for r in results]})
    exported = [export_run(run_dir(study_dir, _best_seed_run(r)), out / folder_name(r),
                           overwrite=overwrite or resuming) for r in results]
    (out / UNDER_WAY).unlink()
    return exported


__all__ = ["UNDER_WAY", "chosen_results", "export_study", "folder_name"]
