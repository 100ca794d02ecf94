"""Pick the best power meter available: INA3221 sysfs, then tegrastats, then NVML, else a null meter."""

from __future__ import annotations

import logging
from typing import Any

from jetpredict.profiler.power.base import CPU_PACKAGE_DOMAIN, NullPowerMeter, PowerMeter
from jetpredict.profiler.power.ina3221 import Ina3221Meter
from jetpredict.profiler.power.nvml import NvmlMeter
from jetpredict.profiler.power.rapl import RaplMeter
from jetpredict.profiler.power.tegrastats import DEFAULT_INTERVAL_MS, TegrastatsMeter
from jetpredict.profiler.power_defaults import NO_SENSOR_REASON

log = logging.getLogger(__name__)


def _gpu(device_id: str | None) -> dict[str, Any] | None:
    """The NVML meter's keyword arguments for a GPU device: ``cuda``/``cuda:N`` -> ``cuda_device`` (torch's
    numbering), ``gpuN`` -> ``index`` (NVML's); anything else (a catalogue id, ``host``, None) -> None."""
    d = (device_id or "").strip().lower()
    if d == "cuda" or (d.startswith("cuda:") and d[len("cuda:"):].isdigit()):
        return {"cuda_device": d}
    if d.startswith("gpu") and d[len("gpu"):].isdigit():
        return {"index": int(d[len("gpu"):])}
    return None


def detect_power_meter(device_id: str | None = None, tegrastats_interval_ms: int = DEFAULT_INTERVAL_MS) -> PowerMeter:
    """The best available meter of the training device's power.

    ``device_id`` is a catalogue id (``orin-nx``: picks that board's rail rule), a CUDA device as torch
    numbers it (``cuda``, ``cuda:1``: that GPU through NVML, found by its UUID; null power with the reason
    when NVML or torch cannot find it, never another GPU's), an NVML index (``gpu1``), ``host`` (CPU
    training: no GPU meter; CPU package power comes from :func:`detect_cpu_package_meter`), or None
    (recognise the board from its rails, else NVML's GPU 0).
    Never raises for missing hardware: returns a null meter whose reason is each candidate's rejection,
    joined by ``; `` (``none: nvml: cannot initialise (...)``; ``no sensor found`` when none was tried);
    the same reasons are in the null meter's ``tried`` list and logged at debug level.
    """
    gpu = _gpu(device_id)
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
        # No GPU named: NVML's GPU 0, a single-GPU host's.
        candidates.append(lambda: NvmlMeter(**(gpu or {})))
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
        return NullPowerMeter(str(err).removeprefix("rapl: "), domain=CPU_PACKAGE_DOMAIN)
