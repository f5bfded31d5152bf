"""How `depthwidth study` and `depthwidth demo` show a study in the terminal: the runs by state, the
fairness verdict, the comparison table of the study's `ShapeResult`s (the per-shape type every table
of depthwidth renders), the runs, one run with its curve, and a validated spec. Pure presentation of
`depthwidth.study` records; nothing here computes a number."""

from __future__ import annotations

from typing import Callable

from depthwidth.present.units import count, duration, integer, nbytes, number, or_dash, percent

STATE_ORDER = ("completed", "diverged", "failed", "running", "interrupted", "pending")


def counts_line(summary) -> str:
    parts = [f"{summary.counts[s]} {s}" for s in STATE_ORDER if summary.counts.get(s)]
    total = sum(summary.counts.get(s, 0) for s in STATE_ORDER)
    state = "running" if summary.running else ("complete" if summary.complete else "incomplete")
    return f"study {summary.name!r} in {summary.study_dir}: {state}, {total} runs ({', '.join(parts) or 'none'})"


def fairness_line(summary) -> str:
    f = summary.fairness
    if f.fair:
        return (f"fair: yes ({f.checked_runs} training runs share data, settings, token budget per group "
                "(an equal-time group: its predicted time), batch stream per seed, LR-trial count and seeds)")
    return f"fair: NO - differs: {', '.join(f.fields)}"


def _latency(measured: float | None, predicted: float | None) -> str:
    """'1.53 (0.96)': measured ms, with the roofline prediction in brackets."""
    if measured is None:
        return "-"
    return number(measured) + (f" ({number(predicted)})" if predicted is not None else "")


def _with_predicted(measured: float | None, predicted: float | None, fmt: Callable[[float], str]) -> str:
    """'128 B (128 B)': a measured value with its prediction in brackets; '-' for a run without one."""
    if measured is None:
        return "-"
    return fmt(measured) + (f" ({fmt(predicted)})" if predicted is not None else "")


#: (header, cell) of the terminal comparison table, one row per `ShapeResult`
SHAPE_COLUMNS: tuple[tuple[str, Callable], ...] = (
    ("group", lambda r: r.group),
    ("shape", lambda r: r.shape_label),
    ("L", lambda r: str(r.n_layers)),
    ("d", lambda r: str(r.d_model)),
    ("non-emb", lambda r: count(r.non_embedding_params)),
    ("d/L", lambda r: f"{r.aspect_ratio:.3g}"),
    ("LRs", lambda r: str(r.lr_trials)),
    ("best lr", lambda r: or_dash(r.best_lr, ".3g")),
    ("lr search", lambda r: _lr_how(r)),
    ("val loss", lambda r: or_dash(r.val_loss, ".4f")),
    ("below bigram", lambda r: "-" if r.bigram_gain is None else f"{r.bigram_gain:+.3f}" + ("" if r.learned else " no")),
    ("tok/s", lambda r: or_dash(r.tokens_per_s)),
    ("MFU", lambda r: or_dash(r.mfu, percent)),
    ("prefill ms", lambda r: _latency(r.measured_prefill_ms, r.bench_predicted_prefill_ms)),
    ("decode ms", lambda r: _latency(r.measured_decode_ms, r.bench_predicted_decode_ms)),
    ("comm/tok", lambda r: _with_predicted(r.comm_bytes_per_token, r.predicted_comm_bytes_per_token, nbytes)),
    ("comm time/tok", lambda r: _with_predicted(r.comm_seconds_per_token, r.predicted_comm_seconds_per_token,
                                                duration)),
    ("comm %", lambda r: or_dash(r.comm_fraction, percent)),
)
#: shown only when some run of the study measured its communication (several processes)
COMM_COLUMNS = ("comm/tok", "comm time/tok", "comm %")


def _lr_how(r) -> str:
    """How a shape's learning rate was found: 'bracketed', 'edge: high', 'from L2-H64-A8'."""
    if r.lr_mode == "transfer" and r.lr_transfer_from not in (None, r.shape_label):
        return f"from {r.lr_transfer_from}"
    if r.lr_edge:
        return f"edge: {r.lr_edge}"
    return "bracketed" if r.lr_bracketed else "-"


