"""INA3221 readers against fake sysfs trees in both kernel layouts, with each board's total rule."""

from __future__ import annotations

import time

import numpy as np
import pytest
from fakes import VDD_IN_CURR
from jetpredict.models.catalogue import MIN_MODULE_POWER_W, load_device
from jetpredict.profiler.metering import window_null_reason
from jetpredict.profiler.power import Ina3221Meter, PowerReadError, PowerSampler
from jetpredict.profiler.power.rails import BOARDS, match_board, plausible_module_power, total_rule

from tools.testing import wait_until


def test_hwmon_orin_nx_total_is_vdd_in(fake_root):
    # JetPack 5/6: power = mV x mA; labels are found whatever the hwmon index is.
    fake_root.add_ina3221_hwmon("1-0040", 7, [("VDD_IN", 5000, 3000), ("VDD_CPU_GPU_CV", 5000, 1200),
                                              ("VDD_SOC", 5000, 600)])
    meter = Ina3221Meter.discover()
    assert meter.name == "ina3221:VDD_IN" and meter.layout == "hwmon" and meter.domain == "module"
    assert meter.read_power_w() == pytest.approx(15.0)
    assert meter.read_rails_w() == pytest.approx({"VDD_IN": 15.0, "VDD_CPU_GPU_CV": 6.0, "VDD_SOC": 3.0})


def test_hwmon_agx_xavier_jetpack5_sums_six_rails_on_two_monitors(fake_root):
    fake_root.add_ina3221_hwmon("1-0040", 3, [("GPU", 19000, 100), ("CPU", 19000, 200), ("SOC", 19000, 150)])
    fake_root.add_ina3221_hwmon("1-0041", 4, [("CV", 19000, 0), ("VDDRQ", 19000, 50), ("SYS5V", 5000, 600)])
    meter = Ina3221Meter.discover()
    assert meter.name == "ina3221:sum(GPU,CPU,SOC,CV,VDDRQ,SYS5V)"
    assert meter.read_power_w() == pytest.approx(19 * 0.5 + 3.0)


def test_hwmon_orin_agx_skips_nc_and_the_sub_rail(fake_root):
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_GPU_SOC", 19000, 200), ("VDD_CPU_CV", 19000, 100),
                                              ("VIN_SYS_5V0", 5000, 800)])
    fake_root.add_ina3221_hwmon("1-0041", 2, [("NC", 0, 0), ("VDDQ_VDD2_1V8AO", 5000, 60), ("NC", 0, 0)])
    meter = Ina3221Meter.discover()
    assert meter.rails == ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")
    assert meter.read_power_w() == pytest.approx(3.8 + 1.9 + 4.0)


def test_iio_nano_jetpack4_total_is_pom_5v_in(fake_root):
    fake_root.add_ina3221_iio("6-0040", 0, [("POM_5V_IN", 4531), ("POM_5V_GPU", 1113), ("POM_5V_CPU", 539)])
    meter = Ina3221Meter.discover()
    assert meter.name == "ina3221:POM_5V_IN" and meter.layout == "iio"
    assert meter.read_power_w() == pytest.approx(4.531)


def test_iio_agx_xavier_jetpack4_sums_both_monitors(fake_root):
    fake_root.add_ina3221_iio("1-0040", 0, [("GPU", 463), ("CPU", 618), ("SOC", 2936)])
    fake_root.add_ina3221_iio("1-0041", 1, [("CV", 0), ("VDDRQ", 309), ("SYS5V", 3306)])
    meter = Ina3221Meter.discover("agx-xavier")
    assert meter.name == "ina3221:sum(GPU,CPU,SOC,CV,VDDRQ,SYS5V)"
    assert meter.read_power_w() == pytest.approx(7.632)


def test_explicit_board_whose_total_rails_are_missing_is_rejected(fake_root):
    fake_root.add_ina3221_iio("6-0040", 0, [("POM_5V_IN", 4000), ("POM_5V_GPU", 1000), ("POM_5V_CPU", 500)])
    with pytest.raises(LookupError, match="agx-xavier"):
        Ina3221Meter.discover("agx-xavier")


def test_rails_under_both_drivers_are_read_from_the_hwmon_layout_alone(fake_root):
    # A tree with both drivers' views: the meter reads one of them (hwmon, found first), never a rail
    # from the other in its place.
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 3000), ("VDD_CPU_GPU_CV", 5000, 1200),
                                              ("VDD_SOC", 5000, 600)])
    fake_root.add_ina3221_iio("1-0040", 0, [("VDD_IN", 9000), ("VDD_CPU_GPU_CV", 4000), ("VDD_SOC", 2000)])
    meter = Ina3221Meter.discover()
    assert meter.layout == "hwmon" and {c.layout for c in meter.channels} == {"hwmon"}
    assert meter.read_power_w() == pytest.approx(15.0)
    assert meter.read_rails_w() == pytest.approx({"VDD_IN": 15.0, "VDD_CPU_GPU_CV": 6.0, "VDD_SOC": 3.0})


def test_no_ina3221_is_a_lookup_error(fake_root):
    with pytest.raises(LookupError, match="no INA3221"):
        Ina3221Meter.discover()


def test_a_vanished_file_mid_run_is_a_read_error_not_zero(fake_root):
    d = fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 1000)])
    meter = Ina3221Meter.discover()
    (d / "curr1_input").unlink()
    with pytest.raises(PowerReadError, match="curr1_input"):
        meter.read_power_w()


def test_sampler_reads_live_sysfs_changes(fake_root):
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 1000)])
    meter = Ina3221Meter.discover()
    with PowerSampler(meter, hz=100) as sampler:
        time.sleep(0.15)
        fake_root.write("/sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/curr1_input", 3000)
        time.sleep(0.15)
    powers = set(sampler.trace.power_w.round(3))
    assert {5.0, 15.0} <= powers


