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
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from jetpredict.models.catalogue import Device, ModeArrays, resolve_device
from jetpredict.predictor.bundled import predict_modes
from jetpredict.predictor.model import DEFAULT_CONFIDENCE, Prediction, WorkloadModel

T = TypeVar("T")

#: (model, device, confidence) entries kept; one AGX Xavier space is ~4 MB of arrays.
MAX_CACHED = 16


class PerModelCache:
    """Values computed once per (fitted model object, device, confidence), least recently used dropped
    beyond ``size``. The model object is the key (held weakly), so a refit -- a new object -- never sees
    an old value; safe across threads (two threads may compute the same value once each)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[int, str, float], tuple[weakref.ref, object]] = OrderedDict()
        self._lock = threading.Lock()

    def _hit(self, model: object, device_id: str, confidence: float) -> tuple[tuple, object] | None:
        """(key, value) of a kept entry of this very model object, else None; call under the lock."""
        key = (id(model), device_id, float(confidence))
        hit = self._entries.get(key)
        return (key, hit[1]) if hit is not None and hit[0]() is model else None

    def peek(self, model: object, device_id: str, confidence: float) -> object | None:
        """The kept value of (``model``, ``device_id``, ``confidence``), else None; nothing computed or moved."""
        with self._lock:
            found = self._hit(model, device_id, confidence)
        return None if found is None else found[1]

    def get(self, model: WorkloadModel, device: Device, confidence: float, compute: Callable[[], T]) -> T:
        """The cached value of (``model``, ``device``, ``confidence``), else ``compute()`` kept."""
        with self._lock:
            found = self._hit(model, device.id, confidence)
            if found is not None:
                self._entries.move_to_end(found[0])
                return found[1]  # type: ignore[return-value]
        key = (id(model), device.id, float(confidence))
        value = compute()
        with self._lock:
            self._entries[key] = (weakref.ref(model), value)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value


_spaces = PerModelCache(MAX_CACHED)


def space_prediction(model: WorkloadModel, device: Device, confidence: float = DEFAULT_CONFIDENCE) -> Prediction:
    """The prediction of every mode of ``device`` (in ``Device.modes()`` order; cross-device when it is
    not the model's)."""
    return _spaces.get(model, device, confidence,
                       lambda: predict_modes(model, ModeArrays.of_device(device), device, confidence))


def kept_prediction(model: WorkloadModel, device: Device, confidence: float) -> Prediction | None:
    """:func:`space_prediction` when it is computed and kept, else None (nothing is computed)."""
    return _spaces.peek(model, device.id, confidence)  # type: ignore[return-value]


def space_ready(model: WorkloadModel, device: Device | str | None, confidence: float) -> bool:
    """Whether :func:`space_prediction` of ``model`` on ``device`` (None: the model's) at ``confidence`` is
    computed and kept: reading it is light work, computing it heavy (~28 ms CPU for AGX Xavier's 29,232 modes,
    ``bench/results/predict_speed.md``)."""
    return kept_prediction(model, resolve_device(model.device_id if device is None else device), confidence) is not None


def catalogue_index(device: Device, modes: ModeArrays) -> np.ndarray | None:
    """Positions in ``Device.modes()`` of ``modes``, or None if any knob is off the catalogue steps or any
    mode is a preset that gates part of the GPU (the space's custom modes power all of it)."""
    if modes.gated.any():
        return None
    lo, hi = device.cpu_cores_range
    axes = (np.arange(lo, hi + 1, dtype=float), np.asarray(device.cpu_steps_mhz),
            np.asarray(device.gpu_steps_mhz), np.asarray(device.emc_steps_mhz))
    index = np.zeros(len(modes), dtype=np.int64)
    for values, steps in zip(modes.arrays(), axes, strict=True):
        pos = np.clip(np.searchsorted(steps, values), 0, len(steps) - 1)
        if not np.array_equal(steps[pos], values):
            return None
        index = index * len(steps) + pos
    return index
