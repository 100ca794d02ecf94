"""The predictor's operations, as the CLI and the HTTP API call them (no Flask, no printing).

- every function here is an entry point: a device given as a catalogue id is resolved once
  (:func:`~jetpredict.models.catalogue.resolve_device`); everything below takes the
  :class:`~jetpredict.models.catalogue.Device`;
- :func:`resolve_modes`: presets, the full space, or a user table of modes, checked against a device;
- :func:`predict`: a fitted workload model on those modes, vectorised, with intervals at a
  ``confidence``, extrapolation flags and provenance columns;
- :func:`recommend`: best mode for an objective with caps met by the interval's upper end, and the
  time/energy Pareto front (:class:`Recommendation`);
- :func:`plan_fleet`: per-client modes of a federated round (:class:`~predictor.fleet.FleetPlan`);
- :func:`plan_profiling`: which modes to profile, how long it takes, which knobs stay extrapolated.

Limits and objectives come from :mod:`predictor.limits`. Bad input raises
:class:`models.errors.InputError` naming the field and the rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import (
    MODE_FIELDS,
    POWER_MODE_SPACES,
    Device,
    ModeArrays,
    load_device,
    mode_label,
    resolve_device,
)
from jetpredict.models.errors import InputError, ModeRowError, ModeRowOutOfRangeError
from jetpredict.models.jsonsafe import json_safe
from jetpredict.models.numbers import is_blank, not_a_number_rule, number_or_nan
from jetpredict.models.profile_files import rows_to_records
from jetpredict.predictor import bundled, checks, fleet, planning, space
from jetpredict.predictor import recommend as rec
from jetpredict.predictor.fit_check import fit_caveats, merged_caveats
from jetpredict.predictor.limits import (
    DEFAULT_CONFIDENCE,
    DIRECT_MODES,
    MAX_MODES,
    MAX_PLAN_BUDGET,
    PROVENANCE_FIELDS,
)
from jetpredict.predictor.model import WorkloadModel
from jetpredict.predictor.provenance import merged_provenance, split_source, workload_source
from jetpredict.predictor.recommend import CONSTANT_COLUMNS
from jetpredict.predictor.workload_devices import DeviceModels

MODE_COLUMNS: tuple[str, ...] = ("mode", *MODE_FIELDS)
#: The named mode sets in words, for errors: "presets", "all".
_SPACES_TEXT = ", ".join(f'"{s}"' for s in POWER_MODE_SPACES)
#: Prediction columns in output order: the profile-row format's first, the power interval after them.
PREDICTION_COLUMNS: tuple[str, ...] = (
    "epoch_time_s", "epoch_time_s_low", "epoch_time_s_high", "avg_power_w",
    "epoch_energy_j", "epoch_energy_j_low", "epoch_energy_j_high", "avg_power_w_low", "avg_power_w_high")
TO_ACCURACY_COLUMNS: tuple[str, ...] = (
    "time_to_accuracy_s", "time_to_accuracy_s_low", "time_to_accuracy_s_high",
    "energy_to_accuracy_j", "energy_to_accuracy_j_low", "energy_to_accuracy_j_high")
#: Per mode: whether any knob lies outside the profiled range, and which (``;``-separated, "" if none).
FLAG_COLUMNS: tuple[str, ...] = ("extrapolated", "extrapolated_knobs")
#: A prediction table's answer-wide columns in output order: the model's provenance before the confidence.
PROVENANCE_COLUMNS: tuple[str, ...] = (*(c for c in CONSTANT_COLUMNS if c != "confidence"), *PROVENANCE_FIELDS,
                                       "confidence")


def _target(model: WorkloadModel, device: Device | str | None) -> Device:
    return resolve_device(model.device_id if device is None else device)


def provenance(model: WorkloadModel, device: Device | str | None = None) -> dict[str, object]:
    """What a prediction of ``model`` on ``device`` rests on: the least trusted reference data used (across
    devices also the other device's sweeps, simulated for all but AGX Xavier), the workload's own rows and
    whether their stall and compute columns were fitted."""
    return {"reference_source": bundled.on_device(model, _target(model, device)).reference_source,
            "workload_source": workload_source(model), "split_source": split_source(model.time_fits),
            "profiled_modes": int(model.profiled_modes), "model_version": model.model_version}


#: One answer row (JSON rows, a recommendation's best and Pareto rows), in output order.
ROW_COLUMNS: tuple[str, ...] = (*MODE_COLUMNS, *PREDICTION_COLUMNS, *TO_ACCURACY_COLUMNS, *FLAG_COLUMNS,
                                *CONSTANT_COLUMNS)


def table_columns(epochs: int | None = None) -> tuple[str, ...]:
    """The columns of :func:`predict`'s table in order (:meth:`PredictionAnswer.frame`), so an empty table
    (``recommend --format csv`` with no mode under the caps) still has its header and provenance."""
    return (*MODE_COLUMNS, *PREDICTION_COLUMNS, *(TO_ACCURACY_COLUMNS if epochs is not None else ()),
            *FLAG_COLUMNS, *PROVENANCE_COLUMNS)


@dataclass(frozen=True)
class ModeTable:
    """Modes checked against a device: ``labels``, ``knobs`` (MODE_FIELDS -> arrays) and ``gpu_share``."""

    labels: Sequence[str]
    knobs: Mapping[str, np.ndarray]
    gpu_share: np.ndarray | float = 1.0

    def __len__(self) -> int:
        return len(self.labels)

    def arrays(self) -> ModeArrays:  # each mode with its powered GPU share
        return ModeArrays(*(self.knobs[k] for k in MODE_FIELDS), gpu_share=self.gpu_share)

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame({k: self.knobs[k] for k in MODE_FIELDS})
        df.insert(0, "mode", pd.Series(list(self.labels), dtype=object))
        return df


@lru_cache(maxsize=16)
def _space_table(device_id: str) -> ModeTable:
    """Every mode of a device (``Device.modes()`` order), cached: labels cost ~30 ms on AGX Xavier."""
    modes = load_device(device_id).modes()
    knobs = modes.arrays().columns()
    for a in knobs.values():
        a.setflags(write=False)  # shared by every answer: nobody may change it
    return ModeTable(tuple(modes.labels()), knobs)


@lru_cache(maxsize=16)
def _preset_table(device_id: str) -> ModeTable:
    presets = load_device(device_id).presets
    modes = ModeArrays.from_modes(presets)
    return ModeTable(tuple(p.mode for p in presets), modes.columns(), modes.gpu_share)


def mode_row_label(label: object) -> str:
    """`` (label)`` for a mode's ``mode`` label, or ``""`` when it is blank: the words after ``modes[i]``
    in a mode's error (:class:`models.errors.ModeRowError`), here and in the API's schema."""
    return "" if is_blank(label) else f" ({label})"


def mode_row_problems(device: Device, i: int, shown: str, knobs: Sequence[float | np.ndarray]
                      ) -> dict[str, ModeRowOutOfRangeError]:
    """``{knob: error}`` for each knob of mode ``i`` outside ``device``'s range (empty when all fit).

    ``shown`` is the row's :func:`mode_row_label`; ``knobs`` its values in :data:`MODE_FIELDS` order (the
    knob's unit). Shared by :func:`mode_table` (which raises the first) and the API's schema (which lists all).
    """
    problems = device.out_of_range(*(np.atleast_1d(v) for v in knobs))
    return {name: ModeRowOutOfRangeError(i, f"{shown}: {rule}", f"modes.{i}.{name}")
            for name, rule in problems.items()}


def _checked_modes(device: Device, modes: pd.DataFrame | Sequence[Mapping], fill_labels: bool) -> ModeTable:
    """A user table or list of mode objects, checked: every error names ``modes.<i>.<field>``.

    ``fill_labels``: a mode without a label gets its knob label (``8c-2265.6-1377-2133``) instead of an error.
    """
    if isinstance(modes, pd.DataFrame):
        records: Sequence[Mapping] = modes.to_dict(orient="records")
    else:
        if not isinstance(modes, Sequence) or isinstance(modes, str | bytes):
            raise InputError(f"modes must be {_SPACES_TEXT}, or a list of mode objects", "modes")
        bad = [i for i, m in enumerate(modes) if not isinstance(m, Mapping)]
        if bad:
            raise ModeRowError(bad[0], f": must be an object with {', '.join(MODE_COLUMNS)}", f"modes.{bad[0]}")
        records = modes
    if not records:
        raise InputError("modes is empty: give at least one mode", "modes")
    if len(records) > MAX_MODES:
        raise InputError(f"modes may hold at most {MAX_MODES} rows, got {len(records)}", "modes")
    present = set().union(*(m.keys() for m in records))
    missing = [c for c in (MODE_FIELDS if fill_labels else MODE_COLUMNS) if c not in present]
    if missing:
        raise InputError(f"modes is missing column(s) {', '.join(missing)}; each mode needs "
                         f"{', '.join(MODE_COLUMNS)}", f"modes.{missing[0]}")
    if "device" in present:
        other = sorted({str(m.get("device")) for m in records
                        if not is_blank(m.get("device")) and str(m.get("device")) != device.id})
        if other:
            raise InputError(f"modes are for device {other[0]!r} but the prediction is for {device.id!r}; "
                             f"predict for that device explicitly (cross-device) or drop the rows",
                             "modes.device")
    if not fill_labels:
        for i, m in enumerate(records):
            if is_blank(m.get("mode")):
                raise ModeRowError(i, ": mode is required (a label, e.g. a preset name or 'custom')", f"modes.{i}.mode")
    knobs = {name: np.array([number_or_nan(m.get(name)) for m in records], dtype=float) for name in MODE_FIELDS}
    for name, values in knobs.items():
        bad = ~np.isfinite(values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            rule = not_a_number_rule(records[i].get(name))
            raise ModeRowError(i, f"{mode_row_label(records[i].get('mode'))}: {name} {rule}", f"modes.{i}.{name}")
    if device.out_of_range(*(knobs[f] for f in MODE_FIELDS)):
        # Name the first offending row: check row by row only on this (rare) error path.
        for i in range(len(records)):
            problems = mode_row_problems(device, i, mode_row_label(records[i].get("mode")),
                                         [knobs[f][i] for f in MODE_FIELDS])
            if problems:
                raise next(iter(problems.values()))
    knobs["cpu_cores"] = knobs["cpu_cores"].astype(int)
    labels = [str(m.get("mode")) if not is_blank(m.get("mode"))
              else mode_label(*(knobs[f][i] for f in MODE_FIELDS)) for i, m in enumerate(records)]
    # The device's preset for a label decides the gating: a listed object's own gpu_share is not read.
    return ModeTable(labels, knobs, device.labelled_modes({**knobs, "mode": labels}).gpu_share)



def mode_table(device: Device, modes: str | pd.DataFrame | Sequence[Mapping], fill_labels: bool = False
               ) -> ModeTable:
    """The modes to predict, checked against ``device``: ``"presets"``, ``"all"`` (both cached; callers
    must not modify them) or a table / list of mode objects (other columns ignored)."""
    if isinstance(modes, str):
        if modes == "presets":
            return _preset_table(device.id)
        if modes == "all":
            return _space_table(device.id)
        raise InputError(f"modes must be {_SPACES_TEXT}, or a list of mode objects; got {modes!r}", "modes")
    return _checked_modes(device, modes, fill_labels)


def resolve_modes(device: Device | str, modes: str | pd.DataFrame | Sequence[Mapping] = "presets"
                  ) -> pd.DataFrame:
    """The modes to predict as a table ``mode, cpu_cores, cpu_mhz, gpu_mhz, emc_mhz``.

    ``modes`` is ``"presets"``, ``"all"`` (every mode of the device) or a table / list of mode objects
    (other columns ignored). Knobs may take any value inside the device's range.
    """
    return mode_table(resolve_device(device), modes).frame()


# -- the model seam: every prediction the service makes goes through these two functions ----------------
def predict_knobs(model: WorkloadModel, modes: ModeArrays, device: Device, confidence: float
                  ) -> dict[str, object]:
    """Predictions at modes already checked against ``device``: every :class:`Prediction` column and
    ``extrapolated`` as arrays, ``confidence``, ``cross_device`` and ``power_source`` as scalars."""
    kept = space.kept_prediction(model, device, confidence)
    # Short before the space is computed, or off the catalogue steps (nvpmodel caps): predicted directly.
    index = None if kept is None and len(modes) <= DIRECT_MODES else space.catalogue_index(device, modes)
    if index is None:
        return bundled.predict_modes(model, modes, device, confidence).columns()
    return (space.space_prediction(model, device, confidence) if kept is None else kept).take(index).columns()


def predict_space(model: WorkloadModel, device: Device, confidence: float) -> dict[str, object]:
    """:func:`predict_knobs` over every mode of ``device`` (``Device.modes()`` order), plus the knobs."""
    return {**device.modes().arrays().columns(), **space.space_prediction(model, device, confidence).columns()}


#: Preset columns per (model, device, confidence): presets are the most asked-for modes.
_PRESETS = space.PerModelCache(64)


def _preset_prediction(model: WorkloadModel, device: Device, confidence: float, table: ModeTable
                       ) -> dict[str, object]:
    """:func:`predict_knobs` of the device's presets, kept per fitted model object (arrays read-only,
    shared by every answer)."""
    def compute() -> dict[str, object]:
        pred = predict_knobs(model, table.arrays(), device, confidence)
        for value in pred.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        return pred

    return _PRESETS.get(model, device, confidence, compute)


def predict_presets(model: WorkloadModel, device: Device, confidence: float) -> dict[str, object]:
    """:func:`predict_knobs` of the device's nvpmodel presets (cached per model) with their knobs and their
    names in ``mode``: the presets ``recommend`` chooses from beside the space (their caps are often off
    the catalogue steps)."""
    table = _preset_table(device.id)
    return {**table.knobs, **_preset_prediction(model, device, confidence, table),
            "mode": np.array(table.labels, dtype=object)}


def _json_floats(values: object) -> list[float | None]:
    array = np.asarray(values, dtype=float)
    if np.isfinite(array).all():
        return array.tolist()
    out = array.astype(object)
    out[~np.isfinite(array)] = None
    return out.tolist()


@dataclass(frozen=True, eq=False)
class PredictionAnswer:
    """One prediction answer, as every output form renders it (JSON rows or columns, CSV, Arrow, tables).

    ``columns``: per-mode values (labels, knobs, predictions in s / W / J, to-accuracy with ``epochs``,
    extrapolation flags) in output order; ``constants``: ``cross_device``, ``power_source``, ``confidence``
    (one value per answer); ``provenance``: :data:`PROVENANCE_FIELDS`, then the fit's caveats
    (:func:`~predictor.fit_check.fit_caveats`).
    """

    device: str
    workload_id: str | None
    provenance: Mapping[str, object]
    epochs: int | None
    columns: Mapping[str, object]
    constants: Mapping[str, object]

    @property
    def count(self) -> int:
        return len(self.columns["mode"])  # type: ignore[arg-type]

    def header(self) -> dict[str, object]:
        """The answer's top-level fields: device, workload id, provenance, epochs, count."""
        return {"device": self.device, "workload_id": self.workload_id, **self.provenance,
                "epochs": self.epochs, "count": self.count}

    def one_value_fields(self) -> dict[str, object]:
        """Every field with one value per answer: :attr:`constants`, then :attr:`provenance`."""
        return {**self.constants, **self.provenance}

    def records(self) -> list[dict[str, object]]:
        """JSON-ready rows in :data:`ROW_COLUMNS` order (NaN/inf -> None)."""
        lists: dict[str, list] = {}
        for name, values in self.columns.items():
            array = np.asarray(values)
            lists[name] = _json_floats(array) if array.dtype.kind == "f" else array.tolist()
        names = list(lists)
        constants = dict(self.constants)
        return [{**dict(zip(names, row, strict=True)), **constants}
                for row in zip(*lists.values(), strict=True)]

    def frame(self) -> pd.DataFrame:
        """The table of :func:`predict` (provenance as columns, as ``predict --format csv`` writes it)."""
        n = self.count
        data: dict[str, object] = {"mode": pd.Series(list(self.columns["mode"]), dtype=object)}
        data.update({k: v for k, v in self.columns.items() if k != "mode"})
        one_value = self.one_value_fields()
        data.update({c: one_value[c] for c in PROVENANCE_COLUMNS})
        # A copy: the columns may be cached read-only arrays that the caller must be free to change.
        return pd.DataFrame(data, index=pd.RangeIndex(n), copy=True)


