"""Every study in examples/ run to a report, at reduced size: one row per example with its reduction, its runs,
the wall seconds, its protocol warnings and whether the report was written.

    python benchmarks/check_examples.py [--only tiny,completep] [--full] [--keep DIR] [--lock FILE] [--workers N]

The reduction is one mechanical rule, with a factor F and a seed count S per example (`REDUCTIONS`); `--full`
runs every example as written:
  - the training length / F: [train] steps, tokens or tokens_per_param, and an equal-time [[budget]]'s seconds
    or gpu_hours; [train] warmup and [eval] every / F too (at least 1), so each run keeps its schedule's shape
    and its number of evaluations; checkpoint_every is kept (fewer resume points; no result depends on them);
  - the seeds: the first S of `seeds`, and [lr] transfer_seeds at most S;
  - everything else as written: the shapes (the planner's budgets or the explicit shapes), the data, the
    parametrization, the benchmarks, and the whole learning-rate protocol ([lr] grid or centre and factors,
    search, max_trials, step, transfer_from), so a reduced run tunes its learning rate by the example's own rules.
    A shorter run's best learning rate is not the full-length one (shorter runs favour larger ones), so a fixed
    grid that brackets the optimum at one length may miss it at another: an example that brackets its search
    (`search = "bracket"`) passes at both.
A flops [[budget]] cannot be shortened without changing its shapes (its tokens pick N), so an example with one
runs only with --full. An example whose header has a line `# On a 2-core CPU: skipped - <reason>` (the reason may
go on over the next comment lines, up to an empty `#` line) is not run: its row says "skipped" with that reason.

Each example runs in a fresh folder (`depthwidth study run`, then `depthwidth report`, as a user types them) and
its warnings are the study's protocol warnings (`depthwidth study status --json`: `depthwidth.study.summary`).
A grid-edge warning is a shape whose best learning rate is the lowest or highest it tried when its search ended
(`depthwidth.study.selection`): its optimum was not bracketed. Exit status 1 when any example failed (a command
exited non-zero or a run failed), wrote no report, or has a grid-edge warning; other warnings are printed and
counted but do not fail the check. `--lock FILE` holds an exclusive lock on FILE (flock) while each example runs,
so that timed jobs on a shared machine that take the same lock never overlap one.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with the tomli backport
    import tomli as tomllib

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@dataclass(frozen=True, kw_only=True, slots=True)
class Reduction:
    factor: int = 1  # the training length is divided by this
    seeds: int | None = None  # keep the first this many seeds (None: all)

    def describe(self) -> str:
        parts = [f"length/{self.factor}"] if self.factor > 1 else []
        if self.seeds is not None:
            parts.append(f"{self.seeds} seed{'s' if self.seeds > 1 else ''}")
        return ", ".join(parts) or "none"


FULL = Reduction()
#: each example's reduction: one seed first (the optimum stays where it is, only its noise grows), then the length
#: only where a few minutes on two cores need it and its optimum stays inside its search. A shorter run's optimum
#: moves to larger learning rates: probes at 1/8 of its steps had two shapes (L1, L8) at the top of their
#: searches, at 1/2 still one (L1-H96: best 0.016 of 0.002-0.016), so it runs at full length
REDUCTIONS = {
    "tiny": FULL,  # well under a minute as written
    "demo": Reduction(seeds=1),
    "iso-time": Reduction(seeds=1),
    "completep": Reduction(seeds=1),  # a quarter of its 400 steps would not pass the bigram baseline
    "probes": Reduction(seeds=1),
}
SKIP_MARK = re.compile(r"^#\s*On a 2-core CPU: skipped\s*[-:.]?\s*(.*)$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    example: str
    reduction: str
    runs: int = 0  # runs of the study (training, benchmarks), every status
    seconds: float = 0.0  # wall seconds of `study run` and `report`
    warnings: tuple[str, ...] = ()  # every protocol warning of the study
    edge_warnings: tuple[str, ...] = ()  # those of a learning rate at an edge of what its shape tried
    report: bool = False  # the report's index.html was written
    error: str | None = None  # why the example failed
    skipped: str | None = None  # why the example was not run (its header's reason)

    @property
    def ok(self) -> bool:
        return self.skipped is not None or (self.error is None and self.report and not self.edge_warnings)


def skip_reason(path: Path) -> str | None:
    """The reason in the header of the example at `path` why it does not run on a 2-core CPU, or None."""
    reason: list[str] | None = None
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if reason is not None:
            text = line.lstrip("#").strip()
            if not text:
                break
            reason.append(text)
        elif match := SKIP_MARK.match(line):
            reason = [match.group(1).strip()]
    return " ".join(r for r in reason if r) if reason is not None else None


def _scaled(value: int, factor: int) -> int:
    return max(1, round(value / factor))


def reduce_spec(raw: dict, reduction: Reduction) -> dict:
    """A copy of the parsed spec `raw` at `reduction` (module docstring). ValueError when it cannot be reduced."""
    spec = json.loads(json.dumps(raw))  # a deep copy of plain TOML values
    f = reduction.factor
    if f > 1:
        train, budgets = spec.get("train", {}), spec.get("budget", [])
        if any("flops" in b for b in budgets):
            raise ValueError("a flops budget's tokens pick its shapes, so its runs cannot be shortened; use --full")
        for key in ("steps", "tokens"):
            if key in train:
                train[key] = _scaled(train[key], f)
        if "tokens_per_param" in train:
            train["tokens_per_param"] = train["tokens_per_param"] / f
        if train.get("warmup"):
            train["warmup"] = _scaled(train["warmup"], f)
        if "every" in spec.get("eval", {}):
            spec["eval"]["every"] = _scaled(spec["eval"]["every"], f)
        for budget in budgets:
            for key in ("seconds", "gpu_hours"):
                if key in budget:
                    budget[key] = budget[key] / f
    if reduction.seeds is not None:
        spec["seeds"] = spec.get("seeds", [0])[:reduction.seeds]
        lr = spec.get("lr", {})
        if "transfer_seeds" in lr:
            lr["transfer_seeds"] = min(lr["transfer_seeds"], len(spec["seeds"]))
    return spec


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list) and not any(isinstance(v, dict) for v in value):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise ValueError(f"cannot write {value!r} as a TOML value")


def to_toml(spec: dict, prefix: str = "") -> str:
    """The TOML text of a parsed spec: plain keys, tables and arrays of tables (what study specs hold)."""
    plain, tables, arrays = [], [], []
    for key, value in spec.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            arrays.append((key, value))
        else:
            plain.append(f"{key} = {_toml_value(value)}")
    out = "\n".join(plain) + ("\n" if plain else "")
    for key, value in tables:
        out += f"\n[{prefix}{key}]\n" + to_toml(value, prefix=f"{prefix}{key}.")
    for key, items in arrays:
        for item in items:
            out += f"\n[[{prefix}{key}]]\n" + to_toml(item, prefix=f"{prefix}{key}.")
    return out


def _cli(*args: str, cwd: Path, log: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "depthwidth", *args], capture_output=True, text=True, cwd=cwd)
    with log.open("a") as f:
        f.write(f"$ depthwidth {' '.join(args)}\n{proc.stdout}{proc.stderr}\n")
    return proc


def _failure(proc: subprocess.CompletedProcess, what: str) -> str:
    lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
    return f"{what} exited {proc.returncode}: {lines[-1] if lines else 'no output'}"


def is_edge(choice: dict) -> bool:
    """Whether a learning-rate choice of `study status --json` (`lr_selection`) warns of an unbracketed edge."""
    return bool(choice.get("warning")) and choice.get("edge") is not None


def check_example(path: Path, reduction: Reduction, folder: Path, *, workers: int | None = None) -> Row:
    """Run the example at `path` at `reduction` in `folder` (made; its study in folder/study, the report in
    folder/report, every command's output in folder/log.txt) and read its warnings."""
    name = path.stem
    row = {"example": name, "reduction": reduction.describe()}
    reason = skip_reason(path)
    if reason is not None:
        return Row(**row, skipped=reason)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "log.txt"
    try:
        spec = reduce_spec(tomllib.loads(path.read_text()), reduction)
    except ValueError as exc:
        return Row(**row, error=str(exc))
    spec_path = folder / f"{name}.toml"
    spec_path.write_text(to_toml(spec))
    study, report = folder / "study", folder / "report"
    extra = ("--workers", str(workers)) if workers is not None else ()
    start = time.perf_counter()
    ran = _cli("study", "run", str(spec_path), "--dir", str(study), *extra, cwd=folder, log=log)
    error = _failure(ran, "study run") if ran.returncode != 0 else None
    if not (study / "study.sqlite").is_file():
        return Row(**row, seconds=time.perf_counter() - start, error=error or "study run made no study")
    made = _cli("report", str(study), "-o", str(report), cwd=folder, log=log)
    seconds = time.perf_counter() - start
    if made.returncode != 0 and error is None:
        error = _failure(made, "report")
    status = _cli("study", "status", str(study), "--json", cwd=folder, log=log)
    if status.returncode != 0:
        return Row(**row, seconds=seconds, report=(report / "index.html").is_file(),
                   error=error or _failure(status, "study status"))
    summary = json.loads(status.stdout)
    failed = summary["counts"].get("failed", 0)
    if error is None and failed:
        error = f"{failed} run(s) failed"
    edges = tuple(f"{c['shape_label']} ({c['group']}): {c['warning']}" for c in summary["lr_selection"] if is_edge(c))
    return Row(**row, runs=sum(summary["counts"].values()), seconds=seconds, warnings=tuple(summary["warnings"]),
               edge_warnings=edges, report=(report / "index.html").is_file(), error=error)


def _outcome(row: Row) -> str:
    if row.skipped is not None:
        return "skipped"
    if row.error is not None:
        return "FAILED"
    if not row.report:
        return "no report"
    return "GRID EDGE" if row.edge_warnings else "ok"


def format_rows(rows: list[Row]) -> str:
    """The table (one row per example), then each example's warnings, error or skip reason in full."""
    head = ("example", "reduction", "runs", "wall s", "warnings", "edge", "report", "outcome")
    body = [(r.example, "-" if r.skipped else r.reduction, "-" if r.skipped else str(r.runs), "-" if r.skipped else f"{r.seconds:.0f}",
             "-" if r.skipped else str(len(r.warnings)), "-" if r.skipped else str(len(r.edge_warnings)),
             "-" if r.skipped else ("yes" if r.report else "no"), _outcome(r)) for r in rows]
    widths = [max(len(line[i]) for line in (head, *body)) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in (head, *body)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in rows:
        if r.skipped is not None:
            lines.append(f"{r.example}: skipped: {r.skipped}")
        if r.error is not None:
            lines.append(f"{r.example}: error: {r.error}")
        lines += [f"{r.example}: warning: {w}" for w in r.warnings]
    return "\n".join(lines)


@contextmanager
def held(lock: Path):
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def examples(only: str | None) -> list[Path]:
    """The example specs (all of examples/*.toml, or the names in the comma list `only`)."""
    found = {p.stem: p for p in sorted(EXAMPLES.glob("*.toml"))}
    if not only:
        return list(found.values())
    names = [n.strip().removesuffix(".toml") for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in found]
    if unknown:
        raise SystemExit(f"check_examples: no example {', '.join(unknown)}; the examples: {', '.join(found)}")
    return [found[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--only", metavar="NAME,...", help="these examples only (default: every examples/*.toml)")
    p.add_argument("--full", action="store_true", help="no reduction: each example as written")
    p.add_argument("--keep", metavar="DIR", type=Path, help="keep each example's study and report in DIR/<name>")
    p.add_argument("--lock", metavar="FILE", type=Path, help="hold an flock on FILE while each example runs")
    p.add_argument("--workers", type=int, help="local worker processes of each study (default: the study's)")
    args = p.parse_args(argv)
    paths = examples(args.only)
    rows = []
    with tempfile.TemporaryDirectory(prefix="check-examples-") as tmp:
        root = args.keep if args.keep is not None else Path(tmp)
        for path in paths:
            reduction = FULL if args.full else REDUCTIONS.get(path.stem, FULL)
            with held(args.lock) if args.lock is not None else nullcontext():
                row = check_example(path, reduction, root / path.stem, workers=args.workers)
            rows.append(row)
            took = "" if row.skipped is not None else f" ({row.seconds:.0f} s)"
            print(f"{row.example}: {_outcome(row)}{took}", file=sys.stderr, flush=True)
    print(format_rows(rows))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
