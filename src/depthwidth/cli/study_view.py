"""How `depthwidth study` and `depthwidth demo` show a study: rich tables for the terminal, a small
markdown page for report.md, and the live progress display of a running study. Pure presentation of
`depthwidth.study` records; nothing here computes a number."""

from __future__ import annotations

from typing import Any

STATE_ORDER = ("completed", "diverged", "failed", "running", "interrupted", "pending")


def _num(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _count(n: float | None) -> str:
    from depthwidth.report.tables import short_count

    return "-" if n is None else short_count(n)


def counts_line(summary) -> str:
    parts = [f"{summary.counts[s]} {s}" for s in STATE_ORDER if summary.counts.get(s)]
    total = sum(summary.counts.get(s, 0) for s in STATE_ORDER)
    state = "running" if summary.running else ("complete" if summary.complete else "incomplete")
    return f"study {summary.name!r} in {summary.study_dir}: {state}, {total} runs ({', '.join(parts) or 'none'})"


def fairness_line(summary) -> str:
    f = summary.fairness
    if f.fair:
        return (f"fair: yes ({f.checked_runs} training runs share data, settings, token budget per group, "
                "batch stream per seed, LR-trial count and seeds)")
    return f"fair: NO - differs: {', '.join(f.fields)}"


SHAPE_COLUMNS = (
    ("group", "group", lambda r: r.group),
    ("shape", "shape", lambda r: r.shape_label),
    ("L", "n_layers", lambda r: str(r.n_layers)),
    ("d", "d_model", lambda r: str(r.d_model)),
    ("non-emb", "non_embedding_params", lambda r: _count(r.non_embedding_params)),
    ("d/L", "aspect_ratio", lambda r: f"{r.aspect_ratio:.3g}"),
    ("LRs", "lr_trials", lambda r: str(r.lr_trials)),
    ("best lr", "best_lr", lambda r: _num(r.best_lr, ".3g")),
    ("val loss", "val_loss", lambda r: _num(r.val_loss, ".4f")),
    ("tok/s", "tokens_per_s", lambda r: _count(r.tokens_per_s)),
    ("MFU", "mfu", lambda r: "-" if r.mfu is None else f"{r.mfu:.1%}"),
    ("prefill ms", "prefill_ms", lambda r: _pair(r.prefill_ms, r.prefill_predicted_ms)),
    ("decode ms", "decode_ms", lambda r: _pair(r.decode_ms, r.decode_predicted_ms)),
)


def _pair(measured: float | None, predicted: float | None) -> str:
    if measured is None:
        return "-"
    return f"{measured:.3g}" + (f" ({predicted:.2g})" if predicted is not None else "")


def shapes_table(summary):
    """The comparison table; columns that say nothing here (one group, d/L, the LR count the fairness line
    already states) are left out so that it fits a terminal."""
    from rich import box
    from rich.table import Table

    skip = {"d/L", "LRs"} | ({"group"} if len({r.group for r in summary.rows}) <= 1 else set())
    columns = [c for c in SHAPE_COLUMNS if c[0] not in skip]
    table = Table(title="shapes (best learning rate each; batch-1 latency in ms: measured (predicted); decode per token)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for head, _, _ in columns:
        table.add_column(head, justify="left" if head in ("group", "shape") else "right", no_wrap=True)
    for row in summary.rows:
        table.add_row(*[get(row) for _, _, get in columns])
    return table


def runs_table(runs, results: dict):
    from rich.table import Table

    table = Table(title="runs", title_justify="left")
    for head in ("id", "kind", "shape", "lr", "seed", "status", "tries", "val loss", "wall s", "error"):
        table.add_column(head, justify="left" if head in ("id", "kind", "shape", "status", "error") else "right")
    for r in runs:
        res = results.get(r.run_id)
        table.add_row(r.run_id[:10], r.kind, r.shape_label, _num(r.lr, ".3g"), _num(r.seed, "d"), r.status,
                      str(r.attempts), _num(res.val_loss if res else None, ".4f"), _num(r.wall_seconds, ".1f"),
                      (r.error or "")[:80])
    return table


def curve_table(points, *, every: int = 1):
    from rich.table import Table

    table = Table(title="curve", title_justify="left")
    for head in ("step", "tokens", "train loss", "val loss", "lr", "grad norm", "tok/s"):
        table.add_column(head, justify="right")
    for i, p in enumerate(points):
        if i % every and p.val_loss is None and i != len(points) - 1:
            continue
        table.add_row(str(p.step), _count(p.tokens), _num(p.train_loss, ".4f"), _num(p.val_loss, ".4f"),
                      _num(p.lr, ".3g"), _num(p.grad_norm, ".3g"), _count(p.tokens_per_s))
    return table


def states_table(summary, runs):
    """Runs of the current spec by state, with the first few of each."""
    from rich.table import Table

    table = Table(title="runs by state", title_justify="left")
    for head in ("state", "runs", "which"):
        table.add_column(head, justify="right" if head == "runs" else "left")
    stale = summary.counts.get("interrupted", 0) > 0
    for state in STATE_ORDER:
        n = summary.counts.get(state, 0)
        if not n:
            continue
        wanted = "running" if state == "interrupted" or (state == "running" and stale) else state
        labels = [_run_label(r) for r in runs if r.status == wanted]
        table.add_row(state, str(n), ", ".join(labels[:4]) + (f", ... ({n - 4} more)" if n > 4 else ""))
    return table


def _run_label(run) -> str:
    return f"{run.shape_label} bench" if run.kind == "bench" else f"{run.shape_label} lr={run.lr:.3g} s{run.seed}"


def print_summary(console, summary, runs=None) -> None:
    console.print(counts_line(summary))
    if runs is not None:
        console.print(states_table(summary, runs))
    console.print(fairness_line(summary))
    for finding in summary.fairness.findings:
        console.print(f"  - {finding.message}", markup=False)
    if summary.rows:
        console.print(shapes_table(summary))
    for warning in summary.warnings:
        if not warning.startswith("unfair: "):
            console.print(f"warning: {warning}", markup=False)


def summary_markdown(summary, *, title: str) -> str:
    """A small report.md: the comparison table, fairness and warnings."""
    lines = [f"# {title}", "", counts_line(summary), "", fairness_line(summary), ""]
    lines += [f"- {f.message}" for f in summary.fairness.findings]
    heads = [h for h, _, _ in SHAPE_COLUMNS]
    lines += ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in heads) + "|"]
    lines += ["| " + " | ".join(get(r) for _, _, get in SHAPE_COLUMNS) + " |" for r in summary.rows]
    lines += ["", "Latency columns: measured median (roofline prediction) in ms at batch 1.", ""]
    if summary.warnings:
        lines += ["## Warnings", ""] + [f"- {w}" for w in summary.warnings] + [""]
    return "\n".join(lines)


