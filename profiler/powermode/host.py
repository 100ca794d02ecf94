"""A non-Jetson host: the only knob is how many CPU threads training uses; clocks are read, not set."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from jetpredict.models.catalogue import PowerMode
from jetpredict.models.errors import InputError
from jetpredict.profiler import sysfs
from jetpredict.profiler.powermode.base import PowerModeController
from jetpredict.profiler.powermode.custom import CPU_DIR, cpu_ids, cpu_online

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


def host_cpu_mhz() -> float:
    """The fastest online core's current clock in MHz (cpufreq, else /proc/cpuinfo), NaN if unknown."""
    khz = [sysfs.read_int(f"{CPU_DIR}/cpu{c}/cpufreq/scaling_cur_freq") for c in cpu_ids() if cpu_online(c)]
    khz = [k for k in khz if k]
    if khz:
        return max(khz) / 1e3
    text = sysfs.read_text("/proc/cpuinfo") or ""
    mhz = [float(line.split(":", 1)[1]) for line in text.splitlines()
           if line.lower().startswith("cpu mhz") and ":" in line]
    return max(mhz) if mhz else NAN


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
