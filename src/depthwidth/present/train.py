"""The table `depthwidth train` prints: the headline numbers of one `TrainResult`."""

from __future__ import annotations

from depthwidth.present.units import duration, flops_per_s, integer, nbytes, number, or_dash, percent


def result_rows(result) -> list[tuple[str, str]]:
    """(label, text) rows of the headline numbers of a `TrainResult`."""
    status = result.status + (f" at step {result.diverged_at_step}" if result.diverged_at_step is not None else "")
    rows = [("status", status + (f" ({result.error})" if result.error else "")),
            ("val loss (nats/token)", or_dash(result.val_loss, ".4f"))]
    if len(result.val_loss_by_slice) > 1:
        rows += [(f"  slice {k}", or_dash(v, ".4f")) for k, v in result.val_loss_by_slice.items()]
    for h in result.horizons:  # a WSD run's cooldown branches, then the run itself
        where = f"cooldown from step {integer(h['branched_at'])}" if h["branched_at"] is not None else "the run"
        rows.append((f"  horizon {h['fraction']:g}", f"{or_dash(h['val_loss'], '.4f')} at {integer(h['tokens'])} "
                                                    f"tokens ({where})"))
    rows.append(("val loss by position", " ".join(or_dash(v, ".3f") for v in result.val_loss_by_position)))
    for probe, by_difficulty in result.probe_accuracy.items():
        rows.append((f"  probe {probe} accuracy", "  ".join(f"{d}: {percent(a)}" for d, a in by_difficulty.items())))
    memory = or_dash(result.peak_memory_bytes, nbytes)
    if result.saved_activation_bytes is not None:
        memory += (f" (activations {nbytes(result.saved_activation_bytes)}, "
                   f"peak RSS {or_dash(result.peak_rss_bytes, nbytes)})")
    rows += [
        ("params (non-embedding)", f"{integer(result.params)} ({integer(result.non_embedding_params)})"),
        ("steps / tokens", f"{integer(result.steps)} / {integer(result.tokens)}"),
        ("tokens/s (training)", or_dash(result.tokens_per_s, number)),
        ("achieved FLOP/s", or_dash(result.achieved_flops_per_s, flops_per_s)),
        ("MFU", f"{or_dash(result.mfu, lambda v: percent(v, digits=2))} of {or_dash(result.peak_flops, flops_per_s)} "
                f"({result.peak_flops_source})"),
        ("peak memory", memory),
        ("time train / eval", f"{duration(result.train_seconds)} / {duration(result.eval_seconds)}"),
        ("device / dtype / threads", f"{result.device} / {result.dtype} / {result.threads}"),
        ("tokenizer (vocab)", f"{result.tokenizer} ({result.vocab_size})"),
        ("corpus hash", result.corpus_hash[:16]),
        ("batch stream hash", result.batch_stream_hash[:16]),
    ]
    return rows


def result_table(result, *, out: str | None = None):
    """A rich Table of `result_rows`, with the run folder when there is one."""
    from rich.table import Table

    table = Table(title=f"depthwidth train: {result.shape.get('n_layers')} layers x {result.shape.get('d_model')}",
                  show_header=False)
    table.add_column("quantity", style="bold")
    table.add_column("value")
    for label, text in result_rows(result):
        table.add_row(label, text)
    if out:
        table.add_row("run folder", out)
    return table


def print_result(result, *, out: str | None = None) -> None:
    from depthwidth.present.terminal import console

    console().print(result_table(result, out=out))


__all__ = ["print_result", "result_rows", "result_table"]