def prediction_answer(model: WorkloadModel, modes: str | pd.DataFrame | Sequence[Mapping] = "presets",
                      device: Device | str | None = None, epochs: int | None = None,
                      confidence: float = DEFAULT_CONFIDENCE, workload_id: str | None = None,
                      fill_labels: bool = False) -> PredictionAnswer:
    """The one prediction pipeline (CLI and HTTP): device resolved once, modes checked once, provenance
    once. ``modes``: ``"presets"``, ``"all"`` or a table / list of mode objects; ``fill_labels``: modes
    without a label get their knob label. See :func:`predict` for ``device``, ``epochs``, ``confidence``."""
    target = _target(model, device)
    epochs = checks.check_epochs(epochs)
    confidence = checks.check_confidence(confidence)
    table = mode_table(target, modes, fill_labels)
    if isinstance(modes, str) and modes == "all":
        pred = space.space_prediction(model, target, confidence).columns()
    elif isinstance(modes, str):  # presets: off the catalogue steps, so predicted, once per model
        pred = _preset_prediction(model, target, confidence, table)
    else:
        pred = predict_knobs(model, table.arrays(), target, confidence)
    columns: dict[str, object] = {"mode": table.labels, **table.knobs}
    columns.update({c: pred[c] for c in PREDICTION_COLUMNS})
    if epochs is not None:
        columns.update(rec.to_accuracy(columns, epochs, target.id))
    columns.update({c: pred[c] for c in FLAG_COLUMNS})
    # The fit's caveats too, as `jetpredict fit` says them: a client sending inline rows hears them only here.
    return PredictionAnswer(device=target.id, workload_id=workload_id,
                            provenance={**provenance(model, target), **fit_caveats(model)},
                            epochs=epochs, columns=columns,
                            constants={c: pred[c] for c in CONSTANT_COLUMNS})


