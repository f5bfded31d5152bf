"""Command lines the explorer runs and shows: `calc` of one family member, `recommend` of a study under
the page's limits, and each as text a user can paste into a terminal.

A member's `calc` command line is read off its own `plan --json` record: every field of `shape` as a
shape flag (with `--preset LIKE` as the base when the family took its conventions from a preset, so the
fields no flag sets, such as norm_eps, are the preset's), every field of `settings` (the workload its
summary was computed for) as a workload flag, then the page's --dp and --zero. So the detail of a member
is exactly what `depthwidth calc` prints for it, and with dp 1 and ZeRO 0 it equals the member's own
record less the keys only `plan` adds (latency, lint, plan).
"""

from __future__ import annotations

import shlex
from typing import Any

from depthwidth.explore.fields import argv_of

#: Shape field -> calc flag (a bool field: (flag when true, flag when false))
SHAPE_FLAGS = {
    "n_layers": "--layers", "d_model": "--width", "n_heads": "--heads", "n_kv_heads": "--kv-heads",
    "head_dim": "--head-dim", "d_ff": "--d-ff", "vocab_size": "--vocab", "ffn": "--ffn", "norm": "--norm",
    "bias": "--bias", "pos": "--pos", "max_seq_len": "--max-seq-len", "rope_theta": "--rope-theta", "kind": "--kind",
    "parallel_residual": ("--parallel-residual", "--no-parallel-residual"),
    "final_norm": ("--final-norm", "--no-final-norm"),
    "tie_embeddings": ("--tied", "--untied"),
    "lm_head": ("--lm-head", "--no-lm-head"),
}
#: Summary settings field -> calc flag (bools: given when true)
SETTINGS_FLAGS = {
    "seq_len": "--seq-len", "micro_batch": "--batch", "attention": "--attention", "recompute": "--recompute",
    "train_precision": "--train-precision", "param_dtype": "--param-dtype", "optimizer": "--optimizer",
    "zero_stage": "--zero", "dp": "--dp", "tp": "--tp", "sp": "--sp", "pp": "--pp",
    "virtual_stages": "--virtual-stages", "microbatches": "--microbatches", "convention": "--convention",
    "residual_dtype": "--residual-dtype", "grad_dtype": "--grad-dtype", "attn_impl": "--attn-impl",
    "dropout": "--dropout", "device": "--device", "kv_dtype": "--kv-dtype",
}
#: Shape fields that no calc flag sets (they come from the base: a preset, or Shape's defaults)
FROM_BASE = ("norm_eps",)


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def calc_argv(member: dict[str, Any], *, like: str | None, values: dict[str, str]) -> list[str]:
    """The calc flags of one `plan --json` member (module docstring); `values` adds the page's --dp/--zero."""
    argv = ["--preset", like] if like else []
    for key, flag in SHAPE_FLAGS.items():
        value = member["shape"][key]
        if isinstance(flag, tuple):
            argv.append(flag[0] if value else flag[1])
        else:
            argv.append(f"{flag}={_value(value)}")
    argv.append("--post-norm" if member["shape"]["norm_position"] == "post" else "--no-post-norm")
    page = argv_of(values, "calc")
    given = {a.split("=", 1)[0] for a in page}
    for key, flag in SETTINGS_FLAGS.items():
        value = member["settings"][key]
        if flag in given or value is None:
            continue
        if isinstance(value, bool):
            argv += [flag] if value else []
        else:
            argv.append(f"{flag}={_value(value)}")
    return argv + page


def recommend_argv(folder: str, *, values: dict[str, str], hardware: str | None, dtype: str | None) -> list[str]:
    """`recommend` under the page's limits: decode latency and training memory per device."""
    argv = [folder]
    if hardware:
        argv.append(f"--hardware={hardware}")
    if values.get("max_decode_ms"):
        argv.append(f"--max-decode-ms={values['max_decode_ms']}")
    if values.get("max_memory_gb"):
        argv.append(f"--max-memory-gb={values['max_memory_gb']}")
    argv.append("--memory=training")
    if dtype:
        argv.append(f"--dtype={dtype}")
    return argv


def prescribe_argv(base: list[str], *, values: dict[str, str]) -> list[str]:
    """`recommend --target-params` at the page's parameter budget, on the page's grid (align, head_dim, tp,
    min layers, d/L range, tolerance, seq len) with its bootstrap and splits; `base` is `recommend_argv`."""
    argv = list(base) + [f"--target-params={values['params']}"]
    if values.get("non_embedding", "").lower() in ("1", "true", "on", "yes"):
        argv.append("--non-embedding")
    for name in ("seq_len", "align", "head_dim", "tp", "min_layers", "aspect_range", "tolerance", "bootstrap",
                 "splits"):
        if values.get(name):
            argv.append(f"--{name.replace('_', '-')}={values[name]}")
    return argv


def command_line(command: str, argv: list[str]) -> str:
    """`depthwidth COMMAND ARGV --json` as a user types it: `--flag value`, quoted for a POSIX shell."""
    words = ["depthwidth", command]
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if arg.startswith("--") and eq and not value.startswith("-"):
            words += [flag, shlex.quote(value)]
        else:
            words.append(shlex.quote(arg))
    return " ".join(words + ["--json"])


__all__ = ["FROM_BASE", "SETTINGS_FLAGS", "SHAPE_FLAGS", "calc_argv", "command_line", "prescribe_argv",
           "recommend_argv"]
