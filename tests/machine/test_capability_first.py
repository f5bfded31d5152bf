"""Capabilities before measurements: on a CPU faked to lack native bf16 the profile only probes bf16
(n=128, recorded as emulated, never timed at n=2048), and training, benchmarking or a study in bf16 is
refused with one line saying how much slower it is and which dtype to use, unless allowed."""

import re
import time

import pytest

import depthwidth.machine.device as device_mod
from depthwidth.errors import UserError
from depthwidth.machine import (
    CpuInfo,
    HardwareProfile,
    capabilities,
    check_dtype,
    cpu_capabilities,
    measure_profile,
    probe_gemm,
    slow_dtype_line,
)
from depthwidth.machine.measure import EMULATED_SLOWDOWN, PROBE_N, fitted_n, measure_dtypes

EPYC = "AMD EPYC 7B13"  # an AVX2 part without AVX512-BF16 or AMX


@pytest.fixture
def no_bf16(monkeypatch):
    """Every capability lookup sees an AVX2-only CPU (the probe itself times this machine's torch)."""
    plain = cpu_capabilities(CpuInfo(model_name=EPYC, flags=frozenset({"avx", "avx2", "fma"})))
    monkeypatch.setattr(device_mod, "cpu_capabilities", lambda info=None: plain)
    return plain


@pytest.fixture
def slow_bf16(no_bf16, monkeypatch):
    """... and its bf16 probe runs at the 0.32 GFLOP/s measured on such a CPU (fp32 is timed for real)."""
    from depthwidth.machine import measure

    real = measure.probe_gemm

    def probe(*, dtype, device="cpu", n=PROBE_N):
        if dtype != "bf16":
            return real(dtype=dtype, device=device, n=n)
        return measure.GemmResult(dtype=dtype, path="torch.mm", n=n, seconds=2 * n**3 / 0.32e9, flops_per_s=0.32e9)

    monkeypatch.setattr(measure, "probe_gemm", probe)
    return no_bf16


LINE = (r"dtype='bf16' is emulated here \(AMD EPYC 7B13 has no avx512_bf16 or amx_bf16\): a GEMM runs \d+x slower "
        r"than in fp32 \(\d+\.\d\d vs \d+\.\d GFLOP/s, n=128 probe\); use dtype='fp32', or set "
        r"allow_slow_dtype=true \(--allow-slow-dtype\) to run it anyway$")
PREFIXED = r"^depthwidth (train|bench): error: " + LINE


def test_the_fake_cpu_has_fp32_only(no_bf16):
    caps = capabilities("cpu")
    assert caps.name == EPYC and caps.native == {"fp32"} and caps.dtypes == ("fp32",)
    assert caps.describe() == f"{EPYC} (cpu: avx2); native: fp32"


def test_an_emulated_dtype_is_probed_and_recorded_never_timed_large(no_bf16):
    start = time.perf_counter()
    profile = measure_profile(quick=True, threads=1, device="cpu", dtypes=("fp32", "bf16"))
    assert time.perf_counter() - start < 30
    bf16 = [g for g in profile.gemm if g.dtype == "bf16"]
    assert bf16 and all(g.n == PROBE_N for g in bf16)  # the probe only
    assert set(profile.emulated) == {"bf16"} and profile.emulated["bf16"] > 0
    assert profile.peak_flops["bf16"] == max(g.flops_per_s for g in bf16)
    assert all(g.n == 512 for g in profile.gemm if g.dtype == "fp32")  # the native dtype at its quick size
    again = HardwareProfile.from_dict(profile.to_dict())
    assert again == profile and again.emulated == {"bf16": profile.emulated["bf16"]}
    # the default asks only for what is native: bf16 is not even probed
    assert set(measure_profile(quick=True, threads=1, device="cpu").peak_flops) == {"fp32"}


def test_a_native_dtype_that_probes_slow_counts_as_emulated(monkeypatch):
    from depthwidth.machine import measure

    rates = {"fp32": 50e9, "bf16": 50e9 / (EMULATED_SLOWDOWN * 2)}
    monkeypatch.setattr(measure, "probe_gemm", lambda *, dtype, device="cpu", n=PROBE_N: measure.GemmResult(
        dtype=dtype, path="torch.mm", n=n, seconds=2 * n**3 / rates[dtype], flops_per_s=rates[dtype]))
    caps = device_mod.DeviceCapabilities(device="cpu", name="x", bf16_native=True)
    rows, emulated = measure_dtypes(("bf16",), device="cpu", quick=True, repeat=1, caps=caps)
    assert emulated == {"bf16": pytest.approx(EMULATED_SLOWDOWN * 2)} and [r.n for r in rows] == [PROBE_N]


def test_the_size_is_halved_until_the_calls_fit_the_cap():
    assert fitted_n(2048, flops_per_s=1e12, calls=6, seconds=3.0) == 2048  # 6 x 17 GFLOP in 0.1 s
    assert fitted_n(2048, flops_per_s=1e9, calls=6, seconds=3.0) == 512  # 6 x 0.27 GFLOP = 1.6 s
    assert fitted_n(2048, flops_per_s=1e6, calls=6, seconds=3.0) == PROBE_N  # never below the probe


def test_the_refusal_is_one_line_with_the_slowdown_and_the_fix(slow_bf16):
    line = slow_dtype_line("bf16")
    assert line is not None and "\n" not in line
    assert re.match("^" + LINE, line), line
    times = float(re.search(r"runs (\d+)x slower", line).group(1))
    assert times >= 50 and "(0.32 vs " in line  # this machine's fp32 probe against 0.32 GFLOP/s
    with pytest.raises(UserError, match=LINE):
        check_dtype("bf16")
    check_dtype("bf16", allowed=True)  # asked for explicitly: no refusal
    assert slow_dtype_line("fp32") is None


def test_flags_that_miss_a_fast_bf16_do_not_refuse_it(no_bf16):
    # the fake says emulated, but this machine's real probe runs bf16 about as fast as fp32
    start = time.perf_counter()
    fast = probe_gemm(dtype="bf16").flops_per_s >= probe_gemm(dtype="fp32").flops_per_s / EMULATED_SLOWDOWN
    assert time.perf_counter() - start < 5  # probes, not a measurement
    assert (slow_dtype_line("bf16") is None) == fast


def test_training_in_bf16_is_refused_in_one_line(slow_bf16, cli_error, tmp_path):
    from pydoc_data.topics import topics

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(topics[k] for k in sorted(topics))[:20_000])
    base = ["train", "--layers", "1", "--width", "16", "--heads", "2", "--corpus", str(corpus), "--seq-len", "16",
            "--batch-size", "2", "--steps", "2", "--eval-every", "0", "--dtype", "bf16", "--device", "cpu"]
    assert re.match(PREFIXED, cli_error(base))


def test_benchmarking_in_bf16_is_refused_in_one_line(slow_bf16, cli_error):
    line = cli_error(["bench", "--layers", "1", "--width", "16", "--heads", "2", "--dtype", "bf16",
                      "--prompt-lens", "4", "--contexts", "4", "--no-throughput", "--hardware", "cpu"])
    assert re.match(PREFIXED, line)
