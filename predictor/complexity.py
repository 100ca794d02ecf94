"""The workload's complexity as its rows carry it (``flops_train`` per sample ...): the lower bound its FLOPs
set on the GPU term, and the record a model keeps."""

from __future__ import annotations

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import Device
from jetpredict.predictor.terms import ProfileArrays

#: The complexity columns a fitted model records from its rows (per training sample): ``flops_train`` FLOP
#: (forward + backward), ``params`` count, ``param_bytes`` B; three of the profiler's
#: (``profiler.runner.PROFILE_COMPLEXITY_COLUMNS``). The fit reads ``flops_train`` only (:func:`gpu_floor`).
RECORDED_COMPLEXITY_COLUMNS: tuple[str, ...] = ("flops_train", "params", "param_bytes")


def gpu_floor(rows: ProfileArrays, device: Device) -> float:
    """Lower bound (s x GHz) of the GPU term from the rows' ``flops_train`` (FLOP per training sample):
    an epoch's FLOPs at the GPU's FP32 peak. 0 when the rows do not carry the complexity, or when it
    needs more time at some profiled mode than the whole epoch took there: then the counts bound nothing
    (FLOPs off by a unit, or math faster than the FP32 peak).

    Physics only (100% of peak, nothing tuned): it rules out a GPU share below what the FLOPs need, so a
    heavy network's rows cannot be read as CPU bound, and leaves light networks to their rows and prior.
    """
    with np.errstate(over="ignore"):  # absurd cells overflow to inf, which the filter below drops
        flops = rows.flops_train * rows.samples_per_epoch
    flops = flops[np.isfinite(flops) & (flops > 0)]
    if not flops.size:
        return 0.0
    floor = float(np.median(flops) / float(device.peak_fp32_flops(1000.0)))
    return floor if np.all(floor * 1000.0 / rows.modes.gpu_throughput_mhz <= rows.epoch_time_s) else 0.0


def complexity_of(rows: pd.DataFrame) -> dict[str, float]:
    """The :data:`RECORDED_COMPLEXITY_COLUMNS` the rows carry (median over rows), for the record."""
    out = {}
    for col in RECORDED_COMPLEXITY_COLUMNS:
        if col in rows.columns:
            v = pd.to_numeric(rows[col], errors="coerce").to_numpy(float)
            v = v[np.isfinite(v)]
            if v.size:
                out[col] = float(np.median(v))
    return out
