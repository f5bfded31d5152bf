"""The fair, reproducible, resumable trainer: `train(shape, TrainConfig(...)) -> TrainResult`."""

from depthwidth.train.config import SCHEDULES, TrainConfig, lr_at
from depthwidth.train.evaluate import EvalOutcome, evaluate, position_buckets
from depthwidth.train.loop import make_optimizer, param_groups, resolve_device, train
from depthwidth.train.measure import PeakFlops, SavedTensorMeter, measure_gemm_flops, peak_flops
from depthwidth.train.result import STATUSES, TrainProgress, TrainResult

__all__ = [
    "EvalOutcome",
    "PeakFlops",
    "SCHEDULES",
    "STATUSES",
    "SavedTensorMeter",
    "TrainConfig",
    "TrainProgress",
    "TrainResult",
    "evaluate",
    "lr_at",
    "make_optimizer",
    "measure_gemm_flops",
    "param_groups",
    "peak_flops",
    "position_buckets",
    "resolve_device",
    "train",
]
