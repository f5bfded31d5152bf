"""A trained run -> a Hugging Face model folder that `transformers` loads unchanged:

    config.json              the class `depthwidth.hf.arch.choose_arch` picks, fp32, no special tokens;
                             our shape, the run and the tokenizer recorded under "depthwidth"
    model.safetensors        the weights renamed and re-laid out for that class (`depthwidth.hf.layout`)
    tokenizer.json           the run's tokenizer (byte, char or the trained BPE), with
    tokenizer_config.json    the config that makes `AutoTokenizer` read it (`depthwidth.hf.tokenizer`)
    lm_eval_tasks/           for a run trained on probe slices: those probes as harness tasks

A shape no class holds exactly is refused (one line naming the option) before anything is written.
The files are written into a temporary folder beside the target and moved in at the end, so a failed
export leaves no partial model; a non-empty target folder is refused unless `overwrite`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthwidth.artifact.config import TrainConfig
from depthwidth.artifact.load import load_trained
from depthwidth.errors import UserError
from depthwidth.hf.arch import choose_arch, hf_config
from depthwidth.hf.fold import fold_multipliers
from depthwidth.hf.harness import write_harness_tasks
from depthwidth.hf.layout import expected_state, to_hf_state
from depthwidth.hf.tokenizer import tokenizer_files
from depthwidth.hf.weights import CONFIG, WEIGHTS, write_weights
from depthwidth.shapes.shape import Shape

TASKS = "lm_eval_tasks"


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportResult:
    """What one export wrote."""

    source: str  # the run folder (or checkpoint) exported
    out_dir: str
    model_type: str
    class_name: str
    shape: Shape  # ours; the class holds it exactly
    hf_params: int  # parameters of the class (zero biases included, a tied head once)
    zero_biases: int  # bias values the class has and our shape lacks, written as 0
    tokenizer: str
    step: int | None  # the checkpoint's step
    finished: bool  # the run had finished (result.json) when exported
    files: tuple[str, ...]
    tasks: tuple[str, ...] = ()  # harness tasks written under lm_eval_tasks/
    newline_id: int | None = None  # the token of "\n", the boundary every training text follows

    def lm_eval_args(self) -> str:
        """`--model_args` for lm_eval: the harness needs a prefix token and these models have no BOS/EOS,
        so the newline stands in (it is only read for an empty context)."""
        prefix = f",prefix_token_id={self.newline_id}" if self.newline_id is not None else ""
        return f"pretrained={self.out_dir},dtype=float32{prefix}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "out_dir": self.out_dir, "model_type": self.model_type,
                "class_name": self.class_name, "shape": self.shape.to_dict(), "shape_label": self.shape.label(),
                "hf_params": self.hf_params, "zero_biases": self.zero_biases, "tokenizer": self.tokenizer,
                "step": self.step, "finished": self.finished, "files": list(self.files), "tasks": list(self.tasks),
                "newline_id": self.newline_id, "lm_eval_model_args": self.lm_eval_args()}


def run_tokenizer(config: TrainConfig, *, dataset_hash: str | None = None):
    """The tokenizer a run was trained with, rebuilt from its config (byte needs no corpus; char and BPE are
    learned from the corpus, whose dataset hash must still match `dataset_hash`)."""
    from depthwidth.data.dataset import load_dataset
    from depthwidth.data.tokenizers import ByteTokenizer

    if config.tokenizer == "byte":
        return ByteTokenizer()
    dataset = load_dataset(corpus=config.corpus, tokenizer=config.tokenizer, val_fraction=config.val_fraction,
                           test_fraction=config.test_fraction, cache_dir=config.cache_dir)
    if dataset_hash not in (None, dataset.dataset_hash):
        raise UserError(f"the run's corpus {config.corpus!r} changed since training (dataset hash "
                        f"{str(dataset_hash)[:12]}, now {dataset.dataset_hash[:12]}); its {config.tokenizer} "
                        "tokenizer cannot be rebuilt")
    return dataset.tokenizer


def check_target(out_dir: str | os.PathLike, *, overwrite: bool) -> Path:
    """The folder to write into: new, empty, or (with `overwrite`) one whose model files are replaced."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"-o {out} is a file; give a folder for the model")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise UserError(f"-o {out} is not empty; choose a new folder, or replace its model files (--force, "
                        "overwrite=True)")
    return out


