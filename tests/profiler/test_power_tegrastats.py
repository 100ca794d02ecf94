"""tegrastats: the parser on one real-format line per JetPack family, and the meter on a fake tool."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest
from jetpredict.models.catalogue import MIN_MODULE_POWER_W, load_device
from jetpredict.profiler.power import PowerReadError, PowerSampler, TegrastatsMeter, parse_tegrastats_line
from jetpredict.profiler.power.rails import plausible_module_power, total_rule

from tools.testing import wait_until


def test_parser_reads_rails_clocks_and_timestamp_of_each_family(tegrastats_samples):
    families = {s["family"] for s in tegrastats_samples}
    assert {"jetpack4", "jetpack5", "jetpack6"} <= families
    for sample in tegrastats_samples:
        parsed = parse_tegrastats_line(sample["line"])
        want = sample["expected"]
        assert parsed["rails_mw"] == pytest.approx(want["rails_mw"]), sample["family"]
        assert parsed["cpu_mhz"] == want["cpu_mhz"]
        assert parsed["gpu_mhz"] == want["gpu_mhz"]
        assert parsed["emc_mhz"] == want["emc_mhz"]
        assert parsed["gpu_load_pct"] == want["gpu_load_pct"]
        assert parsed["ram_total_mb"] == want["ram_total_mb"]
        assert parsed["timestamp"] == want["timestamp"]
        assert "RAM" not in parsed["rails_mw"] and "SWAP" not in parsed["rails_mw"]
        total, _ = total_rule(parsed["rails_mw"], sample["board"])
        assert list(total) == want["total"]
        assert sum(parsed["rails_w"][r] for r in total) == pytest.approx(want["total_w"])


def test_parser_keeps_averages_and_temperatures():
    line = ("RAM 1446/3957MB (lfb 458x4MB) CPU [17%@1428,11%@1428] EMC_FREQ 2%@1600 GR3D_FREQ 0%@76 "
            "PLL@20.5C GPU@21C CV0@-256C POM_5V_IN 2830/1483 POM_5V_GPU 41/31")
    parsed = parse_tegrastats_line(line)
    assert parsed["rails_avg_mw"] == {"POM_5V_IN": 1483.0, "POM_5V_GPU": 31.0}
    assert parsed["temps_c"] == {"PLL": 20.5, "GPU": 21.0, "CV0": -256.0}
    assert parsed["cpu_load_pct"] == [17.0, 11.0]


#: How long a test waits for the fake tegrastats' readings (s): a bound for a hung tool, not a speed. A fixed
#: 0.3 s window once held only 5 readings on a loaded machine (the fake tool, a Python script, likely took much
#: of it to start; not measured).
READINGS_BOUND_S = 30.0


def _sample_until(sampler: PowerSampler, enough: Callable[[np.ndarray], bool]) -> None:
    """Wait until ``enough(power readings so far)`` holds; fails past :data:`READINGS_BOUND_S`."""
    wait_until(lambda: enough(sampler.snapshot().power_w.round(3)), READINGS_BOUND_S,
               f"the readings did not come within {READINGS_BOUND_S:g} s", poll_s=0.05)


def test_jetpack6_gpu_clock_is_the_fastest_gpc():
    """JetPack 6 prints one clock per GPC (``GR3D_FREQ 84%@[713,1300]``): the GPU's clock is the fastest."""
    line = ("05-15-2025 18:30:28 RAM 6982/7620MB CPU [97%@1984,95%@1984] GR3D_FREQ 84%@[713,1300] "
            "VDD_IN 17946mW/15710mW")
    parsed = parse_tegrastats_line(line)
    assert parsed["gpu_mhz"] == 1300.0 and parsed["gpu_load_pct"] == 84.0


def test_parser_rejects_non_tegrastats_text():
    with pytest.raises(ValueError):
        parse_tegrastats_line("Segmentation fault (core dumped)")


def test_meter_runs_the_tool_with_the_interval_and_reads_module_power(fake_root, tegrastats_samples):
    lines = [s["line"] for s in tegrastats_samples if s["board"] == "nano"]
    lines.append(lines[0].replace("POM_5V_IN 4531/3285", "POM_5V_IN 6000/3500"))
    fake_root.add_tegrastats(lines)
    meter = TegrastatsMeter(interval_ms=20)
    try:
        assert meter.name == "tegrastats:POM_5V_IN" and meter.domain == "module"
        assert meter.update_hz == 50.0  # one line every 20 ms
        with PowerSampler(meter, hz=50) as sampler:
            _sample_until(sampler, lambda power_w: {4.531, 6.0} <= set(power_w))  # both readings come
        assert set(sampler.trace.power_w.round(3)) <= {4.531, 6.0}  # and no other
    finally:
        meter.close()
    assert ["tegrastats", "--interval", "20"] in fake_root.calls()