def test_a_zero_total_is_a_failed_read_naming_the_meter_the_value_and_the_range(fake_root):
    """A rail the monitor does not see reads 0: summed as it was, the window's energy was 0 J. The read fails
    instead, worded as tegrastats words the line it skips."""
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 0), ("VDD_CPU_GPU_CV", 5000, 0), ("VDD_SOC", 5000, 0)])
    meter = Ina3221Meter.discover("orin-nx")
    lo_w, hi_w = load_device("orin-nx").power_range_w
    with pytest.raises(PowerReadError) as err:
        meter.read_power_w()
    assert str(err.value).startswith(f"ina3221:VDD_IN: implausible module power 0 W (below {lo_w:g} W")
    assert f"{lo_w:g}..{hi_w:g} W" in str(err.value)


def test_a_total_above_the_boards_maximum_fails_and_an_unknown_board_gets_the_widest_range(fake_root):
    """35 W is more than an Orin Nano can draw (30 W), not more than some module can: with the board named the
    read fails; with none the widest range applies, and only a value no module draws (a garbage current of
    2^32-1 mA, 21 MW) fails."""
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 7000), ("VDD_CPU_GPU_CV", 5000, 1000),
                                              ("VDD_SOC", 5000, 600)])
    with pytest.raises(PowerReadError, match=r"ina3221:VDD_IN: implausible module power 35 W \(above 30 W"):
        Ina3221Meter.discover("orin-nano").read_power_w()
    unknown = Ina3221Meter.discover()
    assert unknown.read_power_w() == pytest.approx(35.0)
    fake_root.write(VDD_IN_CURR, 2**32 - 1)
    widest_w = plausible_module_power(None).hi_w
    with pytest.raises(PowerReadError, match=f"implausible module power 2.14748e\\+07 W \\(above {widest_w:g} W"):
        unknown.read_power_w()


def test_the_total_not_each_rail_is_checked(fake_root):
    """An idle CV rail reads 0 W on an AGX Xavier and is summed; only a total of 0 fails."""
    fake_root.add_ina3221_iio("1-0040", 0, [("GPU", 463), ("CPU", 618), ("SOC", 2936)])
    fake_root.add_ina3221_iio("1-0041", 1, [("CV", 0), ("VDDRQ", 309), ("SYS5V", 3306)])
    meter = Ina3221Meter.discover("agx-xavier")
    assert meter.read_power_w() == pytest.approx(7.632)
    fake_root.add_ina3221_iio("1-0040", 0, [("GPU", 0), ("CPU", 0), ("SOC", 0)])
    fake_root.add_ina3221_iio("1-0041", 1, [("CV", 0), ("VDDRQ", 0), ("SYS5V", 0)])
    with pytest.raises(PowerReadError, match=r"implausible module power 0 W \(below"):
        meter.read_power_w()


#: How long (s) a test waits for the sampler thread's next sample: bounded, and far above a 100 Hz period.
GOOD_SAMPLE_WAIT_S = 5.0


def test_a_window_of_zero_readings_has_null_energy_with_the_reason_not_0_j(fake_root):
    """Sampled: the good readings before the rail drops to 0 integrate; a window over the zeros is None (never
    0 J), its reason naming the failed reads and why."""
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 2000)])
    meter = Ina3221Meter.discover("orin-nx")
    with PowerSampler(meter, hz=100) as sampler:
        time.sleep(0.15)
        t_good = time.perf_counter()  # a window ending here has good samples on both sides of its edges
        # A loaded machine may leave the sampler thread no CPU for a while: the rail drops only once a good
        # sample after t_good is in, else the window's end would fall on a NaN one.
        wait_until(lambda: sampler.snapshot().times_s[-1] > t_good, GOOD_SAMPLE_WAIT_S,
                   f"no sample after t_good within {GOOD_SAMPLE_WAIT_S:g} s", poll_s=0.005)
        fake_root.write(VDD_IN_CURR, 0)
        time.sleep(0.05)
        t0 = time.perf_counter()
        time.sleep(0.2)
        t1 = time.perf_counter()
    trace = sampler.trace
    assert trace.energy_j(trace.times_s[0], t_good) == pytest.approx(10.0 * (t_good - trace.times_s[0]), rel=0.05)
    assert trace.energy_j(t0, t1) is None and np.isnan(trace.power_w[-1]) and trace.read_errors > 0
    reason = window_null_reason(meter.name, trace, t0, t1)
    assert reason.startswith("ina3221:VDD_IN: ") and "failed reads in the measured window" in reason
    assert f"implausible module power 0 W (below {MIN_MODULE_POWER_W:g} W" in reason


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_every_board_is_recognised_from_its_own_rail_labels(board):
    spec = BOARDS[board]
    found = match_board(spec.rails)
    total, _ = total_rule(spec.rails)
    assert total == spec.total
    # Boards sharing one carrier layout (Orin NX / Orin Nano / Xavier NX) share one total rule.
    assert found is not None and found.total == spec.total


def test_old_tx2_names_and_unknown_boards():
    total, found_as = total_rule(["VDD_IN", "VDD_CPU", "VDD_GPU", "VDD_SOC", "VDD_WIFI", "VDD_DDR"])
    assert total == ("VDD_IN",) and found_as == {"VDD_IN": "VDD_IN"}
    assert total_rule(["VDD_IN", "VDD_FOO"])[0] == ("VDD_IN",)
    with pytest.raises(LookupError):
        total_rule(["VDD_FOO", "VDD_BAR"])