# -- operations -------------------------------------------------------------------------------------------
def predict(model: WorkloadModel, modes: str | pd.DataFrame | Sequence[Mapping] = "presets",
            device: Device | str | None = None, epochs: int | None = None,
            confidence: float = DEFAULT_CONFIDENCE) -> pd.DataFrame:
    """Predicted epoch time (s), mean power (W) and energy (J) with ``confidence`` intervals, per mode.

    ``device`` other than the model's gives cross-device predictions; the modes are checked against
    the target device, so a model refuses another device's modes unless asked for that device.
    With ``epochs``, adds time/energy to accuracy (see :func:`predictor.recommend.to_accuracy`).
    """
    return prediction_answer(model, modes, device, epochs, confidence).frame()


def records(df: pd.DataFrame) -> list[dict]:
    """Rows of a prediction table as JSON-ready dicts (NaN -> None; no knob flagged -> "")."""
    out = rows_to_records(df)
    if "extrapolated_knobs" in df.columns:
        for row in out:
            row["extrapolated_knobs"] = row["extrapolated_knobs"] or ""
    return out


@dataclass(frozen=True)
class Recommendation:
    """Best mode and the time/energy Pareto front under limits; rows are prediction-table rows (dicts).
    The front is over the modes ``best`` is chosen from (:func:`predictor.recommend.choose`): ``best`` is on it.

    ``best`` is None when no mode meets the limits (``reason`` says why). ``preferred_in_range``: the
    best-looking mode lay outside the profiled knob ranges and not better beyond its interval, so an
    in-range mode (or one better than those beyond its interval) was chosen instead.
    """

    device: str
    objective: str
    confidence: float
    constraints: dict
    modes_considered: int
    feasible: bool
    reason: str | None
    best: dict | None
    pareto: list[dict]
    preferred_in_range: bool
    #: The best nvpmodel preset meeting the same limits and the chosen mode's saving against it
    #: (:func:`predictor.recommend.preset_comparison`); ``preferred_preset``: that preset is ``best``.
    preset_comparison: dict | None = None
    preferred_preset: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def recommendation_answer(model: WorkloadModel, result: Recommendation, workload_id: str | None = None) -> dict:
    """``POST /v1/recommendations``'s answer, and what ``recommend --format json`` prints: a :func:`recommend`
    ``result``, the same fields in both (provenance at the top, rows of :data:`ROW_COLUMNS`; caps that were
    set)."""

    def row(r: dict | None) -> dict | None:
        return None if r is None else {k: r[k] for k in ROW_COLUMNS if k in r}

    # The rows it rests on: the model's device's (the HTTP service names every device of a stored workload).
    return {"device": result.device, "workload_id": workload_id, **provenance(model, result.device),
            **fit_caveats(model),
            "workload_devices": [model.device_id], "rows_device": model.device_id, "revision": None,
            "objective": result.objective,
            "constraints": {k: v for k, v in result.constraints.items() if v is not None},
            "confidence": result.confidence, "modes_considered": result.modes_considered,
            "feasible": result.feasible, "reason": result.reason,
            "preferred_in_range": result.preferred_in_range, "preferred_preset": result.preferred_preset,
            "preset_comparison": result.preset_comparison,
            "best": row(result.best), "pareto": [row(r) for r in result.pareto]}


