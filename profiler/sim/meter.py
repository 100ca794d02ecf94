"""The simulated module power meter: noisy samples of the twin's true power on the simulated clock."""

from __future__ import annotations

import numpy as np
from jetpredict.profiler.power.base import MODULE_DOMAIN, PowerMeter, PowerTrace
from jetpredict.profiler.sim.controller import SimulatedDevice
from jetpredict.profiler.sim.physics import DevicePhysics

#: Relative noise of one power sample (INA3221-class sensors read within ~1-2%).
SAMPLE_POWER_NOISE_REL = 0.015


class SimulatedPowerMeter(PowerMeter):
    """Reads the simulated device's module power (``name`` = ``sim:<device>``, domain ``module``).

    Each reading is the mean power since the previous one (the first: over one sampling period), as a
    sensor that averages over its conversion cycles reports it: an instantaneous reading at exact
    ``t0 + k/hz`` locks to the stall/compute cycle when the minibatch period is near a multiple of half the
    sampling period (docs/digital-twin.md, Limits). :meth:`read_power_w` gives the power at the simulated now;
    :meth:`trace` gives a whole sampled trace over a simulated window (what a sampler thread would have
    recorded at ``hz``).
    """

    domain = MODULE_DOMAIN

    def __init__(self, state: SimulatedDevice, physics: DevicePhysics, seed: int = 0) -> None:
        self.state = state
        self.physics = physics
        self.name = state.label
        self._rng = np.random.default_rng([seed, 1])

    def idle_power_w(self) -> float:
        """True power of the idle device at the mode in force (W)."""
        return self.physics.base_power_w(self.state.mode).item()

    def _noisy(self, true_w: np.ndarray) -> np.ndarray:
        return true_w * (1.0 + SAMPLE_POWER_NOISE_REL * self._rng.standard_normal(true_w.shape))

    def read_power_w(self) -> float:
        now = np.array([self.state.clock.now()])
        return float(self._noisy(self.state.timeline.at(now, self.idle_power_w()))[0])

    def trace(self, t0: float, t1: float, hz: float) -> PowerTrace:
        """Samples every 1/hz s from ``t0`` to ``t1`` (both ends included), on the simulated clock, each the
        mean power since the sample before."""
        times = t0 + np.arange(int(np.floor((t1 - t0) * hz)) + 1) / hz
        if times[-1] < t1:  # the sampler takes a last sample when it stops
            times = np.append(times, t1)
        since = np.concatenate(([t0 - 1.0 / hz], times[:-1]))
        power = self._noisy(self.state.timeline.mean_over(since, times, self.idle_power_w()))
        return PowerTrace(times, power, meter_name=self.name, domain=self.domain, hz=hz)
