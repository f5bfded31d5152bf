"""Typed records of what a run folder stores besides tensors: one point of the training curve, one
intermediate evaluation, and the bookkeeping `meta` of a checkpoint. The trainer writes their dicts
(`to_dict`), so the JSON inside checkpoint.pt and result.json keeps the keys it always had; readers
rebuild them with `from_dict`, which refuses a malformed record in one line naming its source.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from depthwidth.errors import UserError


@dataclass(frozen=True, kw_only=True, slots=True)
class CurvePoint:
    """One optimizer step: loss and gradient norm before clipping, the step's learning rate, its wall and
    process CPU seconds (a step's share of the group it was timed in) and tokens per second; `warmup` marks
    the first steps of a process, timed one by one and left out of the run's tokens/s."""

    step: int
    loss: float
    lr: float
    grad_norm: float
    seconds: float
    cpu_seconds: float
    tokens_per_s: float
    warmup: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = {"step": self.step, "loss": self.loss, "lr": self.lr, "grad_norm": self.grad_norm,
               "seconds": self.seconds, "cpu_seconds": self.cpu_seconds, "tokens_per_s": self.tokens_per_s}
        return out | ({"warmup": True} if self.warmup else {})

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "curve point") -> CurvePoint:
        return _typed(cls, data, source=source)


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalPoint:
    """Validation loss after `step` optimizer steps (`tokens` trained), overall and by slice."""

    step: int
    tokens: int
    val_loss: float
    val_loss_by_slice: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "tokens": self.tokens, "val_loss": self.val_loss,
                "val_loss_by_slice": dict(self.val_loss_by_slice)}

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "evaluation") -> EvalPoint:
        return _typed(cls, data, source=source)


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckpointMeta:
    """What a checkpoint records besides its tensors: the step it was taken after, the curve and evaluations
    so far, the seconds spent, the measured memory, what the run is (`shape` and `config` as their dicts,
    the dataset hash, the content hash of an init_from folder), where it resumed (`resumes`) and, for a
    multi-process run, the DCP folder the states are in (`dcp`, with its tensor-parallel degree `dcp_tp`), and
    for the last checkpoint of a run its final measurements (`final`)."""

    step: int
    curve: list[dict[str, Any]] = field(default_factory=list)  # CurvePoint dicts
    evals: list[dict[str, Any]] = field(default_factory=list)  # EvalPoint dicts
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    saved_activation_bytes: int | None = None
    state_bytes: int | None = None
    config: dict[str, Any] | None = None  # TrainConfig.to_dict()
    shape: dict[str, Any] | None = None  # Shape.to_dict()
    dataset_hash: str | None = None
    init_sha256: str | None = None
    resumes: list[str] = field(default_factory=list)
    dcp: str | None = None
    dcp_tp: int | None = None
    #: the last checkpoint of a run: what its final evaluation and probes measured (`train.run_result.final_record`),
    #: so a run resumed there finishes without evaluating again
    final: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("dcp", "dcp_tp", "final"):  # written only by multi-process runs / the last checkpoint
            if out[name] is None:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "checkpoint meta") -> CheckpointMeta:
        """The meta of a checkpoint; keys it does not know are ignored (a later version may add some), keys of
        the wrong type are one UserError naming `source`."""
        if not isinstance(data, dict):
            raise UserError(f"{source}: its meta is {type(data).__name__}, expected a JSON object")
        known = {f.name for f in fields(cls)}
        return _typed(cls, {k: v for k, v in data.items() if k in known}, source=source)


_CHECKS = {"int": lambda v: isinstance(v, int) and not isinstance(v, bool),
           "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
           "bool": lambda v: isinstance(v, bool), "str": lambda v: isinstance(v, str),
           "list": lambda v: isinstance(v, list), "dict": lambda v: isinstance(v, dict)}


def _kinds(annotation: str) -> tuple[str, ...]:
    """('int',) for 'int', ('dict', 'None') for 'dict[str, Any] | None'."""
    return tuple(part.strip().split("[")[0] for part in annotation.split("|"))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _typed(cls, data: Any, *, source: str):
    if not isinstance(data, dict):
        raise UserError(f"{source}: {type(data).__name__}, expected a JSON object")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise UserError(f"{source}: unknown key(s) {', '.join(map(str, unknown[:5]))}; expected some of "
                        f"{', '.join(known)}")
    for name, value in data.items():
        kinds = _kinds(str(known[name].type))
        if value is None and "None" in kinds:
            continue
        if not any(_CHECKS[k](value) for k in kinds if k in _CHECKS):
            raise UserError(f"{source}: {name}={_short(value)} is {type(value).__name__}, expected "
                            f"{' or '.join(kinds)}")
    try:
        return cls(**data)
    except TypeError as exc:  # a required key missing
        raise UserError(f"{source}: {str(exc).split('() ')[-1]}") from None


__all__ = ["CheckpointMeta", "CurvePoint", "EvalPoint"]
