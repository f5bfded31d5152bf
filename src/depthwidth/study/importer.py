"""`study import`: a study folder made from a table of finished runs trained elsewhere (any trainer, a
spreadsheet of published models), so that the report, `recommend` and the shape-aware fits read it like a
study this tool ran.

The table is CSV (a header row; lines end with LF, CRLF or CR alone; no cell longer than the csv module's
131,072 characters) or JSON lines (one object per line), one row per finished run:
    required  d_model, n_layers, tokens (training tokens), loss (final validation loss, nats per token)
    optional  n_heads, vocab, params, flops (training FLOPs of the run), seed, lr, tokens_per_s, decode_ms
              (batch-1 decode latency per token, on `hardware`), seq_len, label (its budget group), source
`columns` maps these names to the table's own ({"d_model": "hidden_size"}); other columns are ignored.

Each row becomes a `Shape` under the given conventions (`Conventions`: ffn, norm, biases, positions,
tying, vocabulary, sequence length, head size when n_heads is missing). A count the table gives is checked
against the shape: params against `count_params` (total, or non-embedding with params_kind), flops
against tokens x `shapes.flops` training FLOPs per token, 6 N D with N total, or 6 N D with N
non-embedding, each within `tolerance`. Every row is checked before anything is written; the first bad
cell is one `UserError` naming its row, line and column, quoting the cell cut by `errors.echo_repr`. Two
rows of one run (same shape, tokens, lr, seed and source) are refused: a run id holds one run. The study
is written through the store's own API (spec, run configs and ids, `Store.create` / `sync_runs` /
`record_finished`) into a staged folder, so a failure leaves nothing. `import.json` beside the store
records the provenance (table, its sha256, column map, conventions, sources); the report reads it
(`imported_info`) to say that the runs were imported and that the fairness of their protocol cannot be
checked. Rows of one source share a corpus hash of that source's name, so runs of two trainers are never
taken for runs on the same data.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from depthwidth.errors import UserError, echo, echo_repr
from depthwidth.files import read_text
from depthwidth.serial import Serializable
from depthwidth.shapes.shape import BIAS_KINDS, FFN_KINDS, NORM_KINDS, POS_KINDS, Shape

REQUIRED = ("d_model", "n_layers", "tokens", "loss")
OPTIONAL = ("n_heads", "vocab", "params", "flops", "seed", "lr", "tokens_per_s", "decode_ms", "seq_len", "label",
            "source")
COLUMNS = REQUIRED + OPTIONAL
INTEGERS = ("d_model", "n_layers", "n_heads", "vocab", "seed", "seq_len", "tokens", "params")
TEXTS = ("label", "source")
PARAMS_KINDS = ("total", "non-embedding")
INFO_FILE = "import.json"
MAX_ROWS = 10_000  # a study's run limit (`study.limits`)
MAX_INTEGER = 2**63 - 1  # the store's integers are SQLite's (64-bit signed)
_SHAPE_COLUMN = {"n_layers": "n_layers", "d_model": "d_model", "n_heads": "n_heads", "vocab_size": "vocab",
                 "max_seq_len": "seq_len"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Conventions(Serializable):
    """How a row's shape is built: what the table does not say."""

    ffn: str = "gelu"
    norm: str = "layernorm"
    bias: str = "none"
    pos: str = "learned"
    tied: bool = True
    vocab: int | None = None  # when the table has no vocab column
    seq_len: int = 2048  # training sequence length (and position table) when the table has no seq_len column
    head_dim: int = 64  # n_heads = d_model / head_dim when the table has no n_heads column
    params_kind: str = "total"  # what the params column counts
    tolerance: float = 0.02  # largest relative difference of a given count from the shape's

    def __post_init__(self) -> None:
        for name, allowed in (("ffn", FFN_KINDS), ("norm", NORM_KINDS), ("bias", BIAS_KINDS), ("pos", POS_KINDS),
                              ("params_kind", PARAMS_KINDS)):
            if getattr(self, name) not in allowed:
                raise UserError(f"{name}={getattr(self, name)!r} is not allowed; expected one of {', '.join(allowed)}")
        if not 0 < self.tolerance < 1:
            raise UserError(f"tolerance={self.tolerance!r} must be a fraction in (0, 1)")