def shapes_table(summary):
    """The comparison table; columns that say nothing here (one group, d/L, the LR count the fairness line
    already states) are left out so that it fits a terminal."""
    from rich import box
    from rich.table import Table

    skip = {"d/L", "LRs"} | ({"group"} if len({r.group for r in summary.rows}) <= 1 else set())
    if all(r.lr_mode == "grid" for r in summary.rows):
        skip.add("lr search")
    comm = any(r.comm_bytes_per_token is not None for r in summary.rows)
    if not comm:
        skip.update(COMM_COLUMNS)
    columns = [c for c in SHAPE_COLUMNS if c[0] not in skip]
    table = Table(title="shapes (best learning rate each; batch-1 latency in ms: measured (predicted); decode per "
                        "token" + ("; communication per trained token, one rank: measured (predicted)" if comm
                                   else "") + ")", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for head, _ in columns:
        table.add_column(head, justify="left" if head in ("group", "shape") else "right", no_wrap=True)
    for row in summary.rows:
        table.add_row(*[cell(row) for _, cell in columns])
    return table


def runs_table(runs, results: dict):
    from rich.table import Table

    table = Table(title="runs", title_justify="left")
    for head in ("id", "kind", "shape", "lr", "seed", "status", "tries", "val loss", "wall s", "error"):
        table.add_column(head, justify="left" if head in ("id", "kind", "shape", "status", "error") else "right")
    for r in runs:
        res = results.get(r.run_id)
        table.add_row(r.run_id[:10], r.kind, r.shape_label, or_dash(r.lr, ".3g"), or_dash(r.seed, "d"), r.status,
                      str(r.attempts), or_dash(res.val_loss if res else None, ".4f"), or_dash(r.wall_seconds, ".1f"),
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
        table.add_row(str(p.step), or_dash(p.tokens, count), or_dash(p.train_loss, ".4f"),
                      or_dash(p.val_loss, ".4f"), or_dash(p.lr, ".3g"), or_dash(p.grad_norm, ".3g"),
                      or_dash(p.tokens_per_s))
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


def running_table(running):
    """The runs in flight (`study.eta.RunningRun`s): step of steps and the ETA of each."""
    from rich.table import Table

    table = Table(title="running now", title_justify="left")
    for head in ("run", "run id", "step", "ETA"):
        table.add_column(head, justify="right" if head in ("step", "ETA") else "left")
    for r in running:
        step = "-" if r.step is None else f"{r.step}" + (f"/{r.steps}" if r.steps else "")
        if r.step is None and r.steps:
            step = f"-/{r.steps}"
        table.add_row(r.label, r.run_id[:10], step, or_dash(r.eta_s, duration))
    return table


def baselines_line(baselines) -> str:
    """'baselines: unigram 3.329, bigram 2.544 nats per token (...); a run must end below the bigram one'."""
    if baselines is None:
        return "baselines: not known (the study's corpus is not readable here)"
    return f"baselines: {baselines.describe()}; a run counts as learned below the bigram baseline"


def print_summary(console, summary, runs=None, running=()) -> None:
    console.print(counts_line(summary))
    console.print(baselines_line(summary.baselines), markup=False)
    if runs is not None:
        console.print(states_table(summary, runs))
    if running:
        console.print(running_table(running))
    console.print(fairness_line(summary))
    for finding in summary.fairness.findings:
        console.print(f"  - {finding.message}", markup=False)
    if summary.rows:
        console.print(shapes_table(summary))
    for warning in summary.warnings:
        if not warning.startswith("unfair: "):
            console.print(f"warning: {warning}", markup=False)


def run_report_line(report) -> str:
    """What one `study run` did (a `RunReport`)."""
    return (f"ran {report.completed + report.diverged + report.failed} runs ({report.completed} completed, "
            f"{report.diverged} diverged, {report.failed} failed, {report.retries} retried); "
            f"{report.skipped} already finished were reused"
            + (f"; {report.inspected} shape(s) inspected" if report.inspected else ""))


def print_run(console, run, result, curve, errors) -> None:
    """One stored run (`study show DIR RUN`): what it is, its attempts, its result and its curve."""
    label = f"lr={run.lr:.3g} seed={run.seed}" if run.kind == "train" else "bench"
    console.print(f"run {run.run_id}\n  {run.kind} {run.shape_label} {label}, group {run.group!r}\n"
                  f"  status {run.status} after {run.attempts} attempt(s)"
                  + (f", wall {run.wall_seconds:.1f} s" if run.wall_seconds else ""), markup=False)
    for attempt, _, message in errors:
        console.print(f"  attempt {attempt} failed: {message}", markup=False)
    if result is not None and run.kind == "train":
        console.print(f"  val loss {or_dash(result.val_loss, '.4f')}  tokens {or_dash(result.tokens, integer)}  "
                      f"tokens/s {or_dash(result.tokens_per_s)}  MFU {or_dash(result.mfu, percent)}  "
                      f"batch stream {result.batch_stream_hash}", markup=False)
    if curve:
        console.print(curve_table(curve, every=max(1, len(curve) // 20)))


def print_validation(console, expansion) -> None:
    """A validated spec (`study validate`): its runs and, per budget group, its shapes and planner notes."""
    spec = expansion.spec
    adaptive = any(m.kind != "grid" for m in expansion.modes.values())
    runs = (f"{len(expansion.train_runs)} training runs to start with (the learning-rate search adds the rest)"
            if adaptive else f"{len(expansion.train_runs)} training runs ({spec.lr.trials} learning rates x "
                             f"{len(spec.seeds)} seed(s) per shape)")
    console.print(f"{spec.source}: study {spec.name!r} is valid: {runs} and {len(expansion.bench_runs)} benchmarks",
                  markup=False)
    for line in (horizons_line(expansion), verify_line(expansion)):
        if line:
            console.print(line, markup=False)
    for group in expansion.groups:
        if group.shares:
            share = next(iter(group.shares.values()))
            console.print(f"  group {group.label!r}: equal time, {share.seconds:g} s per run predicted on "
                          f"{share.source} (each shape's tokens below); shapes "
                          + ", ".join(s.label() for s in group.shapes), markup=False)
        else:
            console.print(f"  group {group.label!r}: {integer(group.tokens)} tokens per run; shapes "
                          + ", ".join(s.label() for s in group.shapes), markup=False)
        if group.label in expansion.modes:
            console.print(f"    learning rate: {expansion.modes[group.label].describe()}", markup=False)
        for note in group.notes:
            console.print(f"    planner: {note}", markup=False)


def horizons_line(expansion) -> str | None:
    """What the cooldown branches of a study with horizons cost (`depthwidth.study.horizons`)."""
    from depthwidth.study.horizons import extra_cost
    from depthwidth.study.run_config import train_config_of

    branches = [r for r in expansion.train_runs if r.parent is not None]
    parents = [r for r in expansion.train_runs if r.config["train"].get("horizons")]
    if not parents:
        return None
    config = train_config_of(parents[0].config)
    fractions = ", ".join(f"{h:g}" for h in config.horizons[:-1])
    return (f"  horizons: each run also trains the cooldown branch of horizon {fractions} of its steps "
            f"({len(branches)} of the training runs are such branches, each the standalone run of its length); "
            f"they add {extra_cost(config):.0%} to each run's training steps "
            f"({config.decay_fraction:g} of each horizon's steps), where separate runs would add "
            f"{sum(config.horizons[:-1]):.0%}")


def verify_line(expansion) -> str | None:
    """Which shapes `[lr] verify` checks and what it costs (`depthwidth.study.verify`)."""
    from depthwidth.study.lr_search import default_step
    from depthwidth.study.verify import factors, targets

    lr = expansion.spec.lr
    if not lr.verify:
        return None
    chosen = targets(expansion.groups, expansion.modes)
    if not chosen:
        return "  verify: no group transfers its learning rate, so there is nothing to verify"
    parts = []
    for label, shapes in chosen.items():
        mode = expansion.modes[label]
        home = next(g for g in expansion.groups if g.label == (mode.proxy_group or label))
        proxy = next(s for s in home.shapes if s.label() == mode.proxy)
        step = lr.step or default_step(lr.values(proxy.d_model))
        mults = ", ".join(f"x{f:.3g}" for f in factors(lr.verify_count, step))
        runs = len(shapes) * lr.verify_count * len(mode.final_seeds)
        adapt = (f"; if the optimum moved, every shape of the group but the proxy searches up to {lr.extra_trials} "
                 f"more LRs ({_group_size(expansion, label) * lr.extra_trials * len(mode.final_seeds)} runs at most)"
                 if lr.adapts else "")
        parts.append(f"group {label!r}: {', '.join(s.label() for s in shapes)} at the transferred LR {mults} "
                     f"({runs} runs, {len(mode.final_seeds)} seed(s), full horizon only){adapt}")
    return "  verify: " + "; ".join(parts) + " - not results, shown next to the LR they check"


def _group_size(expansion, label: str) -> int:
    return len(next(g for g in expansion.groups if g.label == label).shapes)


def repair_lines(report) -> list[str]:
    """What `study repair` found and did (a `RepairReport`), one line per fact."""
    lines = [f"{report.study_dir}: store {report.store}"
             + (f"; kept as {report.moved_to} and rebuilt" if report.moved_to else ""),
             f"spec: {report.spec_source} ({report.runs} runs)",
             f"recovered from the run folders: {len(report.recovered)} finished run(s)"
             + (f"; already finished in the store: {report.finished_before}" if report.finished_before else "")
             + (f", of which {len(report.rewritten)} rewritten from their folder (the store's copy differed)"
                if report.rewritten else ""),
             f"to run again (no finished result anywhere): {len(report.pending)}"
             + (" - `depthwidth study run SPEC` runs them" if report.pending else "")]
    lines += [f"could not use {folder}: {why}" for folder, why in report.unusable]
    return lines


__all__ = ["COMM_COLUMNS", "SHAPE_COLUMNS", "STATE_ORDER", "counts_line", "curve_table", "fairness_line", "print_run",
           "print_summary", "print_validation", "horizons_line", "verify_line", "repair_lines", "run_report_line", "runs_table", "shapes_table",
           "states_table"]