def recommend(model: WorkloadModel, objective: str, max_power_w: float | None = None,
              max_epoch_time_s: float | None = None, device: Device | str | None = None,
              epochs: int | None = None, confidence: float = DEFAULT_CONFIDENCE) -> Recommendation:
    """Best mode over the device's full space for ``min-time`` or ``min-energy`` under the limits.

    A mode meets ``max_power_w`` (W) when the upper end of its power interval at ``confidence`` does, and
    ``max_epoch_time_s`` (s) when the upper end of its time interval does; see :mod:`predictor.recommend`
    for the objective and the preference for modes inside the profiled knob ranges.
    """
    objective = checks.check_objective(objective)
    max_power_w = checks.check_limit(max_power_w, "max_power_w")
    max_epoch_time_s = checks.check_limit(max_epoch_time_s, "max_epoch_time_s")
    confidence = checks.check_confidence(confidence)
    target = _target(model, device)
    # A cap above all the module can draw is a unit mistake (mW), not "no cap": one check, CLI and HTTP.
    max_power_w = target.check_power_cap(max_power_w, "max_power_w")
    space_df = predict(model, "all", device=target, epochs=epochs, confidence=confidence)
    # The presets are candidates too, and the answer compares with the best of them (predictor.recommend).
    df, is_preset = rec.with_presets(predict(model, "presets", device=target, epochs=epochs,
                                             confidence=confidence), space_df)
    choice = rec.choose(df, objective, max_power_w, max_epoch_time_s, confidence, is_preset)

    def rows(positions) -> list[dict]:
        return records(df.iloc[np.asarray(positions, dtype=int)])

    best = rows([choice.best])[0] if choice.best is not None else None
    preset = rows([choice.preset])[0] if choice.preset is not None else None
    return Recommendation(
        device=target.id, objective=objective, confidence=confidence,
        constraints={"max_power_w": max_power_w, "max_epoch_time_s": max_epoch_time_s},
        modes_considered=len(space_df), feasible=choice.feasible, reason=choice.reason,
        best=best, pareto=rows(choice.pareto),
        preferred_in_range=choice.preferred_in_range,
        preset_comparison=rec.preset_comparison(best, preset, objective, max_power_w, max_epoch_time_s,
                                                confidence),
        preferred_preset=choice.preferred_preset)