@dataclass(frozen=True, kw_only=True, slots=True)
class ImportedRun(Serializable):
    row: int
    line: int
    shape: Shape
    group: str
    source: str
    tokens: int
    loss: float
    seed: int
    lr: float | None
    params: int  # total, by count_params
    non_embedding_params: int
    flops: float  # training FLOPs: the table's, else tokens x analytic FLOPs per token
    tokens_per_s: float | None = None
    decode_ms: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ImportReport(Serializable):
    study_dir: str
    table: str
    sha256: str
    runs: int
    shapes: int
    groups: tuple[str, ...]
    sources: tuple[str, ...]
    ignored_columns: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())


def parse_columns(text: str | None) -> dict[str, str]:
    """'d_model=hidden_size,loss=val_loss' -> {"d_model": "hidden_size", "loss": "val_loss"}."""
    out: dict[str, str] = {}
    for item in filter(None, (t.strip() for t in (text or "").split(","))):
        ours, sep, theirs = item.partition("=")
        ours, theirs = ours.strip(), theirs.strip()
        if not sep or not ours or not theirs:
            raise UserError(f"--columns {echo_repr(item)}: expected OURS=THEIRS, e.g. d_model=hidden_size")
        if ours not in COLUMNS:
            raise UserError(f"--columns: {echo_repr(ours)} is not a column of an import; expected one of "
                            f"{', '.join(COLUMNS)}")
        out[ours] = theirs
    return out


def read_table(path: str | os.PathLike, *, columns: dict[str, str] | None = None):
    """(text, [(row, line, {our column: cell text or None})], ignored table columns)."""
    text = read_text(path, what="run table").removeprefix("\ufeff")  # a spreadsheet's byte-order mark
    name = table_name(path)
    columns = columns or {}
    stripped = text.lstrip()
    if Path(path).suffix.lower() in (".jsonl", ".json", ".ndjson") or stripped.startswith("{"):
        records, header = _json_lines(text, name)
    else:
        records, header = _csv_rows(text, name)
        if any(None in rec for _, _, rec in records):
            row, line, _ = next(r for r in records if None in r[2])
            raise UserError(f"{name}: row {row} (line {line}) has more cells than the header")
    lookup = {ours: columns.get(ours, ours) for ours in COLUMNS}
    for ours, theirs in columns.items():
        if theirs not in header:
            raise UserError(f"{name}: --columns {echo(ours)}={echo(theirs)}: the table has no column "
                            f"{echo_repr(theirs)}")
    missing = [c for c in REQUIRED if lookup[c] not in header]
    if missing:
        raise UserError(f"{name}: column {missing[0]!r} is missing (required: {', '.join(REQUIRED)}; map a column "
                        f"of another name with --columns {missing[0]}=NAME)")
    if not records:
        raise UserError(f"{name}: no rows below the header")
    if len(records) > MAX_ROWS:
        raise UserError(f"{name}: {len(records)} rows; an imported study holds at most {MAX_ROWS:,} runs")
    used = {lookup[c] for c in COLUMNS if lookup[c] in header}
    rows = [(row, line, {c: _cell(rec.get(lookup[c])) for c in COLUMNS if lookup[c] in header})
            for row, line, rec in records]
    return text, rows, tuple(h for h in header if h not in used)


def _csv_rows(text: str, name: str):
    """The CSV rows of `text` as `_json_lines` gives them; a line ends with LF, CRLF or CR alone."""
    reader = csv.DictReader(io.StringIO(text, newline=""))  # newline="": the csv module splits the lines itself
    try:
        header = [h.strip() for h in (reader.fieldnames or [])]
        reader.fieldnames = header
        records = [(i, reader.line_num, rec) for i, rec in enumerate(reader, start=1)]
    except csv.Error as exc:
        line = reader.reader.line_num
        if "field limit" in str(exc):
            raise UserError(f"{name}: line {line}: a cell of more than {csv.field_size_limit():,} characters; no "
                            "cell of a run table is that long") from None
        raise UserError(f"{name}: line {line}: not readable as CSV ({exc})") from None
    return records, header


