"""The one units formatter, on numbers users know: GPT-2 small's parameter count, an H100's bandwidth,
a 7B model's training compute, the latencies `plan` prints."""

import pytest

from depthwidth.present import units
from depthwidth.shapes.flops import flops
from depthwidth.shapes.hardware import get_hardware
from depthwidth.shapes.memory import memory
from depthwidth.shapes.params import count_params
from depthwidth.shapes.presets import get_preset


def test_counts_have_four_significant_digits_and_the_exact_value_on_request():
    gpt2 = count_params(get_preset("gpt2-small").shape)
    assert units.count(gpt2.total) == "124.4M"
    assert units.count(gpt2.total, exact=True) == "124.4M (124,439,808)"
    assert units.count(gpt2.non_embedding) == "85.06M"
    assert units.count(count_params(get_preset("llama-3-8b").shape).total) == "8.03B"
    assert units.count(786_432) == "786.4K" and units.count(15e12) == "15T"
    assert units.count(999) == "999" and units.count(999, exact=True) == "999" and units.count(0) == "0"


def test_a_prefix_is_chosen_after_rounding():
    assert units.count(999_999) == "1M"
    assert units.nbytes(1023.9) == "1 KiB" and units.nbytes(1000) == "1,000 B"
    assert units.number(999.6) == "1,000" and units.number(999.4) == "999"


def test_bytes_are_binary_with_three_significant_digits():
    m = memory(get_preset("gpt2-small").shape, seq_len=1024, train_precision="bf16-mixed")
    assert units.nbytes(m.kv_cache_bytes_per_token) == "36 KiB"  # 2 * 12 layers * 768 * 2 bytes
    assert units.nbytes(m.model_states_bytes) == "1.85 GiB"  # 1,991,036,928 B
    assert units.nbytes(28_377_088) == "27.1 MiB"
    assert units.nbytes(512) == "512 B" and units.nbytes(0) == "0 B"
    assert units.nbytes(80 * 2**30) == "80 GiB" and units.nbytes(1.5 * 2**40) == "1.5 TiB"


def test_flops_and_flop_rates_use_decimal_prefixes():
    f = flops(get_preset("gpt2-small").shape, seq_len=1024)
    assert units.flops(f.forward_per_token) == "266 MFLOP" and units.flops(f.train_per_token) == "798 MFLOP"
    assert units.flops(1e19) == "10 EFLOP"
    assert units.flops(6 * 7e9 * 2e12) == "84 ZFLOP"  # 6 N D for a 7B model on 2T tokens
    h100 = get_hardware("h100")
    assert units.flops_per_s(h100.peak_flops["bf16"]) == "989 TFLOP/s"
    assert units.bandwidth(h100.mem_bandwidth) == "3.35 TB/s"


def test_durations_from_nanoseconds_to_hours():
    assert units.duration(0.00218) == "2.18 ms"
    assert units.duration(3.21e-5) == "32.1 us" and units.duration(5e-10) == "0.5 ns"
    assert units.duration(12.34) == "12.3 s" and units.duration(0) == "0 s"
    assert units.duration(3725) == "1:02:05" and units.clock(5) == "0:00:05"


def test_bare_numbers_percentages_ratios_and_missing_values():
    assert units.number(2.1837) == "2.18" and units.number(51_234.5) == "51,234" and units.number(0.5) == "0.5"
    assert units.percent(0.4132) == "41.3%" and units.percent(0.0015, digits=2, sign=True) == "+0.15%"
    assert units.ratio(1.8) == "1.80x" and units.integer(124_439_808) == "124,439,808" and units.integer(2.6) == "3"
    assert units.or_dash(None) == "-" and units.or_dash(3.14159, ".4f") == "3.1416"
    assert units.or_dash(2**30, units.nbytes) == "1 GiB"


@pytest.mark.parametrize("value", [1.0, 12.5, 1e3, 3.3e6, 7e9, 1.2e12])
def test_every_quantity_parses_back_to_three_significant_digits(value):
    text = units.flops(value)
    digits, prefix = text.split()
    scale = {"FLOP": 1, "KFLOP": 1e3, "MFLOP": 1e6, "GFLOP": 1e9, "TFLOP": 1e12}[prefix]
    assert float(digits.replace(",", "")) * scale == pytest.approx(value, rel=5e-3)
