"""The simulated training backend: minibatch timings from the twin, with noise and warm-up, on a
simulated clock; its :meth:`SimulatedBackend.run_mode` is the simulated twin of
:func:`profiler.runner.run_mode` and returns the same :class:`~profiler.runner.ModeRun`, so the row is
made by the shared :func:`profiler.runner.aggregate_row`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from jetpredict.models.catalogue import PowerMode
from jetpredict.models.errors import InputError
from jetpredict.profiler.backends import MinibatchTiming, TrainingBackend
from jetpredict.profiler.runner import (
    DEFAULT_IDLE_S,
    DEFAULT_MINIBATCHES,
    DEFAULT_SAMPLER_HZ,
    DEFAULT_WARMUP,
    ModeRun,
    check_run_arguments,
    measured_window_hz,
)
from jetpredict.profiler.sim.complexity import WorkloadComplexity
from jetpredict.profiler.sim.controller import SimulatedDevice
from jetpredict.profiler.sim.physics import DevicePhysics
from jetpredict.profiler.sim.twin import MinibatchModel, Twin

#: Relative noise (log-normal sigma) of one minibatch's compute and framework time, and of its stall.
TIME_NOISE = 0.02
STALL_NOISE = 0.05
#: Warm-up: minibatch i after a mode switch computes (1 + WARMUP_EXTRA x exp(-i / WARMUP_TAU)) x slower
#: (cuDNN algorithm search, allocator growth, clocks settling).
WARMUP_EXTRA = 1.5
WARMUP_TAU = 1.5


@dataclass(frozen=True)
class SimComplexity:
    """The profile-row complexity columns, from the traced training step (per sample)."""

    macs_fwd: int | None
    params: int
    flops_train: int
    param_bytes: int
    activation_bytes: int | None
    leaf_modules: int | None
    kernel_count: int
    null_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SimulatedBackend(TrainingBackend):
    """Trains nothing: each :meth:`next_minibatch` advances the simulated clock by the twin's minibatch
    time (with seeded noise and warm-up) and records the device's true power for the meter."""

    def __init__(self, state: SimulatedDevice, physics: DevicePhysics, complexity: WorkloadComplexity,
                 batch_size: int | None = None, num_workers: int | None = None, seed: int = 0) -> None:
        batch_size = complexity.batch_size if batch_size is None else int(batch_size)
        num_workers = 4 if num_workers is None else int(num_workers)
        if batch_size < 1:
            raise InputError(f"batch size must be >= 1, got {batch_size}", "batch_size")
        if num_workers < 0:
            raise InputError(f"workers must be >= 0, got {num_workers}", "workers")
        self.state = state
        self.physics = physics
        self.wc = complexity
        self.twin = Twin(physics, complexity)
        self.workload = complexity.workload
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.minibatches_per_epoch = complexity.minibatches_per_epoch(batch_size)
        self._rng = np.random.default_rng([seed, 0])
        self._mb: MinibatchModel | None = None
        self._mode: PowerMode | None = None
        self._count = 0
        self._p_stall = self._p_busy = 0.0

    # -- TrainingBackend
    def prepare(self, mode: PowerMode | None) -> None:
        self._mode = mode or self.state.mode
        assert self._mode is not None
        mb = self.twin.minibatch(self._mode, self.batch_size, self.num_workers)
        self._mb = mb
        self._count = 0
        # Power while the GPU waits on data vs. while it computes, consistent with the mean power.
        total, stall, mean_w = float(mb.total_s[0]), float(mb.stall_s[0]), float(mb.power_w[0])
        self._p_stall = float(self.physics.power_w(self._mode, 0.0, mb.cpu_util, 0.0)[0])
        busy = total - stall
        self._p_busy = (mean_w * total - self._p_stall * stall) / busy if busy > 0 else mean_w

    def next_minibatch(self) -> MinibatchTiming:
        if self._mb is None:
            self.prepare(None)
        mb, i = self._mb, self._count
        assert mb is not None
        self._count += 1
        noise = self._rng.lognormal(0.0, [TIME_NOISE, TIME_NOISE, STALL_NOISE])
        warm = 1.0 + WARMUP_EXTRA * math.exp(-i / WARMUP_TAU)
        compute = float(mb.compute_s[0]) * warm * noise[0]
        overhead = float(mb.overhead_s[0]) * noise[1]
        # The first minibatch after a switch waits for a whole fetch: the workers' queue is empty.
        stall = float(mb.fetch_s[0] if i == 0 and self.num_workers > 0 else mb.stall_s[0]) * noise[2]
        total = stall + compute + overhead
        t0 = self.state.clock.now()
        self.state.timeline.add(t0, t0 + stall, self._p_stall)
        t1 = self.state.clock.advance(total)
        self.state.timeline.add(t0 + stall, t1, self._p_busy)
        return MinibatchTiming(stall_s=stall, compute_s=compute, total_s=total, start_s=t0, end_s=t1)

    def complexity(self) -> SimComplexity:
        b = self.wc.batch_size
        flops = self.wc.kernel_flops(b).sum() / b
        return SimComplexity(
            macs_fwd=None, params=self.wc.params, flops_train=int(flops), param_bytes=self.wc.param_bytes,
            activation_bytes=None, leaf_modules=None, kernel_count=self.wc.kernel_count,
            null_reason="simulated: the twin traces whole training steps (no forward-only MACs, "
                        "activation bytes or module count)")

    def cpu_s_per_sample(self) -> float | None:
        mode = self._mode or self.state.mode
        per_sample = self.wc.data_cpu_s_per_sample + (
            self.wc.decode_mpix_per_sample * self.physics.shared["jpeg_decode_s_per_mpix"])
        return float(per_sample / self.physics.cpu_speed(mode.cpu_mhz))

    def threads(self) -> int | None:
        mode = self._mode or self.state.mode
        return int(mode.cpu_cores)

    def accelerator(self) -> str:
        return "sim"

    # -- the simulated runner.run_mode
    def run_mode(self, mode: PowerMode | None = None, *, warmup: int = DEFAULT_WARMUP,
                 minibatches: int = DEFAULT_MINIBATCHES, meter: Any = None, cpu_meter: Any = None,
                 settle_s: float = 0.0, idle_s: float = DEFAULT_IDLE_S, hz: float = DEFAULT_SAMPLER_HZ,
                 on_minibatch: Callable[[str, int, int], None] | None = None) -> ModeRun:
        """Like :func:`profiler.runner.run_mode`, in simulated time: settle, idle power, warm-up and
        measured minibatches; the power trace is sampled at ``hz`` on the simulated clock."""
        check_run_arguments(warmup, minibatches, settle_s)
        clock, timeline = self.state.clock, self.state.timeline
        timeline.prune_before(clock.now())
        has_meter = meter is not None and meter.available
        idle_w = float(self.physics.base_power_w(mode or self.state.mode))
        run = ModeRun(warmup=[], measured=[],
                      power_meter=meter.name if meter is not None else "none: no sensor found")
        t_start = clock.now()
        for seconds in (settle_s, idle_s if has_meter else 0.0):
            t0 = clock.now()
            timeline.add(t0, clock.advance(seconds), idle_w)
        if has_meter and idle_s > 0:
            run.idle_window_s = (t_start + settle_s, clock.now())
        self.prepare(mode)
        run.cpu_s_per_sample = self.cpu_s_per_sample()
        for phase, n, out in (("warmup", warmup, run.warmup), ("measure", minibatches, run.measured)):
            for i in range(n):
                out.append(self.next_minibatch())
                if on_minibatch:
                    on_minibatch(phase, i + 1, n)
        if has_meter:
            rate = measured_window_hz(run.warmup, minibatches, hz)
            run.trace = meter.trace(t_start, clock.now(), rate) if hasattr(meter, "trace") else None
            if run.trace is None:
                run.notes.append(f"{meter.name} cannot replay simulated time; no power recorded")
        return run