def plan_fleet(model: WorkloadModel | DeviceModels, clients: Sequence[Mapping], deadline_s: float,
               epochs: int = 1, confidence: float = DEFAULT_CONFIDENCE) -> fleet.FleetPlan:
    """Per-client power modes for one federated round; see :mod:`predictor.fleet` for the rule.

    The deadline (s) must hold for the upper end of each client's time interval at ``confidence``.
    ``model``: one model, or a workload's models per device (each client's device is served by its own
    rows where the workload holds them, else transferred: :class:`DeviceModels`).
    """
    deadline_s = checks.check_limit(deadline_s, "deadline_s")
    if deadline_s is None:
        raise InputError("deadline_s is required (s, > 0)", "deadline_s")
    epochs = checks.check_epochs(1 if epochs is None else epochs)
    confidence = checks.check_confidence(confidence)
    models = model if isinstance(model, DeviceModels) else DeviceModels.single(model)
    served_by: list[tuple[WorkloadModel, bool]] = []

    def space_of(device: Device) -> dict[str, object]:
        served = models.serve(device)
        served_by.append((served.model, not served.own))
        presets = {**predict_presets(served.model, device, confidence), "rows_device": served.rows_device}
        return {**predict_space(served.model, device, confidence), "rows_device": served.rows_device,
                "presets": presets}

    plan = fleet.plan_round(space_of, clients, deadline_s, epochs, confidence)
    note = fleet.confidence_note(confidence, [workload_source(m) for m, _ in served_by],
                                 any(c for _, c in served_by))
    return replace(plan, confidence_note=note)


