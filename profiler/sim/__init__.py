"""The digital twin behind ``--device sim:DEVICE``: a simulated Jetson the profiler drives like a real one.

:func:`campaign_parts` returns the controller, power meter and training backend of one simulated device
(they share a simulated clock: nothing sleeps). A campaign runs each mode with
``backend.run_mode(mode, ...)`` (same arguments and result as :func:`profiler.runner.run_mode`) and
makes the row with the shared :func:`profiler.runner.aggregate_row`; rows say ``source=simulated`` and
``power_meter=sim:DEVICE``. The model itself is :mod:`profiler.sim.twin`; device physics and calibrated
constants live in :mod:`models.physics`. The predictor never imports this package.
"""

from __future__ import annotations

from jetpredict.models.catalogue import Device, load_device
from jetpredict.models.errors import InputError, UnknownWorkloadError
from jetpredict.profiler.sim.backend import SimulatedBackend
from jetpredict.profiler.sim.clock import SimClock
from jetpredict.profiler.sim.complexity import WorkloadComplexity, cached_workloads, load_complexity
from jetpredict.profiler.sim.controller import SimulatedController, SimulatedDevice
from jetpredict.profiler.sim.meter import SimulatedPowerMeter
from jetpredict.profiler.sim.physics import DevicePhysics

__all__ = [
    "SimClock",
    "SimulatedBackend",
    "SimulatedController",
    "SimulatedDevice",
    "SimulatedPowerMeter",
    "campaign_parts",
    "workload_complexity",
]


def workload_complexity(workload: str) -> WorkloadComplexity:
    """Cached complexity of a built-in workload; any other workload is traced on the host (needs torch)."""
    if workload in cached_workloads():
        return load_complexity(workload)
    try:
        from jetpredict.profiler.sim.complexity import measure_workload
    except ImportError:  # pragma: no cover - torch missing
        raise UnknownWorkloadError(f"workload {workload!r} is not cached for the twin and tracing it "
                                   "needs PyTorch (pip install 'jetpredict[profiler]')", "workload") from None
    return measure_workload(workload)


def campaign_parts(device: Device | str, workload: str, *, batch_size: int | None = None,
                   num_workers: int | None = None, data: str | None = None, seed: int = 0,
                   ) -> tuple[SimulatedController, SimulatedPowerMeter, SimulatedBackend]:
    """(controller, meter, backend) of a simulated ``device`` running ``workload``, on one shared clock."""
    if data is not None:
        raise InputError("--data cannot be used with --device sim:DEVICE: the twin uses the workload's "
                         "measured complexity, not a dataset", "data")
    dev = load_device(device) if isinstance(device, str) else device
    physics = DevicePhysics(dev)
    state = SimulatedDevice(dev)
    backend = SimulatedBackend(state, physics, workload_complexity(workload), batch_size, num_workers, seed)
    return SimulatedController(state), SimulatedPowerMeter(state, physics, seed), backend
