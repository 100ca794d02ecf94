"""Simulated time and the simulated device's power timeline, shared by the twin's controller, meter and
backend. Nothing here sleeps: simulated seconds pass only when the backend says so."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class SimClock:
    """A clock that starts at ``start_s`` (default 0 s) and advances only by :meth:`advance` /
    :meth:`sleep`. It never reads the machine's clock: with a start that differed per process, the
    rounding of sample times against segment ends would differ too, and one seed would not give one result."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now = float(start_s)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and return the new time."""
        if seconds < 0:
            raise ValueError(f"simulated time cannot go back ({seconds} s)")
        self._now += float(seconds)
        return self._now

    sleep = advance


@dataclass
class PowerTimeline:
    """Piecewise-constant true module power of the simulated device: segments [t0, t1) at ``power_w``."""

    starts_s: list[float] = field(default_factory=list)
    ends_s: list[float] = field(default_factory=list)
    power_w: list[float] = field(default_factory=list)

    def add(self, t0: float, t1: float, power_w: float) -> None:
        if t1 > t0:
            self.starts_s.append(t0)
            self.ends_s.append(t1)
            self.power_w.append(float(power_w))

    def at(self, times_s: np.ndarray, default_w: float) -> np.ndarray:
        """True power at each time (``default_w`` outside every segment, e.g. before the first)."""
        times_s = np.asarray(times_s, dtype=float)
        if not self.starts_s:
            return np.full(times_s.shape, float(default_w))
        starts, ends = np.asarray(self.starts_s), np.asarray(self.ends_s)
        i = np.searchsorted(starts, times_s, side="right") - 1
        inside = (i >= 0) & (times_s < ends[np.clip(i, 0, None)])
        return np.where(inside, np.asarray(self.power_w)[np.clip(i, 0, None)], float(default_w))

    def mean_over(self, starts_s: np.ndarray, ends_s: np.ndarray, default_w: float) -> np.ndarray:
        """Mean true power (W) over each interval ``[starts_s[k], ends_s[k]]`` (``default_w`` outside every
        segment); an empty interval gives the power at its end. Segments must not overlap (the backend and
        runner add them in time order)."""
        starts_s, ends_s = np.asarray(starts_s, dtype=float), np.asarray(ends_s, dtype=float)
        if not self.starts_s:
            return np.full(ends_s.shape, float(default_w))
        seg_t0, seg_t1 = np.asarray(self.starts_s), np.asarray(self.ends_s)
        excess_w = np.asarray(self.power_w) - float(default_w)
        before_j = np.concatenate(([0.0], np.cumsum(excess_w * (seg_t1 - seg_t0))))

        def excess_energy_j(t: np.ndarray) -> np.ndarray:
            """Integral of (power - default) from before the first segment up to ``t`` (J)."""
            i = np.searchsorted(seg_t0, t, side="right") - 1
            k = np.clip(i, 0, None)
            inside = np.clip(t - seg_t0[k], 0.0, seg_t1[k] - seg_t0[k])
            return np.where(i >= 0, before_j[k] + excess_w[k] * inside, 0.0)

        span_s = ends_s - starts_s
        mean_w = float(default_w) + (excess_energy_j(ends_s) - excess_energy_j(starts_s)) / np.where(
            span_s > 0, span_s, 1.0)
        return np.where(span_s > 0, mean_w, self.at(ends_s, default_w))

    def prune_before(self, t_s: float) -> None:
        """Forget segments that ended before ``t_s`` (keeps long campaigns small)."""
        keep = [k for k, e in enumerate(self.ends_s) if e >= t_s]
        self.starts_s = [self.starts_s[k] for k in keep]
        self.ends_s = [self.ends_s[k] for k in keep]
        self.power_w = [self.power_w[k] for k in keep]