_PLAIN_JSON = (str, int, bool, type(None))


def _json_row(row: Mapping[str, object]) -> dict[str, object]:
    """``json_safe`` of a flat row, with the usual values (text, whole numbers, finite floats) passed as
    they are: a 10,000-client plan has 250,000 of them."""
    return {k: v if type(v) in _PLAIN_JSON or (type(v) is float and math.isfinite(v)) else json_safe(v)
            for k, v in row.items()}


def device_provenance(model: WorkloadModel | DeviceModels, devices: Sequence[str]) -> dict[str, dict[str, object]]:
    """Per client device (id): :func:`provenance` and :func:`~predictor.fit_check.fit_caveats` of the model that
    serves it (its own rows, else a transfer)."""
    models = model if isinstance(model, DeviceModels) else DeviceModels.single(model)
    return {d: {**provenance(served, d), **fit_caveats(served)}
            for d in sorted(set(map(str, devices))) for served in (models.serve(resolve_device(d)).model,)}


def fleet_provenance(per_device: Mapping[str, Mapping[str, object]]) -> dict[str, object]:
    """:func:`provenance` of a plan over client devices, from each one's (:func:`device_provenance`), merged
    as :func:`~.provenance.merged_provenance` merges (the least trusted reference and workload rows over those
    devices, the weakest split, the fewest profiled modes; ``model_version`` the first device's). A plan whose
    only client is served by two simulated rows says so, whatever the workload's other devices hold."""
    parts = list(per_device.values())
    return {**parts[0], **merged_provenance(parts)}


