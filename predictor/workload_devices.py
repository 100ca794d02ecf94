"""One workload on several device types: a fitted model per device it has rows of, and which serves a device.

A stored workload may hold rows of several Jetson types (a federated fleet profiles one model on each of
its boards). Each device type with rows of its own gets its own fitted :class:`~predictor.model.WorkloadModel`;
a device without rows is served by moving one of those models across (:mod:`predictor.transfer`). The
source is a device with real rows (published or measured) before one with rows of the digital twin, then
the one whose moved model is the most certain on the target: the narrowest mean relative epoch-time
interval over the target's nvpmodel presets, which already accounts for how many modes were profiled,
whether power was measured and how the transfer was made (reference workloads or physics).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from threading import Lock

import numpy as np
from jetpredict.models.catalogue import Device, ModeArrays, resolve_device
from jetpredict.models.errors import InputError
from jetpredict.predictor import bundled
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE
from jetpredict.predictor.model import WorkloadModel
from jetpredict.predictor.provenance import workload_source
from jetpredict.predictor.space import space_ready


@dataclass(frozen=True)
class Served:
    """The model that serves a device: ``model`` is fitted on ``rows_device``'s rows; ``own`` is True when
    that is the device asked for (else the prediction is cross-device, transferred from ``rows_device``)."""

    model: WorkloadModel
    rows_device: str
    own: bool


@dataclass(eq=False)
class DeviceModels:
    """A workload's fitted models, one per device type it holds rows of (``{device id: model}``).

    ``primary``: the device of the workload's first rows, the default target when a request names none.
    """

    models: Mapping[str, WorkloadModel]
    primary: str
    _sources: dict[str, str] = field(default_factory=dict, repr=False)
    _lock: Lock = field(default_factory=Lock, repr=False)

    def __post_init__(self) -> None:
        if not self.models:
            raise InputError("a workload needs rows of at least one device", "rows")
        if self.primary not in self.models:
            raise InputError(f"primary device {self.primary!r} has no model; devices: "
                             f"{', '.join(self.devices)}", "device")

    @classmethod
    def single(cls, model: WorkloadModel) -> DeviceModels:
        """The models of a workload with rows of one device."""
        return cls({model.device_id: model}, model.device_id)

    @property
    def devices(self) -> tuple[str, ...]:
        """Device ids with rows of their own, sorted."""
        return tuple(sorted(self.models))

    def source_for(self, target: Device) -> str:
        """The device whose rows serve ``target``: itself if it has rows, else the best other (cached)."""
        if target.id in self.models:
            return target.id
        with self._lock:
            hit = self._sources.get(target.id)
        if hit is None:
            hit = best_source(self.models, target)
            with self._lock:
                self._sources[target.id] = hit
        return hit

    def serve(self, device: Device | None = None) -> Served:
        """The model for ``device`` (default: the primary device) and where its rows come from."""
        if device is None:
            return Served(self.models[self.primary], self.primary, True)
        source = self.source_for(device)
        return Served(self.models[source], source, source == device.id)


#: Decimals of a relative width that :func:`best_source` compares: 1e-9 is far below any width that matters.
WIDTH_DECIMALS = 9


def transfer_uncertainty(model: WorkloadModel, target: Device,
                         confidence: float = DEFAULT_CONFIDENCE) -> float:
    """Mean relative width (high/low - 1, a ratio) of the epoch-time interval of ``model`` moved to
    ``target``, over ``target``'s presets: the lower, the more the moved model can be trusted there."""
    presets = ModeArrays.from_modes(target.presets)
    pred = bundled.predict_modes(model, presets, target, confidence)
    return float(np.mean(pred.epoch_time_s_high / pred.epoch_time_s_low - 1.0))


def best_source(models: Mapping[str, WorkloadModel], target: Device) -> str:
    """The device of ``models`` to transfer to ``target`` from: real rows before the twin's
    (:func:`has_twin_rows`), then least :func:`transfer_uncertainty`; ties to more profiled modes, then to
    the device id (so the choice is stable)."""
    if len(models) == 1:
        return next(iter(models))
    # The twin's rows scatter little, so their intervals are narrow but unchecked (fleet.confidence_note):
    # by width alone they beat real rows of another device.
    real = {device: m for device, m in models.items() if not has_twin_rows(m)} or models
    # Rounded so that widths equal but for float noise tie, and the tie-breaks after them decide.
    scored = sorted((round(transfer_uncertainty(m, target), WIDTH_DECIMALS), -m.profiled_modes, device)
                    for device, m in real.items())
    return scored[0][2]


def has_twin_rows(model: WorkloadModel) -> bool:
    """Whether any of ``model``'s rows come from the digital twin (its ``workload_source`` is ``simulated``)."""
    return workload_source(model) == "simulated"


def spaces_to_compute(models: DeviceModels, device_ids: Iterable[str], confidence: float) -> int:
    """How many of the devices' every-mode predictions (each by the model that serves that device, as a
    fleet plan reads them) are not computed yet."""
    devices = [resolve_device(d) for d in set(device_ids)]
    return sum(not space_ready(models.serve(d).model, d, confidence) for d in devices)
