"""Suite-wide settings: tiny models run fastest on one thread (two threads on a busy two-core machine
cost far more in synchronisation than they gain), and every test gets its own cache folder."""

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path_factory.getbasetemp() / "depthwidth-cache"))
