"""CPU package power from RAPL energy counters under ``/sys/class/powercap`` (Intel, and AMD on Linux >= 5.11).

Each top-level zone ``intel-rapl:<n>`` named ``package-<n>`` has a cumulative ``energy_uj`` counter (µJ)
that wraps at ``max_energy_range_uj``. Power is the counter's slope between two reads. This is CPU
package energy, not the training device's: it goes to ``cpu_package_energy_j``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from jetpredict.profiler import sysfs
from jetpredict.profiler.power.base import CPU_PACKAGE_DOMAIN, PowerMeter, PowerReadError

ZONE_GLOB = "/sys/class/powercap/intel-rapl:*"


@dataclass
class _Zone:
    name: str
    energy_file: Path
    max_range_uj: int
    last_uj: int
    unwrapped_uj: int = 0  # energy since the meter opened, wraps undone


def find_package_zones() -> list[tuple[str, Path, int]]:
    """``(name, energy_uj file, max_energy_range_uj)`` of each readable package zone."""
    zones = []
    for zone in sysfs.glob(ZONE_GLOB):
        if zone.name.count(":") != 1:  # intel-rapl:0:0 (core, uncore, dram) sit inside the package
            continue
        name = sysfs.read_text(zone / "name") or ""
        energy, max_range = zone / "energy_uj", sysfs.read_int(zone / "max_energy_range_uj")
        if name.startswith("package") and sysfs.read_int(energy) is not None and max_range:
            zones.append((name, energy, max_range))
    return zones


class RaplMeter(PowerMeter):
    """Sum of all CPU packages: ``rapl:package-0`` or ``rapl:sum(package-0,package-1)``."""

    domain = CPU_PACKAGE_DOMAIN

    def __init__(self) -> None:
        found = find_package_zones()
        if not found:
            readable = any(z.name.count(":") == 1 for z in sysfs.glob(ZONE_GLOB))
            raise LookupError("rapl: energy_uj not readable (root only on recent kernels)" if readable
                              else "rapl: no package zone under /sys/class/powercap")
        self._zones = [_Zone(n, f, r, sysfs.read_int(f) or 0) for n, f, r in found]
        self._lock = threading.Lock()
        self._last_t = time.perf_counter()
        self._last_energy_j = 0.0
        self._last_power_w: float | None = None
        names = [z.name for z in self._zones]
        self.name = "rapl:" + (names[0] if len(names) == 1 else f"sum({','.join(names)})")

    @property
    def rails(self) -> tuple[str, ...]:
        return tuple(z.name for z in self._zones)

    def read_energy_j(self) -> float:
        """Energy in J since the meter was created, counter wraps undone."""
        with self._lock:
            for z in self._zones:
                now = sysfs.read_int(z.energy_file)
                if now is None:
                    raise PowerReadError(f"rapl: cannot read {sysfs.unroot(z.energy_file)}")
                delta = now - z.last_uj
                if delta < 0:  # the counter wrapped once since the last read
                    delta += z.max_range_uj
                z.unwrapped_uj += delta
                z.last_uj = now
            return sum(z.unwrapped_uj for z in self._zones) / 1e6

    def read_power_w(self) -> float:
        """Mean package power in W since the previous read (the counter's slope)."""
        energy_j, t = self.read_energy_j(), time.perf_counter()
        dt = t - self._last_t
        if dt < 1e-3 and self._last_power_w is not None:
            return self._last_power_w  # too short to resolve a slope: keep the last one
        power = (energy_j - self._last_energy_j) / max(dt, 1e-9)
        self._last_t, self._last_energy_j, self._last_power_w = t, energy_j, power
        return power
