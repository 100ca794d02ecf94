"""RAPL package energy from a fake powercap tree, counter wrap included."""

from __future__ import annotations

import pytest
from jetpredict.profiler.power import RaplMeter, detect_cpu_package_meter

ZONE = "/sys/class/powercap/intel-rapl:{}/energy_uj"


def test_single_package_energy_and_power(fake_root, monkeypatch):
    fake_root.add_rapl([(1_000_000, 262_143_328_850)])
    clock = iter([10.0, 10.5, 11.0])
    monkeypatch.setattr("jetpredict.profiler.power.rapl.time.perf_counter", lambda: next(clock))
    meter = RaplMeter()
    assert meter.name == "rapl:package-0" and meter.domain == "cpu_package"
    fake_root.write(ZONE.format(0), 1_000_000 + 12_500_000)  # +12.5 J in 0.5 s
    assert meter.read_power_w() == pytest.approx(25.0)
    fake_root.write(ZONE.format(0), 1_000_000 + 22_500_000)  # +10 J in 0.5 s
    assert meter.read_power_w() == pytest.approx(20.0)
    assert meter.read_energy_j() == pytest.approx(22.5)


def test_counter_wrap_is_undone(fake_root):
    max_uj = 65_536_000_000
    fake_root.add_rapl([(max_uj - 2_000_000, max_uj)])
    meter = RaplMeter()
    fake_root.write(ZONE.format(0), 3_000_000)  # wrapped: 2 J before the top + 3 J after
    assert meter.read_energy_j() == pytest.approx(5.0)


def test_two_packages_are_summed_and_sub_zones_ignored(fake_root):
    fake_root.add_rapl([(0, 10**12), (0, 10**12)])
    meter = RaplMeter()
    assert meter.name == "rapl:sum(package-0,package-1)"
    assert meter.rails == ("package-0", "package-1")
    fake_root.write(ZONE.format(0), 4_000_000)
    fake_root.write(ZONE.format(1), 6_000_000)
    fake_root.write("/sys/class/powercap/intel-rapl:0:0/energy_uj", 99_000_000)
    assert meter.read_energy_j() == pytest.approx(10.0)


def test_missing_or_unreadable_rapl_gives_a_null_meter_with_a_reason(fake_root):
    assert detect_cpu_package_meter().name == "none: no package zone under /sys/class/powercap"
    fake_root.add_rapl([(0, 10**12)], readable=False)
    null = detect_cpu_package_meter()
    assert not null.available and null.domain == "cpu_package"
    assert "root only" in null.name