def _json_lines(text: str, name: str):
    records, header = [], []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise UserError(f"{name}: line {line_no} is not a JSON object ({str(exc).split(';')[0]})") from None
        if not isinstance(rec, dict):
            raise UserError(f"{name}: line {line_no} is {type(rec).__name__}, not a JSON object")
        records.append((len(records) + 1, line_no, rec))
        header += [k for k in rec if k not in header]
    return records, header


def _cell(value) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None if value is None else json.dumps(value)
    text = str(value).strip()
    return text or None


def parse_runs(path: str | os.PathLike, *, columns: dict[str, str] | None = None,
               conventions: Conventions = Conventions()) -> tuple[list[ImportedRun], str, tuple[str, ...]]:
    """Every row of the table as an `ImportedRun`, each checked (module docstring); (runs, text, ignored)."""
    name, stem = table_name(path), table_name(path, stem=True)
    text, rows, ignored = read_table(path, columns=columns)
    sources = {(cells.get("source") or stem) for _, _, cells in rows}
    runs, seen = [], {}
    for row, line, cells in rows:
        run = _run(name, row, line, cells, conventions, default_source=stem, many=len(sources) > 1)
        key = (run.group, run.shape.label(), run.lr, run.seed)
        if key in seen:
            raise UserError(f"{name}: row {row} (line {line}), column seed: the same run as row {seen[key]} (same "
                            "group, shape, lr and seed); give each run its own seed or label")
        seen[key] = row
        runs.append(run)
    return runs, text, ignored


