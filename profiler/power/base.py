"""The power-meter abstraction, its null object, and the sampled power trace it produces.

A :class:`PowerMeter` reads the instantaneous power of one domain (the Jetson module, a discrete GPU
board, or a CPU package) in W. A :class:`PowerTrace` holds timed samples on the ``time.perf_counter()``
clock and integrates energy over exactly a measured window.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np
from jetpredict.profiler.power_defaults import MIN_SAMPLER_HZ as MIN_SAMPLER_HZ  # re-exported, Hz
from jetpredict.profiler.power_defaults import NO_METER, NO_SENSOR_REASON

#: Domains a meter can measure, what the reading is the power *of*: the Jetson module, a discrete GPU board,
#: a CPU package.
MODULE_DOMAIN, GPU_DOMAIN, CPU_PACKAGE_DOMAIN = "module", "gpu", "cpu_package"
DOMAINS = (MODULE_DOMAIN, GPU_DOMAIN, CPU_PACKAGE_DOMAIN)

#: MLPerf Power asks for at least 1 Hz (:data:`MIN_SAMPLER_HZ`) and 60 samples per measured window.
MIN_SAMPLES_PER_WINDOW = 60
#: A stretch without samples longer than this many sample periods is a gap the window's warning names.
GAP_PERIODS = 3


def checked_domain(domain: str) -> str:
    """``domain`` if it is one of :data:`DOMAINS`, else ValueError naming the rule."""
    if domain not in DOMAINS:
        raise ValueError(f"domain {domain!r} must be one of {', '.join(DOMAINS)}")
    return domain


class PowerReadError(RuntimeError):
    """A sensor that was found could not be read (the sample becomes unknown, never 0)."""


@dataclass(frozen=True)
class PlausibleRange:
    """The readings a sensor can give, ``lo_w`` to ``hi_w`` (W, inclusive), of ``what`` (``module power``);
    ``source`` says where the bounds come from (``orin-nx's catalogue range``)."""

    lo_w: float
    hi_w: float
    source: str
    what: str = "module power"

    def problem(self, power_w: float) -> str | None:
        """None when ``power_w`` (W) lies in the range, else why it is no reading: the value, the bound it
        passes, the range and its source (one wording for every meter that checks)."""
        if self.lo_w <= power_w <= self.hi_w:
            return None
        side = f"below {self.lo_w:g} W" if power_w < self.lo_w else f"above {self.hi_w:g} W"
        return (f"implausible {self.what} {power_w:g} W ({side}; plausible {self.lo_w:g}..{self.hi_w:g} W, "
                f"{self.source})")


class PowerMeter(ABC):
    """One source of instantaneous power readings, in W.

    ``name`` says which sensor and rails were used (it goes into the ``power_meter`` column, e.g.
    ``ina3221:VDD_IN``); ``domain`` is ``module``, ``gpu`` or ``cpu_package``.
    """

    name: str = "abstract"
    domain: str = MODULE_DOMAIN

    @property
    def available(self) -> bool:
        """False only for :class:`NullPowerMeter`."""
        return True

    @property
    def rails(self) -> tuple[str, ...]:
        """The rails (or GPUs, packages) whose power :meth:`read_power_w` adds up."""
        return ()

    @property
    def update_hz(self) -> float | None:
        """How often the reading changes (Hz), or None when unknown: sampling faster than this only records
        the same reading again, so the runner does not raise its rate above it."""
        return None

    @abstractmethod
    def read_power_w(self) -> float:
        """Instantaneous power in W; raises :class:`PowerReadError` when the sensor cannot be read."""

    def read_timed_power_w(self) -> tuple[float | None, float]:
        """``(taken_s, W)``: a reading and when it was taken (``time.perf_counter()`` s), raising as
        :meth:`read_power_w`. ``taken_s`` None: taken during this call (a synchronous sensor read), which the
        caller stamps itself; a meter that hands out an earlier reading (tegrastats' latest line) gives its
        time, and the same time again for the same reading. Such a meter has no :meth:`read_energy_j`: the
        sampler reads a counter at its poll and would file it under the reading's earlier time."""
        return None, self.read_power_w()

    def read_energy_j(self) -> float | None:
        """A hardware energy counter in J (any origin, never decreasing), or None where the sensor has none:
        the integral between two reads is then exact, not sampled."""
        return None

    def close(self) -> None:  # noqa: B027 - most meters hold nothing; those that do override it
        """Release files, processes or libraries held by the meter (idempotent)."""

    def __enter__(self) -> PowerMeter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, domain={self.domain!r})"


