"""The digital twin behind ``--device sim:DEVICE``: a simulated Jetson the profiler drives like a real one.

:func:`simulated_rig` returns the controller, power meter, training backend and mode runner of one
simulated device (they share a simulated clock that starts at 0 s: nothing sleeps, and a seed gives the
same numbers in every process). The campaign runs each mode with ``rig.runner`` (a
:class:`~profiler.runner.ModeRunner`, like the real-time one) and makes the row with the shared
:func:`profiler.runner.aggregate_row`; rows say ``source=simulated`` and ``power_meter=sim:DEVICE``.
The model is :mod:`profiler.sim.twin`, the device physics and calibrated constants
:mod:`profiler.sim.physics` (data in ``profiler/sim/data/``). The predictor never imports this package.
"""

from __future__ import annotations

from dataclasses import dataclass

from jetpredict.models.catalogue import Device, resolve_device
from jetpredict.models.errors import InputError, UnknownWorkloadError
from jetpredict.profiler.sim.backend import SimulatedBackend
from jetpredict.profiler.sim.clock import SimClock
from jetpredict.profiler.sim.controller import SimulatedController, SimulatedDevice
from jetpredict.profiler.sim.kernel_costs import WorkloadComplexity, cached_workloads, load_complexity
from jetpredict.profiler.sim.meter import SimulatedPowerMeter
from jetpredict.profiler.sim.physics import DevicePhysics
from jetpredict.profiler.sim.runner import SimulatedRunner

__all__ = [
    "SimClock",
    "SimulatedBackend",
    "SimulatedController",
    "SimulatedDevice",
    "SimulatedPowerMeter",
    "SimulatedRig",
    "SimulatedRunner",
    "simulated_rig",
    "workload_complexity",
]


def workload_complexity(workload: str) -> WorkloadComplexity:
    """Cached complexity of a built-in workload; any other workload is traced on the host (needs torch)."""
    if workload in cached_workloads():
        return load_complexity(workload)
    try:
        from jetpredict.profiler.sim.kernel_costs import measure_workload
    except ImportError:  # pragma: no cover - torch missing
        raise UnknownWorkloadError(f"workload {workload!r} is not cached for the twin and tracing it "
                                   "needs PyTorch (pip install 'jetpredict[profiler]')", "workload") from None
    return measure_workload(workload)


@dataclass(frozen=True)
class SimulatedRig:
    """One simulated device running one workload: all four parts share the device state and its clock."""

    controller: SimulatedController
    meter: SimulatedPowerMeter
    backend: SimulatedBackend
    runner: SimulatedRunner


def simulated_rig(device: Device | str, workload: str, *, batch_size: int | None = None,
                  num_workers: int | None = None, data: str | None = None, seed: int = 0,
                  ) -> SimulatedRig:
    """Controller, meter, backend and runner of a simulated ``device`` running ``workload``."""
    if data is not None:
        raise InputError("--data cannot be used with --device sim:DEVICE: the twin uses the workload's "
                         "measured complexity, not a dataset", "data")
    dev = resolve_device(device)
    physics = DevicePhysics(dev)
    state = SimulatedDevice(dev)
    backend = SimulatedBackend(state, physics, workload_complexity(workload), batch_size, num_workers, seed)
    meter = SimulatedPowerMeter(state, physics, seed)
    return SimulatedRig(SimulatedController(state), meter, backend, SimulatedRunner(backend, meter))