def _run(name, row, line, cells, conv: Conventions, *, default_source: str, many: bool) -> ImportedRun:
    from depthwidth.shapes.flops import flops as flops_of
    from depthwidth.shapes.params import count_params

    where = f"{name}: row {row} (line {line})"

    def bad(column: str, why: str) -> UserError:
        return UserError(f"{where}, column {column}: {why}")

    values = {}
    for column, raw in cells.items():
        if raw is None or column in TEXTS:
            values[column] = raw
            continue
        try:
            value = float(raw)
        except ValueError:
            raise bad(column, f"{echo_repr(raw)} is not a number") from None
        if not math.isfinite(value):
            raise bad(column, f"{echo_repr(raw)} is not a finite number")
        if column == "seed":
            if value < 0 or value != int(value) or value >= 2**63:
                raise bad(column, f"{echo_repr(raw)} must be a whole number >= 0")
        elif value <= 0:
            raise bad(column, f"{echo_repr(raw)} must be positive")
        if column in INTEGERS:
            if value != int(value):
                raise bad(column, f"{echo_repr(raw)} must be a whole number")
            if value > MAX_INTEGER:
                raise bad(column, f"{echo_repr(raw)} is too large (at most {MAX_INTEGER:,}, the store's integers)")
            value = int(value)
        values[column] = value
    for column in REQUIRED:
        if values.get(column) is None:
            raise bad(column, f"empty; every row needs its {column}")
    if values.get("lr") is not None and values["lr"] > 10:
        raise bad("lr", f"{values['lr']:g} is not a learning rate (at most 10)")
    for column in TEXTS:
        if values.get(column) is not None and (len(values[column]) > 64 or not values[column].isprintable()):
            raise bad(column, "must be printable text of at most 64 characters")
    vocab = values.get("vocab") or conv.vocab
    if vocab is None:
        raise bad("vocab", "no vocabulary size: add a vocab column or pass --vocab")
    d_model, seq_len = values["d_model"], values.get("seq_len") or conv.seq_len
    heads = values.get("n_heads")
    if heads is None:
        if d_model % conv.head_dim:
            raise bad("d_model", f"{d_model} is not a multiple of the head size {conv.head_dim} (--head-dim); "
                                 "give an n_heads column")
        heads = d_model // conv.head_dim
    try:
        shape = Shape(n_layers=values["n_layers"], d_model=d_model, n_heads=heads, vocab_size=vocab, ffn=conv.ffn,
                      norm=conv.norm, bias=conv.bias, pos=conv.pos, tie_embeddings=conv.tied, max_seq_len=seq_len)
    except (UserError, ValueError) as exc:
        message = str(exc)
        column = next((c for f, c in _SHAPE_COLUMN.items() if message.startswith(f + "=")),
                      next((c for f, c in _SHAPE_COLUMN.items() if f" {f}" in message[:40]), "d_model"))
        raise bad(column, f"the planner cannot build this shape: {message}") from None
    counts = count_params(shape)
    given = values.get("params")
    if given is not None:
        ref = counts.total if conv.params_kind == "total" else counts.non_embedding
        off = abs(given - ref) / ref
        if off > conv.tolerance:
            raise bad("params", f"{given:,} disagrees with the shape {shape.label()}: count_params gives {ref:,} "
                                f"{conv.params_kind} parameters ({_describe(shape)}), {off:.2%} off, "
                                f"{conv.tolerance:.0%} allowed; set the conventions (--ffn, --bias, --pos, --vocab, "
                                "--untied, --params-kind) or fix the row")
    tokens = values["tokens"]
    exact = tokens * flops_of(shape, seq_len=seq_len).train_per_token
    run_flops = values.get("flops")
    if run_flops is not None:
        refs = (exact, 6 * counts.total * tokens, 6 * counts.non_embedding * tokens)
        if min(abs(run_flops - r) / r for r in refs) > conv.tolerance:
            raise bad("flops", f"{run_flops:.4g} disagrees with the shape {shape.label()} at {tokens:,} tokens: "
                               f"{exact:.4g} (shapes.flops), {refs[1]:.4g} (6ND, N total) or {refs[2]:.4g} (6ND, N "
                               f"non-embedding), none within {conv.tolerance:.0%}")
    source = values.get("source") or default_source
    group = values.get("label") or (f"{source}-" if many else "") + f"D{_human(tokens)}"
    return ImportedRun(row=row, line=line, shape=shape, group=group, source=source, tokens=tokens,
                       loss=float(values["loss"]), seed=values.get("seed") or 0, lr=values.get("lr"),
                       params=counts.total, non_embedding_params=counts.non_embedding,
                       flops=float(run_flops if run_flops is not None else exact),
                       tokens_per_s=values.get("tokens_per_s"), decode_ms=values.get("decode_ms"))


def _describe(shape: Shape) -> str:
    return (f"ffn {shape.ffn}, norm {shape.norm}, bias {shape.bias}, pos {shape.pos}, vocab {shape.vocab_size}, "
            f"{'tied' if shape.tie_embeddings else 'untied'}, max_seq_len {shape.max_seq_len}")


def _human(value: float) -> str:
    from depthwidth.shapes.families import human

    return human(value)


def table_name(path: str | os.PathLike, *, stem: bool = False) -> str:
    """The table's file name (or its stem) as messages, the spec and the store record it: bytes of a name
    that are not UTF-8 (undecodable, held as lone surrogates) become U+FFFD, which every text format holds."""
    p = Path(path)
    return os.fsencode(p.stem if stem else p.name).decode("utf-8", "replace")


def study_name(path: str | os.PathLike) -> str:
    """A study name (letters, digits, '-', '_', '.') from the table's file name."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(path).stem).strip("-._") or "imported"
    return stem[:64]


__all__ = ["COLUMNS", "Conventions", "INFO_FILE", "ImportReport", "ImportedRun", "OPTIONAL", "PARAMS_KINDS",
           "REQUIRED", "parse_columns", "parse_runs", "read_table", "study_name", "table_name"]
