"""The twin's :class:`~profiler.runner.ModeRunner`: one mode measured in simulated time.

Same steps and result as the real-time runner (settle, idle power, warm-up, measured minibatches ->
:class:`~profiler.runner.ModeRun`), so the campaign and :func:`profiler.runner.aggregate_row` treat real
and simulated runs alike. Nothing sleeps: the simulated clock advances, and the meter replays the
device's power timeline at the sampler's rate.
"""

from __future__ import annotations

from jetpredict.models.catalogue import PowerMode
from jetpredict.profiler.runner import (
    MEASURE_PHASE,
    WARMUP_PHASE,
    MinibatchCallback,
    ModeRun,
    ModeRunner,
    RunSettings,
    measured_window_hz,
    meter_label,
    run_minibatches,
)
from jetpredict.profiler.sim.backend import SimulatedBackend
from jetpredict.profiler.sim.meter import SimulatedPowerMeter


class SimulatedRunner(ModeRunner):
    """Runs :class:`SimulatedBackend` minibatches on the simulated clock; ``meter`` None = no sensor."""

    source = "simulated"

    def __init__(self, backend: SimulatedBackend, meter: SimulatedPowerMeter | None) -> None:
        self.backend = backend
        self.meter = meter

    def now_s(self) -> float:
        return self.backend.state.clock.now()

    def started_utc(self) -> None:
        # Simulated time has no wall-clock start; leaving it out keeps a seeded profile byte-identical.
        return None

    def run_mode(self, mode: PowerMode | None, settings: RunSettings,
                 on_minibatch: MinibatchCallback | None = None) -> ModeRun:
        s, backend, meter = settings, self.backend, self.meter
        clock, timeline = backend.state.clock, backend.state.timeline
        timeline.prune_before(clock.now())
        has_meter = meter is not None and meter.available
        # A row's preset runs with its gating whatever object carries the label, as nvpmodel runs it by name;
        # a custom mode at the device's steps, as the controller switched it.
        mode = backend.state.device.runs_at(mode) if mode is not None else backend.state.mode
        idle_w = backend.physics.base_power_w(mode).item()
        run = ModeRun(warmup=[], measured=[], power_meter=meter_label(meter),
                      cpu_power_meter="none: the digital twin does not simulate CPU-package energy")
        t_start = clock.now()
        for seconds in (s.settle_s, s.idle_s if has_meter else 0.0):
            t0 = clock.now()
            timeline.add(t0, clock.advance(seconds), idle_w)
        if has_meter and s.idle_s > 0:
            run.idle_window_s = (t_start + s.settle_s, clock.now())
        backend.prepare(mode)
        run.cpu_s_per_sample = backend.cpu_s_per_sample()
        run_minibatches(backend, WARMUP_PHASE, s.warmup, run.warmup, on_minibatch, mode=mode)
        run_minibatches(backend, MEASURE_PHASE, s.minibatches, run.measured, on_minibatch, mode=mode)
        if has_meter:
            assert meter is not None
            run.trace = meter.trace(t_start, clock.now(), measured_window_hz(run.warmup, s.minibatches, s.hz))
        return run
