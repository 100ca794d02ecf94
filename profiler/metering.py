"""One measurement window: how long a block ran and the module energy over exactly that time.

    with metered(meter) as w:
        train()
    w.time_s, w.energy_j, w.avg_power_w     # s, J, W; energy and power None with w.null_reason

A :class:`~profiler.power.sampler.PowerSampler` samples ``meter`` on a background thread from entry to
exit (its first sample before the window opens, its last after it closes) and
:meth:`~profiler.power.base.PowerTrace.energy_j` integrates power over exactly ``[t0_s, t1_s]`` on the
``time.perf_counter()`` clock. Without a meter, with an unavailable one, or with too few usable samples,
energy and power are None and :attr:`MeteredWindow.null_reason` says why -- never 0.

``sync`` runs before each clock read, so work queued on a GPU lands inside the window
(:func:`cuda_sync` synchronizes CUDA when the process uses it). :meth:`MeteredWindow.restart` opens the
window later than the sampler started: the profiler samples idle power and the warm-up first, then times
the measured minibatches, all in one trace.

Imports neither torch nor the hardware modules: the sampler is imported when a meter is there to sample.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jetpredict.profiler.power_defaults import DEFAULT_SAMPLER_HZ as DEFAULT_HZ  # a window's rate, Hz
from jetpredict.profiler.power_defaults import NO_METER  # MeteredWindow.meter without any meter

if TYPE_CHECKING:
    from jetpredict.profiler.power import PowerMeter, PowerSampler, PowerTrace


def meter_label(meter: PowerMeter | None) -> str:
    """Which meter measured: its name (``ina3221:VDD_IN``, ``none: <reason>``), or ``none: no sensor found``."""
    return meter.name if meter is not None else NO_METER


def cuda_sync() -> None:
    """Wait for queued CUDA work when this process uses CUDA through torch; otherwise do nothing (and
    never import torch or initialise CUDA)."""
    torch: Any = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_available() and cuda.is_initialized():
        cuda.synchronize()


def window_null_reason(meter: str, trace: PowerTrace | None, t0: float, t1: float, hint: str = "") -> str:
    """Why a window ``[t0, t1]`` (s) of ``meter`` (its label) has no energy; ``hint`` ends the last case."""
    if meter.startswith("none"):
        return meter
    if trace is None:
        return f"{meter}: no power trace was recorded"
    # Only failures the window touches explain it: a failed read in the lead-in (idle, warm-up) does not.
    failed = trace.failed_reads_in(t0, t1)
    if failed:
        return f"{meter}: {failed} failed reads in the measured window ({trace.last_error})"
    return (f"{meter}: measured window of {t1 - t0:.3g} s holds {trace.samples_in(t0, t1)} "
            f"power samples; need >= 2 covering it{hint}")


@dataclass
class MeteredWindow:
    """A measurement window; a context manager (see :func:`metered`).

    After the block: ``time_s`` (s, ``t1_s - t0_s``), ``energy_j`` (J over exactly that window) and
    ``avg_power_w`` (W, energy / time), or energy and power None with ``null_reason``; ``samples`` (power
    samples inside the window) and ``trace`` (every sample from entry to exit; None without a meter to
    sample). ``meter``: which meter (``none: ...`` without one). Inside the block only ``t0_s`` is set.
    """

    meter: str
    hz: float = DEFAULT_HZ
    sync: Callable[[], None] | None = field(default=None, repr=False)
    t0_s: float | None = None
    t1_s: float | None = None
    time_s: float | None = None
    energy_j: float | None = None
    avg_power_w: float | None = None
    null_reason: str | None = None
    samples: int | None = None
    trace: PowerTrace | None = field(default=None, repr=False)
    _power_meter: PowerMeter | None = field(default=None, repr=False)
    _sampler: PowerSampler | None = field(default=None, repr=False)

    @property
    def sampling(self) -> bool:
        """True while a power sampler runs (a meter that is available)."""
        return self._sampler is not None

    def _now(self) -> float:
        if self.sync is not None:
            self.sync()
        return time.perf_counter()

    def restart(self, hz: float | None = None) -> None:
        """Open the window now: what ran since entry stays in :attr:`trace`, outside the figures.
        ``hz``: the sampling rate from now on (Hz), e.g. faster for a short window."""
        if self.t1_s is not None:
            raise RuntimeError("the window has closed")
        if hz is not None and self._sampler is not None:
            self._sampler.set_rate(hz)
        self.t0_s = self._now()

    def __enter__(self) -> MeteredWindow:
        if self._power_meter is not None and self._power_meter.available:
            from jetpredict.profiler.power.sampler import PowerSampler

            self._sampler = PowerSampler(self._power_meter, self.hz).start()
        self.restart()
        return self

    def __exit__(self, *exc: object) -> None:
        sampler, self._sampler = self._sampler, None
        try:
            t1 = self._now()
        except BaseException as err:
            # sync raised (a CUDA error): the window has no end, so no time nor energy; say why rather than
            # leave the figures empty without a reason.
            self.null_reason = f"the measured window could not be closed: {type(err).__name__}: {err}"
            raise
        finally:
            # Stopped on every path (after the clock read: its last sample brackets the window), so that a
            # failed sync does not leave the sampler thread reading the meter for the rest of the process.
            self.trace = None if sampler is None else sampler.stop()
        self.t1_s, self.time_s = t1, t1 - float(self.t0_s)
        self.energy_j = None if self.trace is None else self.trace.energy_j(self.t0_s, t1)
        self.samples = None if self.trace is None else self.trace.samples_in(self.t0_s, t1)
        if self.energy_j is None:
            self.null_reason = window_null_reason(self.meter, self.trace, self.t0_s, t1)
        else:
            self.avg_power_w = self.energy_j / self.time_s


def metered(meter: PowerMeter | None, *, hz: float = DEFAULT_HZ,
            sync: Callable[[], None] | None = None) -> MeteredWindow:
    """A measurement window of ``meter`` (None = no meter), sampled at ``hz`` (Hz); ``sync`` runs before
    each clock read. Use as ``with metered(meter) as w: ...``; the meter is not closed (it is the caller's)."""
    return MeteredWindow(meter=meter_label(meter), hz=hz, sync=sync, _power_meter=meter)


__all__ = ["DEFAULT_HZ", "NO_METER", "MeteredWindow", "cuda_sync", "meter_label", "metered",
           "window_null_reason"]
