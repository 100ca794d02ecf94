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

    def prune_before(self, t_s: float) -> None:
        """Forget segments that ended before ``t_s`` (keeps long campaigns small)."""
        keep = [k for k, e in enumerate(self.ends_s) if e >= t_s]
        self.starts_s = [self.starts_s[k] for k in keep]
        self.ends_s = [self.ends_s[k] for k in keep]
        self.power_w = [self.power_w[k] for k in keep]