class NullPowerMeter(PowerMeter):
    """No sensor: ``name`` is ``none: <reason>`` and every reading is unknown."""

    def __init__(self, reason: str = NO_SENSOR_REASON, domain: str = MODULE_DOMAIN) -> None:
        self.reason = reason
        self.name = f"none: {reason}"
        self.domain = checked_domain(domain)

    @property
    def available(self) -> bool:
        return False

    def read_power_w(self) -> float:
        raise PowerReadError(self.name)


@dataclass
class PowerTrace:
    """Power samples of one meter: ``times_s`` (``time.perf_counter()``, s) and ``power_w`` (W), and where the
    meter has a hardware energy counter its reading at each sample, ``energy_counter_j`` (J).

    A sample whose read failed is NaN; any window that touches one has unknown (None) energy, unless the
    energy counter was read on either side of both its edges.
    """

    times_s: np.ndarray
    power_w: np.ndarray
    meter_name: str = NO_METER
    domain: str = MODULE_DOMAIN
    hz: float = 0.0
    read_errors: int = 0
    last_error: str | None = None
    notes: list[str] = field(default_factory=list)
    energy_counter_j: np.ndarray | None = None

    def __post_init__(self) -> None:
        checked_domain(self.domain)
        self.times_s = np.asarray(self.times_s, dtype=float)
        self.power_w = np.asarray(self.power_w, dtype=float)
        if self.times_s.shape != self.power_w.shape or self.times_s.ndim != 1:
            raise ValueError("times_s and power_w must be 1-D arrays of the same length")
        if self.energy_counter_j is not None:
            self.energy_counter_j = np.asarray(self.energy_counter_j, dtype=float)
            if self.energy_counter_j.shape != self.times_s.shape:
                raise ValueError("energy_counter_j must have one reading per sample")
        if np.any(np.diff(self.times_s) < 0):
            order = np.argsort(self.times_s, kind="stable")
            self.times_s, self.power_w = self.times_s[order], self.power_w[order]
            if self.energy_counter_j is not None:
                self.energy_counter_j = self.energy_counter_j[order]

    def __len__(self) -> int:
        return int(self.times_s.size)

    def samples_in(self, t0: float, t1: float) -> int:
        """Number of samples with ``t0 <= t <= t1`` (the runner warns below :data:`MIN_SAMPLES_PER_WINDOW`)."""
        return int(np.count_nonzero((self.times_s >= t0) & (self.times_s <= t1)))

    def _bracket(self, t0: float, t1: float) -> tuple[int, int]:
        """Indices of the first and last sample that decide a window ``[t0, t1]``: those inside it and the one
        on either side of each edge."""
        t = self.times_s
        return (max(int(np.searchsorted(t, t0, side="right")) - 1, 0),
                min(int(np.searchsorted(t, t1, side="left")), t.size - 1))

    def failed_reads_in(self, t0: float, t1: float) -> int:
        """Failed reads (NaN power) among the samples that decide a window ``[t0, t1]`` (s): those inside it
        and the one on either side of each edge, as in :meth:`energy_j`. Failures outside do not count."""
        if self.times_s.size == 0:
            return 0
        lo, hi = self._bracket(t0, t1)
        return int(np.count_nonzero(~np.isfinite(self.power_w[lo:hi + 1]))) if hi >= lo else 0

    def energy_j(self, t0: float, t1: float) -> float | None:
        """Energy in J over exactly ``[t0, t1]``. With the meter's energy counter read at the samples that
        bracket the window: the counter's difference (exact between them, only the two edge intervals
        interpolated); otherwise trapezoids of the power, interpolated at both edges.

        None when the window is empty or reversed, not covered by samples, holds fewer than 2 samples,
        or touches a failed read.
        """
        t, p = self.times_s, self.power_w
        if not (math.isfinite(t0) and math.isfinite(t1)) or t1 <= t0 or t.size < 2:
            return None
        if t0 < t[0] or t1 > t[-1] or self.samples_in(t0, t1) < 2:
            return None
        # Samples strictly inside plus the two bracketing ones decide the integral.
        lo, hi = self._bracket(t0, t1)
        counted = self._counter_energy_j(t0, t1, lo, hi)
        if counted is not None:
            return counted
        if not np.all(np.isfinite(p[lo:hi + 1])):
            return None
        inner = (t > t0) & (t < t1)
        ts = np.concatenate(([t0], t[inner], [t1]))
        ps = np.concatenate(([np.interp(t0, t, p)], p[inner], [np.interp(t1, t, p)]))
        return float(np.sum((ps[1:] + ps[:-1]) * np.diff(ts)) / 2.0)

    def _counter_energy_j(self, t0: float, t1: float, lo: int, hi: int) -> float | None:
        """The energy counter's increase over ``[t0, t1]`` (J) from its reads at the samples on either side of
        each edge (``lo``, ``lo + 1``; ``hi - 1``, ``hi``); None without a counter, when one of those reads
        failed, or when the counter ran backwards in the window (a reset)."""
        e = self.energy_counter_j
        if e is None:
            return None
        t = self.times_s
        read = e[lo:hi + 1][np.isfinite(e[lo:hi + 1])]  # a failed read must not hide a reset
        if not np.all(np.isfinite(e[[lo, lo + 1, hi - 1, hi]])) or np.any(np.diff(read) < 0):
            return None
        at_t0 = np.interp(t0, t[lo:lo + 2], e[lo:lo + 2])
        at_t1 = np.interp(t1, t[hi - 1:hi + 1], e[hi - 1:hi + 1])
        return float(at_t1 - at_t0)

    def mean_power_w(self, t0: float, t1: float) -> float | None:
        """Mean power in W over ``[t0, t1]`` (energy / duration), or None as for :meth:`energy_j`."""
        e = self.energy_j(t0, t1)
        return None if e is None else e / (t1 - t0)

    def window_warning(self, t0: float, t1: float) -> str | None:
        """A message when the window ``[t0, t1]`` (s) has fewer samples than MLPerf Power asks or a gap in its
        samples (see :meth:`gaps_in`), else None."""
        n = self.samples_in(t0, t1)
        parts = []
        if n < MIN_SAMPLES_PER_WINDOW:
            parts.append(f"power window of {t1 - t0:.3g} s holds {n} samples of {self.meter_name} "
                         f"(MLPerf Power asks for >= {MIN_SAMPLES_PER_WINDOW}); energy is less certain")
        gaps, period = self.gaps_in(t0, t1)
        if gaps:
            lo, hi = self._bracket(t0, t1)
            it = "it" if len(gaps) == 1 else "them"
            across = (f"the energy counter covers {it}" if self._counter_energy_j(t0, t1, lo, hi) is not None
                      else f"energy across {it} is a straight line between the samples either side")
            named = ", ".join(f"{length:.3g} s at +{start - t0:.3g} s" for start, length in gaps)
            parts.append(f"power samples of {self.meter_name} have {_gaps_label(len(gaps))} of {named} into the "
                         f"{t1 - t0:.3g} s window (> {GAP_PERIODS} sample periods of {period:.3g} s); {across}")
        return "; ".join(parts) or None

    def gaps_in(self, t0: float, t1: float) -> tuple[list[tuple[float, float]], float]:
        """Stretches of the window ``[t0, t1]`` (s) without a sample, longer than :data:`GAP_PERIODS` sample
        periods, as (start s, length s), clipped to the window; and that period (s): the trace's ``1/hz``,
        or the median interval where it is longer (a meter slower than asked is slow, not holed)."""
        if not (math.isfinite(t0) and math.isfinite(t1)) or t1 <= t0 or self.times_s.size < 2:
            return [], 0.0
        lo, hi = self._bracket(t0, t1)
        t = self.times_s[lo:hi + 1]
        if t.size < 2:
            return [], 0.0
        period = max(1.0 / self.hz if self.hz > 0 else 0.0, float(np.median(np.diff(t))))
        starts, ends = np.clip(t[:-1], t0, t1), np.clip(t[1:], t0, t1)  # only the part inside counts
        holed = (ends - starts) > GAP_PERIODS * period
        return [(float(a), float(b - a)) for a, b in zip(starts[holed], ends[holed], strict=True)], period


def _gaps_label(n: int) -> str:
    return "a gap" if n == 1 else f"{n} gaps"
