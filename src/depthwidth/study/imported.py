"""Write the runs of a table (`study.importer.parse_runs`) as a study folder, and read back that a study
was imported (`imported_info`).

The folder is what `study run` would leave, written through the same API: a spec (TOML text recording
the conventions, the shapes, seeds and learning rates; its [bench] off: nothing here is ever run), one
training run per row, its config made by `study.expand.train_config` (so its id is the hash of its
config) with the row's tokens, seed and learning rate (where the table gives none, the spec's placeholder
`PLACEHOLDER_LR`, recorded as such in `import.json`), its status, result and an empty curve in one transaction;
with a decode_ms column, one bench run per shape holding the median latency as measured on `hardware`
(its roofline prediction beside it). `import.json` holds the provenance.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from pathlib import Path

from depthwidth.errors import UserError, echo
from depthwidth.study.importer import (INFO_FILE, Conventions, ImportReport, ImportedRun, parse_runs, study_name,
                                     table_name)

#: the corpus of an imported run: its source's name (hashed into the run's corpus hash)
CORPUS = "imported"
#: the learning rate stored for runs of a table without an lr column (a store's run has one)
PLACEHOLDER_LR = 1e-3


def import_runs(table: str | os.PathLike, study_dir: str | os.PathLike, *, columns: dict[str, str] | None = None,
                conventions: Conventions = Conventions(), name: str | None = None, hardware: str | None = None,
                context: int | None = None, dtype: str = "bf16",
                min_tokens_per_param: float | None = None) -> ImportReport:
    """Make the study folder `study_dir` from the runs of `table` (module docstrings of this module and of
    `study.importer`). `hardware`: the hardware-table row the decode_ms column was measured on;
    `context`: the cached tokens of those measurements (default: half the sequence length);
    `min_tokens_per_param`: the spec's `[report]` rule for the fits (`study.validity`; None: its default)."""
    from depthwidth.files import staged_folder, write_json
    from depthwidth.study.store import STORE_FILE

    folder = Path(study_dir)
    if (folder / STORE_FILE).exists():
        raise UserError(f"{folder} already holds a study ({STORE_FILE}); choose another --dir")
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--dir {folder}: exists and is not a folder")
    runs, text, ignored = parse_runs(table, columns=columns, conventions=conventions)
    shown = table_name(table)
    _check_lr(runs, shown)
    timed = [r for r in runs if r.decode_ms is not None]
    hw = _hardware(hardware, needed=bool(timed))
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    name = name or study_name(table)
    spec = _spec(runs, name=name, table=shown, conventions=conventions, hardware=hw,
                 min_tokens_per_param=min_tokens_per_param)
    train_rows, outcomes = _train_runs(spec, runs, table=shown, sha=sha)
    bench_rows, bench_outcomes = _bench_runs(spec, timed, hardware=hw, context=context, dtype=dtype)
    sources = tuple(sorted({r.source for r in runs}))
    info = {"table": shown, "sha256": sha, "rows": len(runs), "sources": list(sources),
            "columns": dict(columns or {}), "conventions": conventions.to_dict(), "ignored_columns": list(ignored),
            "hardware": hw, "lr_given": any(r.lr is not None for r in runs), "imported_at": time.time()}
    from depthwidth.study.store import Store

    with staged_folder(folder, what="the imported study") as tmp:
        with Store.create(tmp, name=spec.name, spec=spec.to_dict(), spec_text=spec.text,
                          source=f"imported from {shown}") as store:
            store.sync_runs(train_rows + bench_rows)
            for run_id, status, result in outcomes + bench_outcomes:
                store.mark_running(run_id, worker="import")
                store.record_finished(run_id, status=status, result=result, curve=[], wall_seconds=None,
                                      worker="import")
        write_json(tmp / INFO_FILE, info)
    notes = []
    if ignored:
        notes.append(f"columns not read: {echo(', '.join(ignored))}")
    if all(r.lr is None for r in runs):
        notes.append(f"no lr column: the runs' learning rates are unknown; the study stores {PLACEHOLDER_LR:g} as a "
                     "placeholder, and the report cannot say how they were tuned")
    return ImportReport(study_dir=str(folder), table=str(table), sha256=sha, runs=len(runs),
                        shapes=len({r.shape.label() for r in runs}), groups=tuple(dict.fromkeys(r.group for r in runs)),
                        sources=sources, ignored_columns=ignored, notes=tuple(notes))


