"""The device a run trains on: cpu, auto, cuda and cuda:N, with the GPUs torch sees faked (CPU only)."""

import pytest
import torch

from depthwidth.artifact.config import TrainConfig
from depthwidth.train.setup import resolve_device


@pytest.fixture
def gpus(monkeypatch):
    def fake(count: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    return fake


@pytest.mark.parametrize("device,count,want", [
    ("cpu", 2, torch.device("cpu")), ("auto", 0, torch.device("cpu")), ("auto", 2, torch.device("cuda", 0)),
    ("cuda", 1, torch.device("cuda", 0)), ("cuda:1", 2, torch.device("cuda", 1)), ("cuda:7", 8, torch.device("cuda", 7)),
])
def test_each_device_setting_resolves(gpus, device, count, want):
    gpus(count)
    assert resolve_device(TrainConfig(device=device, steps=1)) == want


@pytest.mark.parametrize("device,count,message", [
    ("cuda:2", 2, "device='cuda:2': there is no GPU 2; torch sees 2 (cuda:0 to cuda:1)"),
    ("cuda:1", 1, "device='cuda:1': there is no GPU 1; torch sees 1 (cuda:0)"),
    ("cuda", 0, "device='cuda' but torch sees no CUDA device; use device='cpu' or 'auto'"),
    ("cuda:3", 0, "device='cuda:3' but torch sees no CUDA device; use device='cpu' or 'auto'"),
])
def test_a_gpu_that_is_not_there_is_one_line(gpus, device, count, message):
    gpus(count)
    with pytest.raises(ValueError) as info:
        resolve_device(TrainConfig(device=device, steps=1))
    assert str(info.value) == message
