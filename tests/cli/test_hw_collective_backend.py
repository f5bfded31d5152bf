"""`depthwidth hw measure --collectives` times nccl for every CUDA device setting (cuda, cuda:N, and auto
or no --device when CUDA is available) and gloo on the CPU; the flag parses cuda:N as `train` does."""

import pytest

from depthwidth.cli import build_parser
from depthwidth.cli.hw import collective_backend


@pytest.mark.parametrize(("device", "cuda_available", "backend"), [
    ("cuda", True, "nccl"),
    ("cuda:0", True, "nccl"),
    ("cuda:3", True, "nccl"),
    ("cuda:1", False, "nccl"),  # asked for explicitly: the measurement itself then says CUDA is missing
    ("auto", True, "nccl"),
    (None, True, "nccl"),
    ("auto", False, "gloo"),
    (None, False, "gloo"),
    ("cpu", True, "gloo"),
    ("cpu", False, "gloo"),
])
def test_backend_follows_the_device(device, cuda_available, backend):
    assert collective_backend(device, cuda_available=cuda_available) == backend


def test_cuda_index_reaches_the_backend_choice():
    args = build_parser().parse_args(["hw", "measure", "--collectives", "--device", "cuda:2"])
    assert args.device == "cuda:2" and args.collectives
    assert collective_backend(args.device, cuda_available=False) == "nccl"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["hw", "measure", "--collectives", "--device", "cuda:x"])
