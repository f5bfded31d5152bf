"""Before a study runs: the checks the trainer makes of a run's shape and settings alone, made on every
distinct training run of an expansion, so that a spec `study validate` accepts is one whose runs train.

`train()` refuses, before it writes anything, a layout its processes cannot take (`train.distributed.
check_parallel`: the micro-batch over the data-parallel ranks, the tensor-parallel degree against the heads
and the MLP), horizons over several processes (`train.horizons.check_horizons`) and a parametrization the
shape cannot take (`artifact.model.run_multipliers`). Each is called here on the `TrainConfig` a worker
builds (`run_config.train_config_of` with the spec's execution fields, `StudySpec.execution_settings`), and
a refusal is a `SpecError` naming the spec key that sets what was refused. What the trainer checks of the
machine (the device, its dtype, memory and cores) or of the folder is checked where the run executes; the
data was checked when the expansion read it (`expand.read_data`).

A one-process run has no layout to check and "sp" no factor to refuse, so those checks (whose modules
import torch) are made only where they can refuse: `study validate` of a plain spec stays quick.
"""

from __future__ import annotations

from depthwidth.errors import UserError
from depthwidth.study.schema import SpecError


def _parallel(shape, config) -> None:
    """What `check_parallel` and `check_horizons` refuse (they pass any one-process run)."""
    if config.nproc == 1:
        return
    from depthwidth.train.horizons import check_horizons  # without torch

    try:
        check_horizons(config)
    except UserError as exc:
        raise _Refused(f"{exc} (nproc is execution.nproc_per_run)", key="execution.nproc_per_run") from None
    from depthwidth.train.distributed import check_parallel

    try:
        check_parallel(config, shape)
    except UserError as exc:
        key = "execution.tp" if str(exc).startswith("tp=") else "execution.nproc_per_run"
        raise _Refused(str(exc), key=key) from None


def _parametrization(shape, config, *, key: str) -> None:
    """What `run_multipliers` refuses (it takes "sp" for every shape)."""
    if config.parametrization == "sp":
        return
    from depthwidth.artifact.model import run_multipliers

    try:
        run_multipliers(shape, config)
    except UserError as exc:
        raise _Refused(str(exc), key=key) from None


class _Refused(Exception):
    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.message, self.key = message, key


def check_runs(expansion) -> None:
    """Refuse, as one `SpecError` naming the spec's file, line and key, the first training run of
    `expansion` that `train()` would refuse for its shape and settings (module docstring)."""
    from depthwidth.study.run_config import train_config_of

    spec = expansion.spec
    execution = spec.execution_settings()
    groups = {g.label: g for g in expansion.groups}
    seen: set[str] = set()
    for run in expansion.train_runs:
        config = train_config_of(run.config, **execution)
        ident = f"{run.shape.to_dict()}|{config.to_dict()}"
        if ident in seen:
            continue
        seen.add(ident)
        try:
            _parallel(run.shape, config)
            _parametrization(run.shape, config, key=_parametrization_key(spec, groups.get(run.group)))
        except _Refused as exc:
            raise SpecError(f"the run {run.label()} would be refused by the trainer: {exc.message}",
                            key=exc.key).located(source=spec.source, text=spec.text) from None


def _parametrization_key(spec, group) -> str:
    """Where the run's parametrization is set: its budget's own key, else [train]."""
    if group is not None and "parametrization" in group.overrides:
        for i, budget in enumerate(spec.budgets):
            if budget.parametrization == group.overrides["parametrization"]:
                return f"budget[{i}].parametrization"
    return "train.parametrization"


def check_dtypes(expansion) -> None:
    """Refuse, before the folder is touched, a dtype this machine's CPU only emulates (the runs and the
    benchmarks on the CPU), unless [train] allow_slow_dtype = true (`machine.check_dtype`)."""
    from depthwidth.machine import capabilities, check_dtype

    allowed = bool(expansion.spec.execution_settings().get("allow_slow_dtype"))
    cpu = capabilities("cpu")
    wanted = {("[train] dtype", r.config["train"]["dtype"], r.config["train"].get("device", "auto"))
              for r in expansion.runs if r.kind == "train"}
    wanted |= {("[bench] dtype", r.config["bench"]["dtype"], "cpu") for r in expansion.runs if r.kind == "bench"}
    for name, dtype, device in sorted(wanted):
        if allowed or device not in ("cpu", "auto") or cpu.is_native(dtype):
            continue  # a GPU run's dtype is checked by the trainer on its device
        if device == "auto":
            import torch

            if torch.cuda.is_available():
                continue
        check_dtype(dtype, field=name, allow="[train] allow_slow_dtype = true")


__all__ = ["check_dtypes", "check_runs"]