def imported_info(study_dir: str | os.PathLike) -> dict | None:
    """The provenance `import_runs` recorded in a study folder; None for a study this tool ran."""
    from depthwidth.files import read_json_object

    path = Path(study_dir) / INFO_FILE
    return read_json_object(path, what="import record") if path.is_file() else None


def _check_lr(runs: list[ImportedRun], name: str) -> None:
    given = [r for r in runs if r.lr is not None]
    if given and len(given) < len(runs):
        r = next(r for r in runs if r.lr is None)
        raise UserError(f"{name}: row {r.row} (line {r.line}), column lr: empty while other rows give one; give every "
                        "run's learning rate or none")


def _hardware(hardware: str | None, *, needed: bool) -> str:
    if hardware is None:
        if needed:
            raise UserError("the table has decode_ms: name the hardware it was measured on with --hardware (a row "
                            "of `depthwidth hw list`)")
        return "measured"
    from depthwidth.shapes.hardware import get_hardware

    return get_hardware(hardware).name


def _spec(runs: list[ImportedRun], *, name: str, table: str, conventions: Conventions, hardware: str,
          min_tokens_per_param: float | None = None):
    from depthwidth.study.spec import parse_spec

    shapes = list({r.shape.label(): r.shape for r in runs}.values())
    seq_len = max(2, min(conventions.seq_len, min(r.tokens for r in runs)))
    lrs = sorted({r.lr for r in runs if r.lr is not None}) or [PLACEHOLDER_LR]
    lrs = lrs if len(lrs) <= 16 else [statistics.median(lrs)]
    sources = sorted({r.source for r in runs})
    c = conventions
    description = (f"{len(runs)} runs imported from {table} (source: {', '.join(sources)}); trained elsewhere, so the "
                   "fairness of their protocol cannot be checked")
    lines = [
        f"# Runs imported by `depthwidth study import` from {_toml(table)}: trained elsewhere, not by this spec.",
        "# It records their conventions and shapes; nothing of it is run ([bench] is off).",
        f"name = {_toml(name)}",
        f"description = {_toml(description)}",
        f"hardware = {_toml(hardware)}",
        f"seeds = [{', '.join(str(s) for s in sorted({r.seed for r in runs}))}]",
        "", "[model]", f"ffn = {_toml(c.ffn)}", f"norm = {_toml(c.norm)}", f"bias = {_toml(c.bias)}",
        f"pos = {_toml(c.pos)}", f"tie_embeddings = {'true' if c.tied else 'false'}",
        f"max_seq_len = {max(s.max_seq_len for s in shapes)}",
        "", "[data]", f"corpus = {_toml(CORPUS)}", f"seq_len = {seq_len}", "batch_size = 1",
        "", "[train]", f"tokens = {min(r.tokens for r in runs)}",
        "", "[lr]", f"grid = [{', '.join(repr(float(v)) for v in lrs)}]",
        "", "[bench]", "enabled = false",
    ]
    if min_tokens_per_param is not None:
        lines += ["", "[report]", f"min_tokens_per_param = {float(min_tokens_per_param)!r}"]
    for s in shapes:
        lines += ["", "[[shape]]", f"n_layers = {s.n_layers}", f"d_model = {s.d_model}", f"n_heads = {s.n_heads}"]
    return parse_spec("\n".join(lines) + "\n", source=f"import of {table}")


