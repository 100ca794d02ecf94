"""A background thread that samples a :class:`PowerMeter` at a fixed rate into a :class:`PowerTrace`."""

from __future__ import annotations

import threading
import time

import numpy as np
from jetpredict.models.numbers import checked_number
from jetpredict.profiler.power.base import GAP_PERIODS, MIN_SAMPLES_PER_WINDOW, PowerMeter, PowerTrace
from jetpredict.profiler.power_defaults import DEFAULT_SAMPLER_HZ, MAX_SAMPLER_HZ, MIN_SAMPLER_HZ

#: stop() waits at least this long (s) for a reading taken after it, before it leaves the end unbracketed.
STOP_WAIT_MIN_S = 1.0
#: How often stop() polls a meter for that reading, per update period of the meter.
STOP_POLLS_PER_PERIOD = 10


def hz_for_window(window_s: float, hz: float = DEFAULT_SAMPLER_HZ, max_hz: float = 100.0) -> float:
    """A rate (Hz) that puts at least 60 samples in a window of ``window_s`` s, when ``max_hz`` allows.

    Never below ``hz`` (default 10 Hz) nor above ``max_hz`` (sensor reads cost time; INA3221 rails
    update about every 1-10 ms). Unknown or non-positive windows keep ``hz``.
    """
    if not window_s or window_s <= 0:
        return float(hz)
    return float(min(max(hz, MIN_SAMPLES_PER_WINDOW / window_s), max(hz, max_hz)))


def _checked_hz(hz: object) -> float:
    return checked_number(hz, "hz", low=MIN_SAMPLER_HZ, high=MAX_SAMPLER_HZ, low_inclusive=True,
                          hint=" samples per second (MLPerf Power asks for at least 1 Hz)")


