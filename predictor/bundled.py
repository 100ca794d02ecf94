"""What ships with the package, and the entry points that default to it.

- :func:`load_reference`: a device's reference (bundled JSON artifact in ``models/fitted/``, else fitted
  from its reference CSV in ``models/reference/``, else derived from another device through physics);
- :func:`fit_workload`: a workload model with the device's bundled reference as the default prior;
- :func:`predict_modes`: predictions on the model's device or, through :mod:`.transfer`, on another one;
- :func:`save_model` / :func:`load_model`: model files as JSON data (:mod:`.artifacts`).
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pandas as pd
from jetpredict.models.catalogue import Device, ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.paths import data_path
from jetpredict.predictor import model as M
from jetpredict.predictor.artifacts import file_sha256, read_artifact, write_artifact
from jetpredict.predictor.provenance import source_of
from jetpredict.predictor.reference import (
    DeviceReference,
    build_reference,
    read_reference_rows,
    read_simulated_rows,
    reference_csvs,
    without_own_sweep,
)
from jetpredict.predictor.serialization import (
    model_from_dict,
    model_to_dict,
    reference_from_dict,
    reference_to_dict,
)
from jetpredict.predictor.terms import check_device
from jetpredict.predictor.transfer import derive_reference, transfer_model

FITTED_DIR = data_path("fitted")
#: Devices to derive a reference from when a device has no sweeps of its own (closest architecture first).
DERIVE_FROM = ("agx-xavier", "orin-agx", "xavier-nx", "nano", "orin-nx", "orin-nano")
REFERENCE_KIND = "device-reference"
MODEL_KIND = "workload-model"


# -- bundled references -----------------------------------------------------------------------------------
def bundled_reference_path(device_id: str, directory: Path | None = None) -> Path:
    return (directory or FITTED_DIR) / f"{device_id}-reference.json"


def save_bundled_reference(ref: DeviceReference, directory: Path | None = None) -> Path:
    """Write a DeviceReference as a bundled JSON artifact; returns its path."""
    path = bundled_reference_path(ref.device_id, directory)
    write_artifact(reference_to_dict(ref), path, REFERENCE_KIND, extra={
        "device_id": ref.device_id, "workloads": list(ref.workloads), "source": ref.source,
        "training_data_sha256": ref.training_sha256})
    return path


def load_bundled_reference(device_id: str, directory: Path | None = None) -> DeviceReference | None:
    """The bundled reference of a device, or None (with a warning when one exists but cannot be used, or
    was fitted on other sweeps than its reference CSV holds now, so the caller refits it in memory)."""
    path = bundled_reference_path(device_id, directory)
    if not path.is_file():
        return None
    try:
        doc, manifest = read_artifact(path, REFERENCE_KIND)
        ref = reference_from_dict(doc, str(path))
    except InputError as exc:
        warnings.warn(f"bundled reference of {device_id}: {exc.message}; refitting it in memory",
                      RuntimeWarning, stacklevel=2)
        return None
    csvs = reference_csvs(device_id)
    if csvs and manifest.get("training_data_sha256") != file_sha256(csvs[0]):
        warnings.warn(f"bundled reference of {device_id} was fitted on other reference sweeps than "
                      f"models/reference holds now; refitting it in memory", RuntimeWarning, stacklevel=2)
        return None
    return ref


@cache
def _reference(device_id: str) -> DeviceReference:
    ref = load_bundled_reference(device_id)
    if ref is not None:
        return ref
    rows = read_reference_rows(device_id)
    if rows is not None:
        return build_reference(rows, device_id)
    for other in DERIVE_FROM:
        if other != device_id and reference_csvs(other):
            return derive_reference(_reference(other), load_device(device_id))
    raise InputError(f"no reference sweeps for device {device_id!r} or any other device", "device")


def load_reference(device: Device) -> DeviceReference:
    """The device-level model of ``device`` (cached per device)."""
    return _reference(device.id)


def reference_derivations(*device_ids: str) -> list[DeviceReference]:
    """The bundled references of ``device_ids`` that are derived from another board's (a board without
    reference sweeps of its own, ``bundled.DERIVE_FROM``), each once."""
    refs = [load_reference(load_device(d)) for d in dict.fromkeys(device_ids)]
    return [r for r in refs if r.derived_from is not None]


def derivation_words(refs: Iterable[DeviceReference]) -> str:
    """`` (tx2's derived from agx-xavier's through device physics: no sweeps of its own)`` for the derived
    ones of ``refs``, "" for none: their ``reference_source`` is the source board's (``published``), which alone
    read as the board's own published sweeps."""
    said = [f"{r.device_id}'s derived from {r.derived_from}'s through device physics" for r in refs
            if r.derived_from is not None]
    return f" ({'; '.join(said)}: no sweeps of its own)" if said else ""