class StudyProgress:
    """Live display of a running study on stderr: the study's runs and the current run's steps."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._bar = None

    def __enter__(self) -> StudyProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                                 console=Console(stderr=True), transient=True)
            self._bar.__enter__()
            self._study = self._bar.add_task("study", total=None, info="")
            self._run = self._bar.add_task("run", total=None, info="")
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def __call__(self, event) -> None:
        bar = self._bar
        if bar is None:
            return
        if event.kind == "start":
            bar.update(self._study, total=event.total, completed=event.done, info=f"{event.todo} to run")
            bar.console.print(f"executor: {event.note}", markup=False)
        elif event.kind == "run_start":
            bar.update(self._run, description=event.label, completed=0, total=None,
                       info=f"attempt {event.attempt}" if event.attempt > 1 else "")
        elif event.kind == "run_progress" and event.progress:
            p = event.progress
            info = " ".join(x for x in (
                f"loss {p['loss']:.3f}" if p.get("loss") is not None else "",
                f"{p['tokens_per_s']:,.0f} tok/s" if p.get("tokens_per_s") else "",
                f"eta {p['eta_s']:.0f}s" if p.get("eta_s") is not None else "") if x) or str(p.get("phase", ""))
            bar.update(self._run, completed=p.get("step", 0), total=p.get("steps"), info=info)
        elif event.kind == "run_end":
            bar.update(self._study, completed=event.done)
            text = f"{event.status:9s} {event.label} ({event.seconds:.1f} s)"
            bar.console.print(text + (f": {event.error}" if event.error else ""), markup=False)
        elif event.kind == "retry":
            bar.console.print(f"retrying  {event.label} after attempt {event.attempt}: {event.error}", markup=False)


__all__ = ["StudyProgress", "counts_line", "curve_table", "fairness_line", "print_summary", "runs_table",
           "shapes_table", "states_table", "summary_markdown"]