def _move_in(tmp: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for item in sorted(tmp.iterdir()):
        dest = out / item.name
        if dest.is_dir():
            shutil.rmtree(dest)
        os.replace(item, dest)


def export_model(state: dict, shape: Shape, *, tokenizer, out_dir: str | os.PathLike, dropout: float = 0.0,
                 record: dict[str, Any] | None = None, probes: tuple[str, ...] = (), overwrite: bool = False,
                 source: str = "", step: int | None = None, finished: bool = True) -> ExportResult:
    """Write `state` (our parameter names) of `shape` with `tokenizer` as a Hugging Face folder."""
    arch = choose_arch(shape)  # refuses before anything is written
    out = check_target(out_dir, overwrite=overwrite)
    tensors = to_hf_state(state, arch)
    newline = [int(i) for i in tokenizer.encode("\n")]
    newline_id = newline[0] if len(newline) == 1 else None
    config = hf_config(shape, dropout=dropout,
                       extra={"tokenizer": tokenizer.spec, "newline_token_id": newline_id, **(record or {})})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        (tmp / CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        write_weights(tmp / WEIGHTS, tensors)
        for name, text in tokenizer_files(tokenizer, max_len=shape.max_seq_len).items():
            (tmp / name).write_text(text, encoding="utf-8")
        tasks = tuple(write_harness_tasks(list(probes), tmp / TASKS, final_dir=out / TASKS)) if probes else ()
        files = tuple(sorted(p.name for p in tmp.iterdir()))
        _move_in(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    zero = sum(size.numel() for name, size in expected_state(arch.hf_shape).items() if name not in state)
    return ExportResult(source=source, out_dir=str(out), model_type=arch.model_type, class_name=arch.class_name,
                        shape=shape, hf_params=sum(t.numel() for t in tensors.values()), zero_biases=zero,
                        tokenizer=tokenizer.spec, step=step, finished=finished, files=files, tasks=tasks,
                        newline_id=newline_id)


def export_run(run_dir: str | os.PathLike, out_dir: str | os.PathLike, *, overwrite: bool = False) -> ExportResult:
    """Export the latest checkpoint of a run folder written by `depthwidth train` (or a study's run). A muP,
    CompleteP or depth-muP run's forward multipliers are folded into the weights (`depthwidth.hf.fold`), so
    the class computes its logits; config.json records what was folded under "depthwidth"."""
    run = load_trained(Path(run_dir))
    if run.config is None:
        raise UserError(f"{run.checkpoint} records no train config, so its tokenizer cannot be rebuilt; export a "
                        "run folder written by depthwidth train")
    choose_arch(run.shape)  # a shape no class holds is refused before the multipliers are looked at
    folded = fold_multipliers(run.model.state_dict(), run.shape, run.multipliers)  # muP/CompleteP: in the weights
    config = run.config
    tokenizer = run_tokenizer(config, dataset_hash=run.meta.dataset_hash)
    probes = tuple(s for s in config.corpus.split("+") if s.startswith("probe:"))
    record = {"run": {"folder": str(run.folder.resolve()), "step": run.step, "config": run.meta.config,
                      "dataset_hash": run.meta.dataset_hash}, "parametrization": folded.record}
    return export_model(folded.state, run.shape, tokenizer=tokenizer, out_dir=out_dir,
                        dropout=config.dropout, record=record, probes=probes, overwrite=overwrite,
                        source=str(run_dir), step=run.step, finished=run.finished)


__all__ = ["ExportResult", "check_target", "export_model", "export_run", "run_tokenizer"]
