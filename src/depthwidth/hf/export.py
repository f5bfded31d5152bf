"""A trained run -> a Hugging Face model folder that `transformers` loads unchanged:

    config.json              the class `depthwidth.hfio.arch.choose_arch` picks, fp32, no special tokens;
                             our shape, the run and the tokenizer recorded under "depthwidth"
    model.safetensors        the weights renamed and re-laid out for that class (`depthwidth.hfio.layout`)
    tokenizer.json           the run's tokenizer (byte, char or the trained BPE), with
    tokenizer_config.json    the config that makes `AutoTokenizer` read it (`depthwidth.hfio.tokenizer`)
    lm_eval_tasks/           for a run trained on probe slices: those probes as harness tasks

A shape no class holds exactly is refused (one line naming the option) before anything is written.
The files are written into a temporary folder inside the target (`depthwidth.files.staged_folder`: the
target's own filesystem, an empty mount point included) and moved in at the end, so a failed export (a
full disk, a read-only target: one line naming the folder and the reason) leaves no partial model;
a non-empty target folder is refused unless `overwrite`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthwidth.artifact.config import TrainConfig
from depthwidth.artifact.load import load_trained
from depthwidth.data.probes import dense_spec
from depthwidth.errors import UserError
from depthwidth.hf.fold import fold_multipliers
from depthwidth.hf.harness import write_harness_tasks
from depthwidth.hfio.arch import choose_arch, hf_config
from depthwidth.hfio.layout import expected_state, to_hf_state
from depthwidth.hfio.tokenizer import tokenizer_files
from depthwidth.hfio.weights import CONFIG, WEIGHTS, write_weights
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
    """The folder to write into: new, empty (a leftover of a killed export aside), or (with `overwrite`)
    one whose model files are replaced."""
    from depthwidth.files import file_kind, is_staging

    out = Path(out_dir)
    kind = file_kind(out)
    if kind not in ("missing", "a folder"):
        raise UserError(f"-o {out} is {kind or 'a file'}; give a folder for the model")
    if kind == "a folder" and not overwrite and any(not is_staging(p) for p in out.iterdir()):
        raise UserError(f"-o {out} is not empty; choose a new folder, or replace its model files (--force, "
                        "overwrite=True)")
    return out


def export_model(state: dict, shape: Shape, *, tokenizer, out_dir: str | os.PathLike, dropout: float = 0.0,
                 record: dict[str, Any] | None = None, probes: tuple[str, ...] = (), overwrite: bool = False,
                 source: str = "", step: int | None = None, finished: bool = True) -> ExportResult:
    """Write `state` (our parameter names) of `shape` with `tokenizer` as a Hugging Face folder."""
    from depthwidth.files import staged_folder

    arch = choose_arch(shape)  # refuses before anything is written
    out = check_target(out_dir, overwrite=overwrite)
    tensors = to_hf_state(state, arch)
    newline = [int(i) for i in tokenizer.encode("\n")]
    newline_id = newline[0] if len(newline) == 1 else None
    config = hf_config(shape, dropout=dropout,
                       extra={"tokenizer": tokenizer.spec, "newline_token_id": newline_id, **(record or {})})
    with staged_folder(out, what="the model") as tmp:  # inside `out`: its filesystem; all or nothing
        (tmp / CONFIG).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        write_weights(tmp / WEIGHTS, tensors)
        for name, text in tokenizer_files(tokenizer, max_len=shape.max_seq_len).items():
            (tmp / name).write_text(text, encoding="utf-8")
        tasks = tuple(write_harness_tasks(list(probes), tmp / TASKS, final_dir=out / TASKS)) if probes else ()
        files = tuple(sorted(p.name for p in tmp.iterdir()))
    zero = sum(size.numel() for name, size in expected_state(arch.hf_shape).items() if name not in state)
    return ExportResult(source=source, out_dir=str(out), model_type=arch.model_type, class_name=arch.class_name,
                        shape=shape, hf_params=sum(t.numel() for t in tensors.values()), zero_biases=zero,
                        tokenizer=tokenizer.spec, step=step, finished=finished, files=files, tasks=tasks,
                        newline_id=newline_id)


def check_drop_layers(drop: tuple[int, ...], *, n_layers: int) -> tuple[int, ...]:
    """The blocks to remove, sorted: each in 0 .. n_layers - 1, none twice, at least one block kept."""
    bad = [i for i in drop if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n_layers]
    if bad:
        raise UserError(f"--drop-layers {bad[0]!r} is out of range; the model has layers 0 to {n_layers - 1}")
    if len(set(drop)) != len(drop):
        twice = sorted(i for i in set(drop) if drop.count(i) > 1)
        raise UserError(f"--drop-layers names layer {twice[0]} more than once")
    if len(drop) >= n_layers:
        raise UserError(f"--drop-layers removes all {n_layers} layers; keep at least one")
    return tuple(sorted(drop))


def _without_blocks(state: dict, drop: tuple[int, ...], *, n_layers: int) -> dict:
    """`state` with blocks `drop` removed and the others renumbered 0, 1, ... in order."""
    new_index = {old: new for new, old in enumerate(i for i in range(n_layers) if i not in drop)}
    out = {}
    for name, t in state.items():
        if name.startswith("blocks."):
            _, index, rest = name.split(".", 2)
            if int(index) in drop:
                continue
            name = f"blocks.{new_index[int(index)]}.{rest}"
        out[name] = t
    return out


def export_run(run_dir: str | os.PathLike, out_dir: str | os.PathLike, *, overwrite: bool = False,
               drop_layers: tuple[int, ...] = ()) -> ExportResult:
    """Export the latest checkpoint of a run folder written by `depthwidth train` (or a study's run). A muP,
    CompleteP or depth-muP run's forward multipliers are folded into the weights (`depthwidth.hf.fold`), so
    the class computes its logits; config.json records what was folded under "depthwidth".

    `drop_layers` removes those blocks (the shape has that many fewer layers): the multipliers are folded
    at the trained depth first, so the remaining blocks keep the residual multiplier they trained with
    (CompleteP's depends on n_layers) and the export computes the run with those blocks skipped."""
    run = load_trained(Path(run_dir))
    if run.config is None:
        raise UserError(f"{run.checkpoint} records no train config, so its tokenizer cannot be rebuilt; export a "
                        "run folder written by depthwidth train")
    drop = check_drop_layers(tuple(drop_layers), n_layers=run.shape.n_layers)
    shape = run.shape.with_(n_layers=run.shape.n_layers - len(drop)) if drop else run.shape
    choose_arch(shape)  # a shape no class holds is refused before the multipliers are looked at
    folded = fold_multipliers(run.model.state_dict(), run.shape, run.multipliers)  # muP/CompleteP: in the weights
    state = _without_blocks(folded.state, drop, n_layers=run.shape.n_layers) if drop else folded.state
    config = run.config
    tokenizer = run_tokenizer(config, dataset_hash=run.meta.dataset_hash)
    probes = tuple(s for s in config.corpus.split("+") if s.startswith("probe:") and dense_spec(s) is None)
    record = {"run": {"folder": str(run.folder.resolve()), "step": run.step, "config": run.meta.config,
                      "dataset_hash": run.meta.dataset_hash}, "parametrization": folded.record}
    if drop:
        record["dropped_layers"] = {"layers": list(drop), "trained_n_layers": run.shape.n_layers}
    return export_model(state, shape, tokenizer=tokenizer, out_dir=out_dir,
                        dropout=config.dropout, record=record, probes=probes, overwrite=overwrite,
                        source=str(run_dir), step=run.step, finished=run.finished)


__all__ = ["ExportResult", "check_drop_layers", "check_target", "export_model", "export_run", "run_tokenizer"]