@cache
def _shared(device_id: str) -> DeviceReference | None:
    ref = _reference(device_id)
    if ref.transfer is not None:
        return ref.transfer
    if ref.derived_from is None and ref.source == "simulated" and ref.workload_anchor_s:
        return ref
    rows = read_simulated_rows(device_id)
    if rows is not None:
        return build_reference(rows, device_id)
    return ref if ref.derived_from is None and ref.workload_anchor_s else None


def shared_reference(device: Device) -> DeviceReference | None:
    """Sweeps of the workloads every device shares (the simulated ones) on ``device``, which
    cross-device transfer compares between devices (cached); None for a physics-derived reference."""
    return _shared(device.id)


# -- workload models --------------------------------------------------------------------------------------
def fit_workload(rows: pd.DataFrame, device: Device | None = None,
                 reference: DeviceReference | pd.DataFrame | None = None) -> M.WorkloadModel:
    """Fit one workload's profile rows; ``reference`` defaults to the bundled reference of their device.

    ``reference``: your own reference sweeps (profile rows of other workloads on the same device; without
    power readings they take the bundled reference's power model) or a fitted :class:`DeviceReference`.
    InputError for mixed devices/workloads, ``host`` rows, unknown
    devices or unusable rows.
    """
    resolved, _ = check_device(rows, device)
    prior = prior_reference(rows, resolved, reference)[0]
    # Your sweeps timed without a power meter take the bundled reference's power model, as rows do.
    power_from = load_reference(resolved) if isinstance(prior, pd.DataFrame) else None
    return M.fit_with_reference(rows, prior, resolved, power_from)


def prior_reference(rows: pd.DataFrame, device: Device, reference: DeviceReference | pd.DataFrame | None = None
                    ) -> tuple[DeviceReference | pd.DataFrame, bool]:
    """The reference a fit of ``rows`` takes its prior from (``reference``, the device's bundled one by
    default) and whether it leaves the rows' own workload's sweep out (``reference.without_own_sweep``) [E8].
    Sweeps given as rows are filtered where they are fitted (``model.fit_with_reference``)."""
    workloads = rows["workload"].unique() if "workload" in rows.columns else ()
    if len(workloads) != 1:  # the fit names the problem
        return (load_reference(device) if reference is None else reference), False
    workload, kind = str(workloads[0]), source_of(rows)
    if isinstance(reference, pd.DataFrame):
        return reference, len(without_own_sweep(reference, workload, kind)) < len(reference)
    if reference is not None:
        return reference, False
    bundled = load_reference(device)
    # Only the reference's own workloads can be left out: the cache stays bounded by them.
    without = _reference_without(device.id, workload, kind) if workload in bundled.workload_shapes else None
    return (bundled, False) if without is None else (without, True)


@cache
def _reference_without(device_id: str, workload: str, kind: str) -> DeviceReference | None:
    """The device's bundled reference refitted without ``workload``'s own sweep (``without_own_sweep``);
    None when it keeps that sweep or has no sweeps of its own (derived through physics)."""
    rows = read_reference_rows(device_id)
    if rows is None:
        return None
    others = without_own_sweep(rows, workload, kind)
    return None if len(others) == len(rows) else build_reference(others, device_id)


_transfers: weakref.WeakKeyDictionary[M.WorkloadModel, dict[str, M.WorkloadModel]] = weakref.WeakKeyDictionary()
_transfers_lock = threading.Lock()


def on_device(model: M.WorkloadModel, device: Device | None) -> M.WorkloadModel:
    """``model`` itself for its own device (or None), else the model moved to ``device`` (cached while
    ``model`` lives; cross-device, wider intervals)."""
    if device is None or device.id == model.device_id:
        return model
    with _transfers_lock:
        hit = _transfers.get(model, {}).get(device.id)
    if hit is not None:
        return hit
    moved = transfer_model(model, device, load_reference(device), shared_reference(model.device),
                           shared_reference(device))
    with _transfers_lock:
        _transfers.setdefault(model, {})[device.id] = moved
    return moved


def predict_modes(model: M.WorkloadModel, modes: ModeArrays, device: Device | None = None,
            confidence: float = M.DEFAULT_CONFIDENCE) -> M.Prediction:
    """Predictions of ``modes`` on ``device`` (default the model's own; another one is cross-device)."""
    return on_device(model, device).predict(modes, confidence)


def save_model(model: M.WorkloadModel, path: str | Path) -> None:
    """Write ``model`` as JSON to ``path`` (any extension) plus its manifest ``PATH.json``."""
    write_artifact(model_to_dict(model), path, MODEL_KIND, extra={
        "device_id": model.device_id, "workload_id": model.workload_id,
        "reference_source": model.reference_source, "profiled_modes": model.profiled_modes,
        "model_version": model.model_version})


def load_model(path: str | Path) -> M.WorkloadModel:
    """Load a model file written by :func:`save_model`; InputError for anything else (never unpickles),
    a manifest that disagrees with its file included (``artifacts.MANIFEST_MATCHES``)."""
    doc, _ = read_artifact(path, MODEL_KIND)
    return model_from_dict(doc, str(path))
