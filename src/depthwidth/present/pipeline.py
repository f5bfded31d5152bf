"""The pipeline-parallel table of a summary (`memory.pipeline` of `Summary.to_dict()`): per stage its
layers, parameters, model states, the micro-batches it keeps in flight and its activations; below, the
schedule's bubble and the point-to-point bytes between stages. Plain dicts in, no torch."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from depthwidth.present.units import count, integer, nbytes, percent


def pipeline_table(pipeline: dict[str, Any]) -> Table:
    p = pipeline
    schedule = "interleaved 1F1B" if p["virtual_stages"] > 1 else "1F1B"
    chunks = f", {p['virtual_stages']} chunks per stage" if p["virtual_stages"] > 1 else ""
    t = Table(title=f"Pipeline: {p['pp']} stages, {schedule}{chunks}, {integer(p['microbatches'])} micro-batches",
              title_justify="left", box=None, pad_edge=False)
    for col in ("stage", "layers", "params", "model states", "in flight", "layers kept", "activations saved",
                "total"):
        t.add_column(col, justify="left" if col == "in flight" else "right")
    shown = p["stages"] if len(p["stages"]) <= 8 else p["stages"][:4] + p["stages"][-2:]
    for s in shown:
        mark = " (peak)" if s["stage"] == p["peak_stage"] else ""
        if s is shown[-2] and len(shown) < len(p["stages"]):
            t.add_row("...", "", "", "", "", "", "", "")
        t.add_row(f"{s['stage']}{mark}", integer(s["layers"]), count(s["params"]), nbytes(s["model_states_bytes"]),
                  "+".join(str(n) for n in s["in_flight"]), integer(s["layers_kept"]),
                  nbytes(s["kept_activation_bytes"]), nbytes(s["total_bytes"]))
    t.caption = (f"bubble {percent(p['bubble_ratio'])} of the ideal step ((p-1)/(V*m)), {percent(p['bubble_fraction'])}"
                 f" of the step; first stage keeps {p['interleave_factor']:.3f} x n_layers of activations when full; "
                 f"stage-to-stage sends {nbytes(p['p2p']['total'])} per step ({nbytes(p['p2p']['message'])} each, "
                 f"busiest stage {nbytes(p['p2p']['busiest_stage'])})")
    t.caption_justify = "left"
    return t


__all__ = ["pipeline_table"]