def fleet_answer(model: WorkloadModel | DeviceModels, clients: Sequence[Mapping], deadline_s: float, epochs: int = 1,
                 confidence: float = DEFAULT_CONFIDENCE, workload_id: str | None = None) -> dict[str, object]:
    """``POST /v1/fleet-plans``'s answer: :func:`plan_fleet`, JSON-ready, with the plan's provenance at the
    top (the least trusted over its devices) and each client's own (its device's model's)."""
    plan = plan_fleet(model, clients, deadline_s, epochs=epochs, confidence=confidence).as_dict()
    own = device_provenance(model, [str(c["device"]) for c in plan["clients"]])
    plan = {**json_safe({k: v for k, v in plan.items() if k != "clients"}),
            "clients": [_json_row({**c, **own[str(c["device"])]}) for c in plan["clients"]]}
    # The plan's caveats: every knob some serving fit does not separate, the worst scatter among them.
    return {"workload_id": workload_id, **fleet_provenance(own), **merged_caveats(own.values()),
            "deadline_s": deadline_s, "epochs": epochs, **plan,
            "infeasible_clients": plan.get("infeasible_clients") or []}


def check_budget(budget: object) -> int:
    """``budget`` (modes a profiling plan proposes) as an int; an :class:`InputError` naming ``--budget`` and
    the rule unless it is a whole number in 1..:data:`~jetpredict.predictor.limits.MAX_PLAN_BUDGET`.

    The one check of every plan (``plan``, ``plan --after``, ``profile --adaptive``), done before any work.
    """
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer) or not 1 <= budget <= MAX_PLAN_BUDGET:
        raise InputError(f"--budget (modes to profile) must be a whole number between 1 and {MAX_PLAN_BUDGET}, "
                         f"got {budget!r}", "budget")
    return int(budget)


def plan_profiling(device: Device | str, budget: int,
                   candidates: pd.DataFrame | Sequence[Mapping] | None = None,
                   model: WorkloadModel | None = None) -> planning.Plan:
    """The ``budget`` modes to profile and the time each takes (``est_profile_s``); see :mod:`.planning`.

    ``candidates`` defaults to the device's modes in the planning region (:func:`planning.operating_region`);
    given candidates are used as they are and are the region the plan must cover. The profiling time uses
    the minibatch time predicted by ``model`` when one is given, else by the device's reference workloads.
    """
    device = resolve_device(device)
    budget = check_budget(budget)
    if model is not None and model.device_id != device.id:
        raise InputError(f"the model was fitted on {model.device_id!r}, the plan is for {device.id!r}",
                         "device")
    given = resolve_modes(device, "all" if candidates is None else candidates)
    table = given.drop_duplicates(subset=list(MODE_FIELDS)).reset_index(drop=True)
    if candidates is not None and budget > len(table):
        repeats = len(given) - len(table)
        verb = "repeats" if repeats == 1 else "repeat"
        why = f"; {repeats} of the {len(given)} given {verb} another's knobs" if repeats else ""
        raise InputError(f"--budget ({budget}) exceeds the {len(table)} distinct candidate modes{why}",
                         "budget")
    if candidates is None:
        table = table[planning.operating_region(device, *(table[f].to_numpy() for f in MODE_FIELDS))]
        table = table.reset_index(drop=True)
    return planning.plan(device, table, budget, model)
