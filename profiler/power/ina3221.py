"""INA3221 power monitors read straight from sysfs, in both kernel layouts.

- JetPack 5/6 (mainline ``ina3221`` hwmon driver, channels from 1):
  ``/sys/bus/i2c/drivers/ina3221/<bus-addr>/hwmon/hwmon<N>/in<ch>_label``, ``in<ch>_input`` (mV),
  ``curr<ch>_input`` (mA); power = V x I. The hwmon index changes between boots, so rails are found by label.
- JetPack 4 (``ina3221x`` IIO driver, channels from 0):
  ``/sys/bus/i2c/drivers/ina3221x/<bus-addr>/iio:device<k>/rail_name_<ch>``, ``in_power<ch>_input`` (mW).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jetpredict.profiler import sysfs
from jetpredict.profiler.power.base import MODULE_DOMAIN, PowerMeter, PowerReadError
from jetpredict.profiler.power.rails import IGNORED_LABELS, plausible_module_power, total_name, total_rule

HWMON_LABEL_GLOBS = ("/sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/in*_label",)
IIO_RAIL_GLOBS = ("/sys/bus/i2c/drivers/ina3221x/*/iio:device*/rail_name_*",)


@dataclass(frozen=True)
class Ina3221Channel:
    """One monitored rail: its label and the files that give its power."""

    label: str
    layout: str  # "hwmon" | "iio"
    files: tuple[Path, ...]  # hwmon: (mV, mA); iio: (mW,) or (mV, mA) when in_power is absent

    def read_w(self) -> float:
        values = [sysfs.read_int(f) for f in self.files]
        if any(v is None for v in values):
            bad = next(f for f, v in zip(self.files, values, strict=True) if v is None)
            raise PowerReadError(f"ina3221 rail {self.label}: cannot read {sysfs.unroot(bad)}")
        if len(values) == 1:
            return values[0] / 1e3  # mW
        return values[0] * values[1] / 1e6  # mV x mA


def _scan_channels(globs: tuple[str, ...], name_pattern: str, layout: str,
                   candidates: Callable[[str, Path], tuple[tuple[Path, ...], ...]]) -> list[Ina3221Channel]:
    """Channels whose label file matches ``name_pattern`` (channel number in group 1); the value files
    are the first of ``candidates(channel, directory)`` that all exist."""
    channels = []
    for pattern in globs:
        for label_file in sysfs.glob(pattern):
            m = re.fullmatch(name_pattern, label_file.name)
            label = sysfs.read_text(label_file)
            if not m or not label or label.upper() in IGNORED_LABELS:
                continue
            for files in candidates(m.group(1), label_file.parent):
                if all(f.exists() for f in files):
                    channels.append(Ina3221Channel(label, layout, files))
                    break
    return channels


def _hwmon_channels() -> list[Ina3221Channel]:
    # JetPack 5/6 hwmon: voltage (mV) and current (mA) per channel.
    return _scan_channels(HWMON_LABEL_GLOBS, r"in(\d+)_label", "hwmon",
                          lambda ch, d: ((d / f"in{ch}_input", d / f"curr{ch}_input"),))


def _iio_channels() -> list[Ina3221Channel]:
    # JetPack 4 iio: power (mW) per channel, else voltage (mV) and current (mA).
    return _scan_channels(IIO_RAIL_GLOBS, r"rail_name_(\d+)", "iio",
                          lambda ch, d: ((d / f"in_power{ch}_input",),
                                         (d / f"in_voltage{ch}_input", d / f"in_current{ch}_input")))


def find_channels() -> list[Ina3221Channel]:
    """Every INA3221 rail under the sysfs root (hwmon layout first, then IIO)."""
    return _hwmon_channels() + _iio_channels()


class Ina3221Meter(PowerMeter):
    """Module power from INA3221 rails: one total rail, or the sum of rails on boards without one.

    A total no module can draw (:func:`~jetpredict.profiler.power.rails.plausible_module_power` of ``board``, a
    catalogue id; the widest range when None: a rail the monitor does not see reads 0, a torn read garbage) is a
    failed read, as tegrastats skips such a line: the sample is unknown, never 0 W or a huge number.
    """

    domain = MODULE_DOMAIN

    def __init__(self, channels: list[Ina3221Channel], total: tuple[str, ...], board: str | None = None) -> None:
        by_label = {c.label: c for c in channels}
        missing = [r for r in total if r not in by_label]
        if missing or not total:
            raise LookupError(f"ina3221: rails {missing or '(none)'} not among {list(by_label)}")
        self.channels = list(channels)
        self._total = tuple(by_label[r] for r in total)
        self.name = f"ina3221:{total_name(tuple(total))}"
        self._plausible = plausible_module_power(board)

    @classmethod
    def discover(cls, board: str | None = None) -> Ina3221Meter:
        """The meter for this board's total rule; ``LookupError`` when no INA3221 or no rule fits."""
        channels = find_channels()
        if not channels:
            raise LookupError("no INA3221 rails under /sys/bus/i2c/drivers/ina3221{,x}")
        layout = channels[0].layout
        channels = [c for c in channels if c.layout == layout]  # never mix two drivers' views
        total, found_as = total_rule([c.label for c in channels], board)
        return cls(channels, tuple(found_as[r] for r in total), board)

    @property
    def layout(self) -> str:
        return self._total[0].layout

    @property
    def rails(self) -> tuple[str, ...]:
        return tuple(c.label for c in self._total)

    def read_power_w(self) -> float:
        total_w = float(sum(c.read_w() for c in self._total))
        # Only the total is checked: one rail may idle at 0 W (AGX Xavier's CV) while the module draws power.
        if problem := self._plausible.problem(total_w):
            raise PowerReadError(f"{self.name}: {problem}")
        return total_w

    def read_rails_w(self) -> dict[str, float | None]:
        """Every rail's power in W (None where a read failed), for diagnostics."""
        out: dict[str, float | None] = {}
        for c in self.channels:
            try:
                out[c.label] = c.read_w()
            except PowerReadError:
                out[c.label] = None
        return out
