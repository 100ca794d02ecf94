"""The two meters of a Jetson's INA3221 rails (read from sysfs, or printed by tegrastats) refuse a module total
no module can draw by one rule, in one wording: ``rails.plausible_module_power``."""

from __future__ import annotations

import pytest
from jetpredict.profiler.power import Ina3221Meter, PowerReadError, TegrastatsMeter


@pytest.mark.parametrize("vdd_in_mw", [0, 60_000])  # Orin NX: 0.1..50 W
def test_tegrastats_and_ina3221_refuse_the_same_total_in_the_same_words(fake_root, tegrastats_samples, vdd_in_mw):
    line = next(s["line"] for s in tegrastats_samples if s["board"] == "orin-nx")
    fake_root.add_tegrastats([line.replace("VDD_IN 17946mW/15710mW", f"VDD_IN {vdd_in_mw}mW/15710mW")])
    with pytest.raises(LookupError) as skipped:  # every line skipped: no first reading, no meter
        TegrastatsMeter(interval_ms=20, board="orin-nx", first_line_timeout_s=1)
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, vdd_in_mw / 5), ("VDD_CPU_GPU_CV", 5000, 500),
                                              ("VDD_SOC", 5000, 300)])
    with pytest.raises(PowerReadError) as failed:
        Ina3221Meter.discover("orin-nx").read_power_w()
    why = str(failed.value).removeprefix("ina3221:VDD_IN: ")
    assert why.startswith(f"implausible module power {vdd_in_mw / 1e3:g} W (")
    assert str(skipped.value).endswith(why)