def _toml(text: str) -> str:
    """`text` as a TOML basic string: `"` and `\\` escaped, control characters as \\uXXXX, any other
    character as it is (TOML reads UTF-8 text; a JSON string's surrogate-pair escapes it refuses). A lone
    surrogate (a file name that is not UTF-8) has no TOML form: it becomes U+FFFD."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _train_runs(spec, runs: list[ImportedRun], *, table: str, sha: str):
    from depthwidth.study.expand import DataInfo, train_config
    from depthwidth.study.run_config import config_hash

    rows, outcomes, seen = [], [], {}
    default_lr = spec.lr.grid[0]
    for r in runs:
        data = DataInfo(corpus_hash=hashlib.sha256(f"{CORPUS}:{r.source}".encode()).hexdigest(),
                        vocab_size=r.shape.vocab_size, train_tokens=r.tokens)
        config = train_config(spec, data=data, shape=r.shape, tokens=r.tokens, lr=r.lr or default_lr, seed=r.seed)
        run_id = config_hash(config)
        if run_id in seen:  # one run id holds one run: a second row of the same config would be dropped
            raise UserError(f"{table}: row {r.row} (line {r.line}), column seed: the same run as row {seen[run_id]} "
                            "(same shape, tokens, lr, seed and source; a label does not make another run); give "
                            "each run its own seed")
        seen[run_id] = r.row
        rows.append({"run_id": run_id, "kind": "train", "group": r.group, "shape_label": r.shape.label(),
                     "lr": r.lr or default_lr,
                     "seed": r.seed, "lr_trials": 1, "config": config})
        result = {"status": "completed", "val_loss": r.loss, "tokens": r.tokens, "params": r.params,
                  "non_embedding_params": r.non_embedding_params, "train_flops": r.flops,
                  "train_flops_per_token": r.flops / r.tokens, "tokens_per_s": r.tokens_per_s,
                  "shape": r.shape.to_dict(),
                  "imported": {"table": table, "sha256": sha, "row": r.row, "line": r.line, "source": r.source}}
        outcomes.append((run_id, "completed", result))
    return rows, outcomes


def _bench_runs(spec, timed: list[ImportedRun], *, hardware: str, context: int | None, dtype: str):
    """One bench run per shape with decode_ms: the median over its rows, at `context` cached tokens."""
    from depthwidth.shapes.hardware import get_hardware
    from depthwidth.shapes.latency import predict_decode
    from depthwidth.study.expand import bench_config
    from depthwidth.study.run_config import config_hash

    by_shape: dict[str, list[ImportedRun]] = {}
    for r in timed:
        by_shape.setdefault(r.shape.label(), []).append(r)
    rows, outcomes = [], []
    if not by_shape:
        return rows, outcomes
    hw = get_hardware(hardware)
    device = "cuda" if hw.kind == "gpu" else "cpu"
    for label, members in by_shape.items():
        shape = members[0].shape
        ctx = min(context or max(1, shape.max_seq_len // 2), shape.max_seq_len - 1)
        seconds = statistics.median(r.decode_ms for r in members) / 1e3
        predicted = predict_decode(shape, hardware=hw, batch=1, context=ctx, dtype=dtype).total_s
        config = bench_config(spec, shape=shape)
        run_id = config_hash(config)
        rows.append({"run_id": run_id, "kind": "bench", "group": members[0].group, "shape_label": label, "lr": None,
                     "seed": None, "lr_trials": None, "config": config})
        outcomes.append((run_id, "completed", {
            "target": label, "shape": shape.to_dict(), "config": {"dtype": dtype}, "hardware": hw.to_dict(),
            "environment": {"device": device}, "throughput": [], "imported": {"rows": [r.row for r in members]},
            "latency": [{"variant": dtype, "kind": "decode", "batch": 1, "tokens": ctx, "seconds": {"median": seconds},
                         "predicted_s": predicted}]}))
    return rows, outcomes


__all__ = ["CORPUS", "PLACEHOLDER_LR", "import_runs", "imported_info"]
