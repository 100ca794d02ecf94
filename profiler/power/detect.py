"""Pick the best power meter available: INA3221 sysfs, then tegrastats, then NVML, else a null meter."""

from __future__ import annotations

import logging

from jetpredict.profiler.power.base import NullPowerMeter, PowerMeter
from jetpredict.profiler.power.ina3221 import Ina3221Meter
from jetpredict.profiler.power.nvml import NvmlMeter
from jetpredict.profiler.power.rapl import RaplMeter
from jetpredict.profiler.power.tegrastats import TegrastatsMeter
from jetpredict.profiler.power_defaults import NO_SENSOR_REASON

log = logging.getLogger(__name__)


def _gpu_index(device_id: str | None) -> int | None:
    """``cuda``/``cuda:N``/``gpuN`` → N; anything else (a catalogue id, ``host``) → None."""
    if not device_id:
        return None
    d = device_id.strip().lower()
    for prefix in ("cuda:", "gpu"):
        if d.startswith(prefix) and d[len(prefix):].isdigit():
            return int(d[len(prefix):])
    return 0 if d == "cuda" else None


def detect_power_meter(device_id: str | None = None, tegrastats_interval_ms: int = 100) -> PowerMeter:
    """The best available meter of the training device's power.

    ``device_id`` is a catalogue id (``orin-nx``: picks that board's rail rule), a CUDA device
    (``cuda:1``: that GPU through NVML), ``host`` (CPU training: no GPU meter; CPU package power comes
    from :func:`detect_cpu_package_meter`), or None (recognise the board from its rails, else GPU 0).
    Never raises for missing hardware: returns a null meter whose reason is each candidate's rejection,
    joined by ``; `` (``none: nvml: cannot initialise (...)``; ``no sensor found`` when none was tried);
    the same reasons are in the null meter's ``tried`` list and logged at debug level.
    """
    gpu = _gpu_index(device_id)
    board = None if gpu is not None else device_id
    tried: list[str] = []
    candidates = []
    if gpu is None:
        candidates += [lambda: Ina3221Meter.discover(board),
                       lambda: TegrastatsMeter(interval_ms=tegrastats_interval_ms, board=board)]
    if device_id == "host":
        # Training runs on the CPU: a GPU board's power is not the training device's.
        tried.append("nvml: not used for CPU training (device 'host')")
    else:
        candidates.append(lambda: NvmlMeter(gpu or 0))
    for make in candidates:
        try:
            return make()
        except LookupError as err:
            tried.append(str(err))
            log.debug("power meter rejected: %s", err)
    # The row's power_meter / power_null_reason must say why each candidate failed, not only that none did.
    null = NullPowerMeter("; ".join(tried) or NO_SENSOR_REASON)
    null.tried = tried  # type: ignore[attr-defined]
    return null


def detect_cpu_package_meter() -> PowerMeter:
    """RAPL package power, or a null meter naming why there is none (domain ``cpu_package``)."""
    try:
        return RaplMeter()
    except LookupError as err:
        return NullPowerMeter(str(err).removeprefix("rapl: "), domain="cpu_package")
