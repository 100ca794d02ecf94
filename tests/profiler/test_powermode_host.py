"""The host controller: cores are training threads; GPU/EMC clocks are unknown on a host."""

from __future__ import annotations

import math
import os

import pytest
from jetpredict.models.catalogue import PowerMode
from jetpredict.models.errors import InputError
from jetpredict.profiler.powermode import HostController, detect_controller


def test_threads_are_set_through_torch_and_restored():
    torch = pytest.importorskip("torch")
    start = torch.get_num_threads()
    ctl = detect_controller("host")
    assert isinstance(ctl, HostController) and ctl.kind == "host"
    with ctl:
        ctl.apply(PowerMode("host", 1, math.nan, math.nan, math.nan))
        assert torch.get_num_threads() == 1
        assert ctl.read_back().cpu_cores == 1
    assert torch.get_num_threads() == start


def test_more_threads_than_cores_on_entry_are_restored_as_they_were():
    torch = pytest.importorskip("torch")
    start = torch.get_num_threads()
    oversubscribed = (os.cpu_count() or 1) * 4  # set on purpose before the run
    torch.set_num_threads(oversubscribed)
    try:
        with HostController() as ctl:
            ctl.apply(PowerMode("host", 1, math.nan, math.nan, math.nan))
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == oversubscribed
    finally:
        torch.set_num_threads(start)


def test_without_torch_threads_are_only_recorded():
    ctl = HostController(use_torch=False)
    assert ctl.current().cpu_cores == os.cpu_count()
    ctl.apply(PowerMode("host", 1, 0, 0, 0))
    back = ctl.read_back()
    assert back.cpu_cores == 1 and math.isnan(back.gpu_mhz) and math.isnan(back.emc_mhz)


@pytest.mark.parametrize("cores", [0, -1, 1.5, 10_000])
def test_impossible_core_counts_name_the_field(cores):
    with pytest.raises(InputError) as err:
        HostController(use_torch=False).apply(PowerMode("host", cores, 0, 0, 0))
    assert err.value.field == "cpu_cores"


def test_cpu_clock_from_cpufreq_or_cpuinfo(fake_root):
    fake_root.write("/proc/cpuinfo", "processor : 0\ncpu MHz\t\t: 2400.125\nprocessor : 1\ncpu MHz : 1800.0\n")
    fake_root.write("/sys/devices/system/cpu/cpu0/online", 1)  # a cpu dir without cpufreq
    assert HostController(use_torch=False).read_back().cpu_mhz == pytest.approx(2400.125)
    fake_root.write("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", 3100000)
    assert HostController(use_torch=False).read_back().cpu_mhz == pytest.approx(3100.0)  # kHz / 1000