class PowerSampler:
    """Sample ``meter`` every ``1/hz`` s on a daemon thread (default 10 Hz).

    Each sample is stamped with the time the meter took its reading (:meth:`PowerMeter.read_timed_power_w`),
    and a reading polled again is not recorded twice. ``start()`` takes the first sample before it returns
    and ``stop()`` a last one taken after it was called, so any window between the two calls is bracketed
    by samples. A failed read is stored as NaN (unknown), never 0.
    Where the meter has a hardware energy counter (:meth:`PowerMeter.read_energy_j`), each sample reads it
    too, and the trace integrates energy from it.
    Use as a context manager; the trace is then in ``sampler.trace``.
    """

    def __init__(self, meter: PowerMeter, hz: float = DEFAULT_SAMPLER_HZ) -> None:
        self.meter = meter
        self.hz = _checked_hz(hz)
        self.trace: PowerTrace | None = None
        self._times_s: list[float] = []
        self._powers_w: list[float] = []
        self._energies_j: list[float] = []
        self._errors = 0
        self._last_error: str | None = None
        self._last_taken: float | None = None  # time of the last reading the meter stamped itself (s)
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by set_rate() and stop(): the thread stops waiting at once
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def set_rate(self, hz: float) -> None:
        """Change the sampling rate (Hz), also while running: the next sample comes within ``1/hz`` s (or
        sooner, when the old rate had one due earlier) and the ones after it every ``1/hz`` s."""
        self.hz = _checked_hz(hz)
        self._wake.set()  # after the new rate is in place, so that the woken thread reads it

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _sample(self) -> float | None:
        """Read the meter once and record the reading at the time it was taken (s); None when it is the
        reading recorded last (one tegrastats line polled twice is one sample, not two at two times)."""
        t_before = time.perf_counter()
        taken: float | None = None
        try:
            taken, p = self.meter.read_timed_power_w()
            p = float(p)
            if not np.isfinite(p) or p < 0:
                raise ValueError(f"reading {p!r} W is not a finite non-negative power")
            if taken is not None and not taken <= time.perf_counter():  # NaN fails too
                raise ValueError(f"reading taken at time {taken!r} s, not a time up to now ({t_before:.6f} s)")
        except Exception as err:  # any sensor failure is an unknown sample, never a crash or a 0
            p, taken = float("nan"), None
            self._errors += 1
            self._last_error = f"{type(err).__name__}: {err}"
        if taken is not None and self._last_taken is not None and taken <= self._last_taken:
            return None
        e = self._read_counter_j()
        # A synchronous read happened somewhere between the two clock reads; the midpoint is the best estimate.
        t = (t_before + time.perf_counter()) / 2.0 if taken is None else float(taken)
        with self._lock:
            if taken is not None:
                self._last_taken = t
            self._times_s.append(t)
            self._powers_w.append(p)
            self._energies_j.append(e)
        return t

    def _sample_after(self, t_s: float) -> None:
        """Sample until a reading taken at or after ``t_s`` (perf_counter s) is recorded, so that a window
        ending at ``t_s`` is bracketed although the meter's latest reading is older; a meter that brings
        none within :data:`GAP_PERIODS` of its update periods (at least :data:`STOP_WAIT_MIN_S`) is left
        with what it had, as a gap."""
        period = 1.0 / (self.meter.update_hz or self.hz)
        deadline = t_s + max(GAP_PERIODS * period, STOP_WAIT_MIN_S)
        while True:
            t = self._sample()
            if (t is not None and t >= t_s) or time.perf_counter() > deadline:
                return
            time.sleep(period / STOP_POLLS_PER_PERIOD)

    def _read_counter_j(self) -> float:
        """The meter's energy counter (J), NaN where it has none or the read failed (energy then comes from
        the sampled power)."""
        try:
            e = self.meter.read_energy_j()
        except Exception:  # a counter that fails leaves the sampled power, which carries its own errors
            return float("nan")
        return float("nan") if e is None or not np.isfinite(e) else float(e)

    def _run(self) -> None:
        next_t = time.perf_counter() + 1.0 / self.hz
        while True:
            self._wake.wait(max(0.0, next_t - time.perf_counter()))
            if self._stop.is_set():
                return
            if self._wake.is_set():
                # set_rate(): a tick still waited for at the old period would open a short window late.
                self._wake.clear()
                next_t = min(next_t, time.perf_counter() + 1.0 / self.hz)
                continue
            self._sample()
            period = 1.0 / self.hz  # read each tick: set_rate() may change it mid-run
            next_t += period
            now = time.perf_counter()
            if next_t < now:  # a slow read: skip the missed ticks instead of bursting to catch up
                next_t = now + period

    def start(self) -> PowerSampler:
        """Start sampling (no thread for an unavailable meter: its trace stays empty)."""
        if self.running:
            raise RuntimeError("PowerSampler already running")
        self._times_s, self._powers_w, self._energies_j, self._errors, self._last_error = [], [], [], 0, None
        self._last_taken = None
        self._stop.clear()
        self._wake.clear()
        self.trace = None
        if self.meter.available:
            self._sample()
            self._thread = threading.Thread(target=self._run, name="jetpredict-power-sampler", daemon=True)
            self._thread.start()
        return self

    def snapshot(self) -> PowerTrace:
        """The samples so far, without stopping."""
        with self._lock:
            times_s, powers_w, energies_j = list(self._times_s), list(self._powers_w), np.array(self._energies_j)
        counter_j = energies_j if np.isfinite(energies_j).any() else None
        return PowerTrace(np.array(times_s), np.array(powers_w), meter_name=self.meter.name,
                          domain=self.meter.domain, hz=self.hz, read_errors=self._errors,
                          last_error=self._last_error, energy_counter_j=counter_j)

    def stop(self) -> PowerTrace:
        """Stop sampling (after one last sample) and return the trace."""
        if self._thread is not None:
            self._stop.set()
            self._wake.set()
            t_stop = time.perf_counter()
            self._thread.join()
            self._thread = None
            self._sample_after(t_stop)
        self.trace = self.snapshot()
        return self.trace

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
