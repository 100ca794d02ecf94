"""Predictions over a device's whole power-mode space, computed once per fitted model and device.

A service answers many requests against the same fitted workload: predictions of catalogue modes,
``"all"``, recommendations and fleet plans all read the same vectorised all-modes prediction. It is
kept for the most recently used models (the model object is the key, so a refit — a new object —
never sees stale predictions), and a catalogue mode is looked up by its step indices.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np
from jetpredict.models.catalogue import MODE_FIELDS, load_device

#: (model, device) pairs kept; one AGX Xavier space is ~3.5 MB of arrays.
MAX_CACHED = 16

_cache: OrderedDict[tuple[int, str], tuple[weakref.ref, dict[str, np.ndarray]]] = OrderedDict()
_lock = threading.Lock()


def space_prediction(model, device_id: str) -> dict[str, np.ndarray]:
    """``model.predict_arrays`` over every mode of ``device_id`` (in ``Device.modes()`` order)."""
    key = (id(model), device_id)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0]() is model:
            _cache.move_to_end(key)
            return hit[1]
    arrays = load_device(device_id).modes().as_arrays()
    pred = model.predict_arrays(*(arrays[k] for k in MODE_FIELDS), device_id=device_id)
    with _lock:
        _cache[key] = (weakref.ref(model), pred)
        while len(_cache) > MAX_CACHED:
            _cache.popitem(last=False)
    return pred


def catalogue_index(device_id: str, knobs) -> np.ndarray | None:
    """Positions in ``Device.modes()`` of modes given as knob arrays, or None if any knob is off-step."""
    device = load_device(device_id)
    lo, _ = device.cpu_cores_range
    axes = (np.arange(lo, device.cpu_cores_range[1] + 1, dtype=float), np.asarray(device.cpu_steps_mhz),
            np.asarray(device.gpu_steps_mhz), np.asarray(device.emc_steps_mhz))
    index = np.zeros(np.shape(knobs[MODE_FIELDS[0]]), dtype=np.int64)
    for field, steps in zip(MODE_FIELDS, axes, strict=True):
        values = np.asarray(knobs[field], dtype=float)
        pos = np.clip(np.searchsorted(steps, values), 0, len(steps) - 1)
        if not np.array_equal(steps[pos], values):
            return None
        index = index * len(steps) + pos
    return index
