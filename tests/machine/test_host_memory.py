"""`keep_freed_memory`: after it, a loop that allocates, touches and frees the same large buffer does not fault
its pages in again (glibc); with DEPTHWIDTH_MALLOC=default nothing changes. Each case runs in its own process,
since the setting is process-wide and cannot be undone."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

CHILD = r"""
import resource, sys
import torch
from depthwidth.machine.host_memory import keep_freed_memory
said = keep_freed_memory() if sys.argv[1] == "keep" else "untouched"
torch.set_num_threads(1)  # one thread, one malloc arena: the same heap every time
MIB = 256 * 1024  # float32 elements


def step():  # 30 live 1 MiB buffers (activations), then all freed
    live = [torch.empty(MIB).fill_(1.0) for _ in range(30)]
    del live


for _ in range(5):  # warm-up: the first passes always map and fault
    step()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 20)
print(said)
"""

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is glibc's")


def _faults(mode: str, env: dict | None = None) -> tuple[float, str]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})}).stdout.splitlines()
    return float(out[0]), out[1]


# The default's faults depend on what else lies at the top of the heap (measured: every page faulted again in
# about 5 of 6 processes, none in the others), so the default side is judged on the most of four processes.
@glibc
def test_kept_memory_is_not_faulted_in_again():
    pages = 30 * 1024 * 1024 // 4096  # what the 30 MiB of one step fault if all mapped afresh
    for _ in range(2):
        kept, said = _faults("keep")
        assert said == "glibc: freed blocks up to 32 MiB kept, no trimming"
        assert kept < 0.01 * pages  # measured: 0 faults per step
    assert max(_faults("plain")[0] for _ in range(4)) > 0.5 * pages  # measured: 7,649 of 7,680 pages


@glibc
def test_the_environment_leaves_the_allocator_alone():
    faults = []
    for _ in range(4):
        n, said = _faults("keep", {"DEPTHWIDTH_MALLOC": "default"})
        assert said == "the C library's defaults (DEPTHWIDTH_MALLOC=default)"
        faults.append(n)
    assert max(faults) > 0.5 * 30 * 1024 * 1024 // 4096
