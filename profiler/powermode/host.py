"""A non-Jetson host: the only knob is how many CPU threads training uses; clocks are read, not set."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from jetpredict.models.catalogue import PowerMode
from jetpredict.models.errors import InputError
from jetpredict.profiler import sysfs
from jetpredict.profiler.powermode.base import PowerModeController
from jetpredict.profiler.powermode.custom import CPU_DIR, cpu_ids, cpu_online
from jetpredict.profiler.runner import MEASURE_PHASE, MinibatchCallback

NAN = float("nan")


def _torch():
    # Only use torch when it is importable; the controller works (and is tested) without it.
    if "torch" in sys.modules:
        return sys.modules["torch"]
    try:
        import torch
    except ImportError:
        return None
    return torch


def online_cpus() -> list[int]:
    """The ids of the online CPUs."""
    return [c for c in cpu_ids() if cpu_online(c)]


def host_cpu_mhz(cpus: Sequence[int] | None = None) -> float:
    """The fastest current clock in MHz of ``cpus`` (default: the online ones; cpufreq, else /proc/cpuinfo), NaN
    if unknown."""
    khz = [sysfs.read_int(f"{CPU_DIR}/cpu{c}/cpufreq/scaling_cur_freq") for c in (online_cpus() if cpus is None
                                                                                   else cpus)]
    khz = [k for k in khz if k]
    if khz:
        return max(khz) / 1e3
    text = sysfs.read_text("/proc/cpuinfo") or ""
    mhz = [float(line.split(":", 1)[1]) for line in text.splitlines()
           if line.lower().startswith("cpu mhz") and ":" in line]
    return max(mhz) if mhz else NAN


class TrainingClock:
    """The host CPU clock training ran at (MHz): :func:`host_cpu_mhz` read after each measured minibatch and
    averaged. ``read_back``, read right after a switch, finds the idle clock before the governor raises it for
    training; the warm-up's readings are left out like its timings."""

    def __init__(self, read_back: PowerMode, then: MinibatchCallback | None = None) -> None:
        self.read_back = read_back
        self.then = then  # the campaign's own per-minibatch callback (progress), still called
        self.readings_mhz: list[float] = []
        # Listed once: the reads fall between minibatches, inside the measured power window.
        self._cpus = online_cpus()

    def on_minibatch(self, phase: str, i: int, n: int) -> None:
        """A runner's ``on_minibatch``: read the clock after a measured minibatch, then call ``then``."""
        if phase == MEASURE_PHASE:
            self.readings_mhz.append(host_cpu_mhz(self._cpus))
        if self.then is not None:
            self.then(phase, i, n)

    def mean_mhz(self) -> float:
        """Mean of the clocks read (MHz); NaN when none could be read."""
        known = [m for m in self.readings_mhz if not math.isnan(m)]
        return sum(known) / len(known) if known else NAN

    def in_force(self) -> PowerMode:
        """The read-back with the CPU clock training ran at (NaN, never the idle clock, when it was unreadable)."""
        return replace(self.read_back, cpu_mhz=self.mean_mhz())

    def note(self) -> str:
        """The sidecar's note on where the row's ``cpu_mhz`` comes from."""
        idle = "an unknown clock" if math.isnan(self.read_back.cpu_mhz) else f"{self.read_back.cpu_mhz:g} MHz"
        mean = self.mean_mhz()
        if math.isnan(mean):
            return (f"cpu_mhz is empty: the CPU clock could not be read during the {len(self.readings_mhz)} "
                    f"measured minibatch(es) (no cpufreq scaling_cur_freq of an online CPU, no 'cpu MHz' in "
                    f"/proc/cpuinfo); {idle} was read before training, an idle clock, not training's")
        read = sum(not math.isnan(m) for m in self.readings_mhz)
        return (f"cpu_mhz {mean:g} is the mean of the fastest online CPU's clock read after each of {read} "
                f"measured minibatch(es); {idle} was read once right after the switch, before training")


class HostController(PowerModeController):
    """``cpu_cores`` = training threads (``torch.set_num_threads`` when torch is importable, else only
    recorded as ``threads``); GPU and EMC clocks are unknown (NaN); nothing privileged is touched.
    """

    kind = "host"

    def __init__(self, use_torch: bool = True) -> None:
        super().__init__()
        self._torch = _torch() if use_torch else None
        self.threads = self._torch.get_num_threads() if self._torch else (os.cpu_count() or 1)

    def _mode(self, label: str) -> PowerMode:
        return PowerMode(label, int(self.threads), host_cpu_mhz(), NAN, NAN)

    def current(self) -> PowerMode:
        return self._mode("host")

    def apply(self, mode: PowerMode) -> None:
        limit = os.cpu_count() or 1
        cores = mode.cpu_cores
        if not float(cores).is_integer() or not 1 <= int(cores) <= limit:
            raise InputError(f"cpu_cores={cores!r} must be a whole number in 1..{limit} on this host",
                             "cpu_cores")
        self.threads = int(cores)
        if self._torch is not None:
            self._torch.set_num_threads(self.threads)

    def restore_snapshot(self, state: PowerMode, store_dir: Path | None = None) -> None:
        """Put back the thread count in force on entry as it was: it may exceed this host's cores (torch
        allows that, and a user may have chosen it), which :meth:`apply` refuses for a mode asked for."""
        self.threads = int(state.cpu_cores)
        if self._torch is not None:
            self._torch.set_num_threads(self.threads)

    def read_back(self) -> PowerMode:
        if self._torch is not None:
            self.threads = self._torch.get_num_threads()
        return self._mode("host")

    def training_clock(self, read_back: PowerMode, then: MinibatchCallback | None = None) -> TrainingClock:
        """The host's clock is the governor's, only read: the one training runs at (:class:`TrainingClock`)."""
        return TrainingClock(read_back, then)
