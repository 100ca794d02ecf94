"""RAPL package energy from a fake powercap tree, counter wrap included."""

from __future__ import annotations

import time

import pytest
from jetpredict.models.profile_rows import validate_records
from jetpredict.profiler.backends import MinibatchTiming, TrainingBackend
from jetpredict.profiler.power import RaplMeter, detect_cpu_package_meter
from jetpredict.profiler.runner import RealTimeRunner, RunSettings, aggregate_row

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


class _PackageLoad(TrainingBackend):
    """Minibatches of 20 ms that each add ``j_per_minibatch`` J to package 0's counter (0: a counter that never
    moves, as a VM's or a locked-down firmware's RAPL does)."""

    def __init__(self, root, j_per_minibatch: float) -> None:
        self.root, self.step_uj = root, round(j_per_minibatch * 1e6)

    def prepare(self, mode) -> None:
        pass

    def next_minibatch(self) -> MinibatchTiming:
        t0 = time.perf_counter()
        time.sleep(0.02)
        self.root.write(ZONE.format(0), self.root.read_int(ZONE.format(0)) + self.step_uj)
        t1 = time.perf_counter()
        return MinibatchTiming(stall_s=0.0, compute_s=t1 - t0, total_s=t1 - t0, start_s=t0, end_s=t1)


@pytest.mark.parametrize("j_per_minibatch", [0.0, 0.5])
def test_a_counter_that_does_not_advance_over_training_gives_no_energy_and_says_why(fake_root, j_per_minibatch):
    """A package draws power all the time: a counter that stood still over training was stored as 0 J with
    no reason. It is null, saying the counter did not advance; a moving counter still gives its energy."""
    fake_root.add_rapl([(1_000_000, 10**12)])
    backend = _PackageLoad(fake_root, j_per_minibatch)
    run = RealTimeRunner(backend, None, RaplMeter()).run_mode(None, RunSettings(warmup=1, minibatches=10, idle_s=0))
    row = aggregate_row(run.measured, device="host", workload="w", mode={"mode": "host", "cpu_cores": 1},
                        batch_size=4, num_workers=0, minibatches_per_epoch=100, cpu_trace=run.cpu_trace,
                        cpu_power_meter=run.cpu_power_meter)
    if j_per_minibatch:
        # The window runs from the first minibatch's start to the last's end: the 10 steps inside it.
        assert row["cpu_package_energy_j"] == pytest.approx(j_per_minibatch * 100, rel=0.15)
        assert row["cpu_package_null_reason"] is None
    else:
        assert row["cpu_package_energy_j"] is None
        reason = row["cpu_package_null_reason"]
        assert reason.startswith("rapl:package-0: ") and "did not advance" in reason, reason
    validate_records([row])
