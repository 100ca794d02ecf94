"""On ``--device host`` the row's ``cpu_mhz`` is the clock training ran at, read during the measured minibatches,
never the idle clock read right after the switch (before the governor raises it)."""

from __future__ import annotations

import json
import math
import time

import pytest
from jetpredict.profiler.backends import MinibatchTiming, TrainingBackend
from jetpredict.profiler.campaign import CampaignConfig, CampaignParts, run_campaign
from jetpredict.profiler.mode_lists import host_modes
from jetpredict.profiler.powermode.host import HostController
from jetpredict.profiler.runner import RealTimeRunner

CLOCK = "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_cur_freq"
IDLE_KHZ = 800_000


class GovernorBackend(TrainingBackend):
    """Each minibatch sets the CPU clocks as a governor does under load: ``warmup_khz`` for the first ``warmup``
    minibatches, then ``measured_khz`` in turn (None removes the cpufreq file: the clock cannot be read)."""

    workload, batch_size, num_workers, minibatches_per_epoch = "lenet5-mnist", 4, 0, 100

    def __init__(self, root, cpus: int, warmup: int, warmup_khz: int, measured_khz: list[int | None]) -> None:
        self.root, self.cpus, self.warmup, self.warmup_khz = root, cpus, warmup, warmup_khz
        self.measured_khz, self.count = measured_khz, 0

    def prepare(self, mode) -> None:
        pass

    def next_minibatch(self) -> MinibatchTiming:
        i, self.count = self.count, self.count + 1
        khz = self.warmup_khz if i < self.warmup else self.measured_khz[(i - self.warmup) % len(self.measured_khz)]
        for c in range(self.cpus):
            if khz is None:
                self.root.real(CLOCK.format(c)).unlink(missing_ok=True)
            else:
                self.root.write(CLOCK.format(c), khz)
        t0 = time.perf_counter()
        t1 = t0 + 0.01  # timings are data here; nothing measures wall-clock time
        return MinibatchTiming(0.0, t1 - t0, t1 - t0, t0, t1)


def _campaign(tmp_path, root, measured_khz: list[int | None], cpus: int = 2, warmup: int = 2,
              minibatches: int = 4) -> tuple[dict, dict]:
    for c in range(cpus):
        root.write(CLOCK.format(c), IDLE_KHZ)
    backend = GovernorBackend(root, cpus, warmup, 1_200_000, measured_khz)
    cfg = CampaignConfig(device="host", workload="lenet5-mnist", out=str(tmp_path / "r.csv"), warmup=warmup,
                         minibatches=minibatches, progress=False)
    parts = CampaignParts("host", None, host_modes(None), RealTimeRunner(backend, None),
                          HostController(use_torch=False), 0.0)
    rows = run_campaign(cfg, parts)
    mode = json.loads((tmp_path / "r.csv.json").read_text())["modes"][0]
    return rows[0], mode


def test_row_records_the_clock_training_ran_at_not_the_idle_read_back(tmp_path, fake_root):
    row, mode = _campaign(tmp_path, fake_root, [3_000_000])
    assert row["cpu_mhz"] == pytest.approx(3000.0)
    assert mode["read_back"]["cpu_mhz"] == pytest.approx(IDLE_KHZ / 1e3)  # the read after the switch, kept as such
    assert any("3000" in n and "measured minibatch" in n for n in mode["notes"])


def test_clock_is_the_mean_over_the_measured_minibatches_only(tmp_path, fake_root):
    # Warm-up runs at 1200 MHz; the measured minibatches alternate 2000 and 3000 MHz.
    row, _ = _campaign(tmp_path, fake_root, [2_000_000, 3_000_000], minibatches=4)
    assert row["cpu_mhz"] == pytest.approx(2500.0)


def test_unreadable_clock_during_training_leaves_cpu_mhz_empty_with_a_note(tmp_path, fake_root):
    # Readable at idle (800 MHz) but not while training: the idle clock must not stand in for it.
    row, mode = _campaign(tmp_path, fake_root, [None])
    assert row["cpu_mhz"] is None or math.isnan(row["cpu_mhz"])
    assert any(n.startswith("cpu_mhz is empty") for n in mode["notes"])