def test_a_stray_line_does_not_void_the_readings(fake_root, tegrastats_samples):
    """A warning or a blank line between readings (and before the first) is skipped: the last reading
    stands until it is stale, so one odd line does not turn a mode's whole window into failed reads."""
    good = [s["line"] for s in tegrastats_samples if s["board"] == "nano"][0]
    fake_root.add_tegrastats(["tegrastats: warning: something odd", good, "", good,
                              "tegrastats: warning: something odd"])
    meter = TegrastatsMeter(interval_ms=20)
    try:
        with PowerSampler(meter, hz=50) as sampler:
            _sample_until(sampler, lambda power_w: len(power_w) > 5)
        assert set(sampler.trace.power_w.round(3)) == {4.531}
    finally:
        meter.close()


def _assert_only_the_good_reading_sampled(skipped: str) -> None:
    """A Nano's tegrastats (the fake root's lines) sampled at 50 Hz: only its good 4.531 W reading is kept, and
    the meter names why it skipped the others (``skipped``)."""
    meter = TegrastatsMeter(interval_ms=20, board="nano")
    try:
        with PowerSampler(meter, hz=50) as sampler:
            _sample_until(sampler, lambda power_w: len(power_w) > 5)
        assert set(sampler.trace.power_w.round(3)) == {4.531}
        assert skipped in meter._error
    finally:
        meter.close()


def test_a_reading_no_module_can_draw_is_skipped_like_a_stray_line(fake_root, tegrastats_samples):
    """A garbled total (1e17 W) would otherwise become the mode's mean power; on a known board the bound
    is its own range (a Nano reads at most 20 W), on an unknown one the widest module's."""
    good = [s["line"] for s in tegrastats_samples if s["board"] == "nano"][0]
    garbled = good.replace("POM_5V_IN 4531/3285", "POM_5V_IN 100000000000000000000/3285")
    too_much_for_a_nano = good.replace("POM_5V_IN 4531/3285", "POM_5V_IN 25000/3285")
    fake_root.add_tegrastats([good, garbled, good, too_much_for_a_nano])
    _assert_only_the_good_reading_sampled("implausible module power")
    assert (plausible_module_power("nano").lo_w, plausible_module_power("nano").hi_w) == load_device("nano").power_range_w == (MIN_MODULE_POWER_W, 20.0)
    assert plausible_module_power(None) == plausible_module_power("host")
    assert plausible_module_power(None).hi_w >= 120.0


def test_a_reading_below_what_any_module_draws_is_skipped_too(fake_root, tegrastats_samples):
    """A 0 mW total (a rail the monitor does not see, a garbled line) made the window's energy 0 J, which no
    profile row may hold: the measured mode was refused and its timings lost. It is skipped like a reading
    above the range; a tool that prints only such lines gives no meter, and one that turns to them goes stale,
    each naming why, so the row's energy is null with that reason and the timings are kept."""
    good = [s["line"] for s in tegrastats_samples if s["board"] == "nano"][0]
    zero = good.replace("POM_5V_IN 4531/3285", "POM_5V_IN 0/3285")
    fake_root.add_tegrastats([good, zero, zero, good, zero])
    _assert_only_the_good_reading_sampled("implausible module power 0 W (below")
    fake_root.add_tegrastats([zero])
    with pytest.raises(LookupError, match="implausible module power 0 W"):
        TegrastatsMeter(interval_ms=20, board="nano", first_line_timeout_s=1)
    fake_root.add_tegrastats([good] + [zero] * 500)  # 10 s of zeros after the first line
    meter = TegrastatsMeter(interval_ms=20, board="nano")
    try:
        time.sleep(0.8)  # past the 0.5 s after which the last good reading is stale
        with pytest.raises(PowerReadError, match="implausible module power 0 W"):
            meter.read_power_w()
    finally:
        meter.close()


def test_meter_reports_a_stopped_tool_as_a_read_error(fake_root, tegrastats_samples):
    fake_root.add_tegrastats([tegrastats_samples[3]["line"]])
    meter = TegrastatsMeter(interval_ms=20)
    assert meter.name == "tegrastats:VDD_IN"
    assert meter.read_power_w() == pytest.approx(17.946)
    meter._proc.terminate()
    meter._proc.wait()
    time.sleep(0.6)
    with pytest.raises(PowerReadError, match="exited"):
        meter.read_power_w()
    meter.close()


def test_missing_tool_or_unusable_output_is_a_lookup_error(fake_root, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_root.bin))
    with pytest.raises(LookupError, match="not found"):
        TegrastatsMeter()
    fake_root.add_tegrastats(["RAM 1/2MB CPU [1%@100] VDD_FOO 1/1"])
    with pytest.raises(LookupError, match="tegrastats"):
        TegrastatsMeter(interval_ms=20, first_line_timeout_s=2)
