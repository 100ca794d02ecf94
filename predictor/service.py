"""The predictor's operations, as the CLI and the HTTP API call them (no Flask, no printing).

- :func:`resolve_device`: a catalogue id resolved once, at the edge; everything below takes the
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

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, Device, load_device
from jetpredict.models.errors import InputError, ModeOutOfRangeError
from jetpredict.models.profile_rows import rows_to_records, source_kind
from jetpredict.predictor import bundled, fleet, planning, space
from jetpredict.predictor import recommend as rec
from jetpredict.predictor.knobs import ModeArrays
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE, MAX_MODES
from jetpredict.predictor.model import WorkloadModel
from jetpredict.predictor.terms import least_trusted

MODE_COLUMNS: tuple[str, ...] = ("mode", *MODE_FIELDS)
#: Prediction columns in output order: the profile-row format's first, the power interval after them.
PREDICTION_COLUMNS: tuple[str, ...] = (
    "epoch_time_s", "epoch_time_s_low", "epoch_time_s_high", "avg_power_w",
    "epoch_energy_j", "epoch_energy_j_low", "epoch_energy_j_high", "avg_power_w_low", "avg_power_w_high")
TO_ACCURACY_COLUMNS: tuple[str, ...] = (
    "time_to_accuracy_s", "time_to_accuracy_s_low", "time_to_accuracy_s_high",
    "energy_to_accuracy_j", "energy_to_accuracy_j_low", "energy_to_accuracy_j_high")
#: Per mode: whether any knob lies outside the profiled range, and which (``;``-separated, "" if none).
FLAG_COLUMNS: tuple[str, ...] = ("extrapolated", "extrapolated_knobs")
PROVENANCE_COLUMNS: tuple[str, ...] = (
    "cross_device", "power_source", "reference_source", "workload_source", "profiled_modes", "model_version",
    "confidence")


def resolve_device(device: Device | str) -> Device:
    """A catalogue :class:`Device` from an id (``UnknownDeviceError`` names the valid ids) or as given."""
    if isinstance(device, Device):
        return device
    if not isinstance(device, str) or not device:
        raise InputError(f"device must be a catalogue id, got {device!r}", "device")
    return load_device(device)


def _target(model: WorkloadModel, device: Device | str | None) -> Device:
    return resolve_device(model.device_id if device is None else device)


def workload_source(model: WorkloadModel) -> str:
    """Where the workload's own profile rows came from: ``measured``, ``simulated`` (the twin) or
    ``published`` (the least trusted kind among its rows' ``source``)."""
    # Read straight from the stored rows: this runs on every HTTP answer, a DataFrame costs ~1 ms there.
    return least_trusted(source_kind(row.get("source")) for row in model.training_rows)


def provenance(model: WorkloadModel, device: Device | str | None = None) -> dict[str, object]:
    """What a prediction of ``model`` on ``device`` rests on, as every answer states it.

    ``reference_source``: the least trusted reference data used (a cross-device prediction also rests on
    the other device's sweeps, simulated for all but AGX Xavier); ``workload_source``: the workload's rows.
    """
    return {"reference_source": bundled.on_device(model, _target(model, device)).reference_source,
            "workload_source": workload_source(model), "profiled_modes": int(model.profiled_modes),
            "model_version": model.model_version}


@lru_cache(maxsize=16)
def _all_modes_of(device_id: str) -> pd.DataFrame:
    modes = load_device(device_id).modes()
    df = pd.DataFrame(modes.as_arrays(), columns=list(MODE_FIELDS))
    df.insert(0, "mode", modes.labels())
    return df


def _all_modes(device: Device) -> pd.DataFrame:
    """Every mode of ``device`` as a table (cached per device; callers must not modify it)."""
    return _all_modes_of(device.id)


def _presets(device: Device) -> pd.DataFrame:
    return pd.DataFrame([p.as_dict() for p in device.presets], columns=list(MODE_COLUMNS))


def _mode_table(device: Device, modes: pd.DataFrame | Sequence[Mapping]) -> pd.DataFrame:
    if isinstance(modes, pd.DataFrame):
        df = modes
    else:
        if not isinstance(modes, Sequence) or isinstance(modes, str | bytes):
            raise InputError('modes must be "presets", "all", or a list of mode objects', "modes")
        bad = [i for i, m in enumerate(modes) if not isinstance(m, Mapping)]
        if bad:
            raise InputError(f"modes[{bad[0]}] must be an object with {', '.join(MODE_COLUMNS)}",
                             f"modes.{bad[0]}")
        df = pd.DataFrame(list(modes))
    if df.empty:
        raise InputError("modes is empty: give at least one mode", "modes")
    if len(df) > MAX_MODES:
        raise InputError(f"modes may hold at most {MAX_MODES} rows, got {len(df)}", "modes")
    missing = [c for c in MODE_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"modes is missing column(s) {', '.join(missing)}; each mode needs "
                         f"{', '.join(MODE_COLUMNS)}", f"modes.{missing[0]}")
    if "device" in df.columns:
        other = sorted({str(d) for d in df["device"].dropna() if str(d).strip() and str(d) != device.id})
        if other:
            raise InputError(f"modes are for device {other[0]!r} but the prediction is for {device.id!r}; "
                             f"predict for that device explicitly (cross-device) or drop the rows",
                             "modes.device")
    out = pd.DataFrame({"mode": df["mode"]})
    labels = out["mode"]
    blank = labels.isna() | (labels.astype(str).str.strip() == "")
    if blank.any():
        i = int(np.flatnonzero(blank.to_numpy())[0])
        raise InputError(f"modes[{i}].mode is required (a label, e.g. a preset name or 'custom')",
                         f"modes.{i}.mode")
    out["mode"] = labels.astype(str)
    for name in MODE_FIELDS:
        values = pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"modes[{i}].{name} must be a number, got {df[name].iloc[i]!r}",
                             f"modes.{i}.{name}")
        out[name] = values
    if device.out_of_range(*(out[f].to_numpy() for f in MODE_FIELDS)):
        # Name the first offending row: check row by row only on this (rare) error path.
        for i, knobs in enumerate(out[list(MODE_FIELDS)].to_numpy()):
            problems = device.out_of_range(*(np.atleast_1d(k) for k in knobs))
            if problems:
                name, message = next(iter(problems.items()))
                raise ModeOutOfRangeError(f"modes[{i}] ({out['mode'].iloc[i]}): {message}",
                                          f"modes.{i}.{name}")
    out["cpu_cores"] = out["cpu_cores"].astype(int)
    return out.reset_index(drop=True)


def resolve_modes(device: Device | str, modes: str | pd.DataFrame | Sequence[Mapping] = "presets"
                  ) -> pd.DataFrame:
    """The modes to predict as a table ``mode, cpu_cores, cpu_mhz, gpu_mhz, emc_mhz``.

    ``modes`` is ``"presets"``, ``"all"`` (every mode of the device) or a table / list of mode objects
    (other columns ignored). Knobs may take any value inside the device's range.
    """
    device = resolve_device(device)
    if isinstance(modes, str):
        if modes == "presets":
            return _presets(device)
        if modes == "all":
            return _all_modes(device).copy()
        raise InputError(f'modes must be "presets", "all", or a list of mode objects; got {modes!r}', "modes")
    return _mode_table(device, modes)


# -- the model seam: every prediction the service makes goes through these two functions ----------------
def predict_knobs(model: WorkloadModel, modes: ModeArrays, device: Device, confidence: float
                  ) -> dict[str, object]:
    """Predictions at modes already checked against ``device``: every :class:`Prediction` column and
    ``extrapolated`` as arrays, ``confidence``, ``cross_device`` and ``power_source`` as scalars."""
    index = space.catalogue_index(device, modes)
    if index is None:  # knobs off the catalogue steps (e.g. nvpmodel caps): predict them directly
        return bundled.predict(model, modes, device, confidence).columns()
    return space.space_prediction(model, device, confidence).take(index).columns()


def predict_space(model: WorkloadModel, device: Device, confidence: float) -> dict[str, object]:
    """:func:`predict_knobs` over every mode of ``device`` (``Device.modes()`` order), plus the knobs."""
    return {**device.modes().as_arrays(), **space.space_prediction(model, device, confidence).columns()}


# -- operations -------------------------------------------------------------------------------------------
def predict(model: WorkloadModel, modes: str | pd.DataFrame | Sequence[Mapping] = "presets",
            device: Device | str | None = None, epochs: int | None = None,
            confidence: float = DEFAULT_CONFIDENCE) -> pd.DataFrame:
    """Predicted epoch time (s), mean power (W) and energy (J) with ``confidence`` intervals, per mode.

    ``device`` other than the model's gives cross-device predictions; the modes are checked against
    the target device, so a model refuses another device's modes unless asked for that device.
    With ``epochs``, adds time/energy to accuracy (see :func:`predictor.recommend.to_accuracy`).
    """
    target = _target(model, device)
    epochs = rec.check_epochs(epochs)
    confidence = rec.check_confidence(confidence)
    # The cached full space is only read here, so it is not copied (a 29,232-row copy costs milliseconds).
    table = _all_modes(target) if isinstance(modes, str) and modes == "all" else resolve_modes(target, modes)
    # Series keep their dtypes (the text labels are not re-inferred); scalars broadcast without copies.
    data = prediction_columns(model, table["mode"].reset_index(drop=True),
                              {c: table[c].reset_index(drop=True) for c in MODE_FIELDS}, target, epochs,
                              confidence, whole_space=isinstance(modes, str) and modes == "all")
    return pd.DataFrame(data, index=pd.RangeIndex(len(table)), copy=False)


def prediction_columns(model: WorkloadModel, labels, knobs: Mapping[str, object], device: Device | str,
                       epochs: int | None, confidence: float = DEFAULT_CONFIDENCE, *,
                       whole_space: bool = False) -> dict[str, object]:
    """The columns of :func:`predict` for modes already checked: ``labels`` and ``knobs`` (MODE_FIELDS ->
    arrays) in, ``{column: array or provenance scalar}`` out, in output order. The HTTP service builds
    its rows for short mode lists from this directly (no data frame). ``whole_space``: the knobs are the
    device's whole space in ``Device.modes()`` order (the cached prediction is used as it is)."""
    target = resolve_device(device)
    pred = (predict_space(model, target, confidence) if whole_space
            else predict_knobs(model, ModeArrays.from_frame(knobs), target, confidence))
    data: dict[str, object] = {"mode": labels, **{c: knobs[c] for c in MODE_FIELDS}}
    data.update({c: pred[c] for c in PREDICTION_COLUMNS})
    if epochs is not None:
        data.update(rec.to_accuracy(data, epochs, target.id))
    data.update({c: pred[c] for c in FLAG_COLUMNS})
    data.update({
        "cross_device": pred["cross_device"],
        "power_source": pred["power_source"],
        # Provenance of a cross-device prediction: the least trusted data the moved model rests on.
        "reference_source": bundled.on_device(model, target).reference_source,
        "workload_source": workload_source(model),
        "profiled_modes": int(model.profiled_modes),
        "model_version": model.model_version,
        "confidence": pred["confidence"],
    })
    return data


def records(df: pd.DataFrame) -> list[dict]:
    """Rows of a prediction table as JSON-ready dicts (NaN -> None; no knob flagged -> "")."""
    out = rows_to_records(df)
    if "extrapolated_knobs" in df.columns:
        for row in out:
            row["extrapolated_knobs"] = row["extrapolated_knobs"] or ""
    return out


@dataclass(frozen=True)
class Recommendation:
    """Best mode and Pareto fronts under limits; rows are prediction-table rows (dicts).

    ``best`` is None when no mode meets the limits (``reason`` says why). ``preferred_in_range``: the
    best-looking mode lay outside the profiled knob ranges and not better beyond its interval, so an
    in-range mode was chosen instead.
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
    pareto_power: list[dict]
    preferred_in_range: bool

    def as_dict(self) -> dict:
        return asdict(self)


#: Per-row provenance that a recommendation answer states once, at its top.
_ANSWER_TOP_LEVEL = ("reference_source", "workload_source", "profiled_modes", "model_version")


def recommendation_answer(model: WorkloadModel, result: Recommendation, workload_id: str | None = None) -> dict:
    """A :func:`recommend` result as ``recommend --format json`` prints it and ``POST /v1/recommendations``
    answers it: the same fields in both (provenance at the top, rows without it; caps that were set)."""

    def row(r: dict | None) -> dict | None:
        return None if r is None else {k: v for k, v in r.items() if k not in _ANSWER_TOP_LEVEL}

    return {"device": result.device, "workload_id": workload_id, **provenance(model, result.device),
            "objective": result.objective,
            "constraints": {k: v for k, v in result.constraints.items() if v is not None},
            "confidence": result.confidence, "modes_considered": result.modes_considered,
            "feasible": result.feasible, "reason": result.reason,
            "preferred_in_range": result.preferred_in_range,
            "best": row(result.best), "pareto": [row(r) for r in result.pareto]}


def recommend(model: WorkloadModel, objective: str, max_power_w: float | None = None,
              max_epoch_time_s: float | None = None, device: Device | str | None = None,
              epochs: int | None = None, confidence: float = DEFAULT_CONFIDENCE) -> Recommendation:
    """Best mode over the device's full space for ``min-time`` or ``min-energy`` under the limits.

    A mode meets ``max_power_w`` (W) when the upper end of its power interval at ``confidence`` does, and
    ``max_epoch_time_s`` (s) when the upper end of its time interval does; see :mod:`predictor.recommend`
    for the objective and the preference for modes inside the profiled knob ranges.
    """
    objective = rec.check_objective(objective)
    max_power_w = rec.check_limit(max_power_w, "max_power_w")
    max_epoch_time_s = rec.check_limit(max_epoch_time_s, "max_epoch_time_s")
    confidence = rec.check_confidence(confidence)
    target = _target(model, device)
    df = predict(model, "all", device=target, epochs=epochs, confidence=confidence)
    choice = rec.choose(df, objective, max_power_w, max_epoch_time_s, confidence)

    def rows(positions) -> list[dict]:
        return records(df.iloc[np.asarray(positions, dtype=int)])

    return Recommendation(
        device=target.id, objective=objective, confidence=confidence,
        constraints={"max_power_w": max_power_w, "max_epoch_time_s": max_epoch_time_s},
        modes_considered=len(df), feasible=choice.feasible, reason=choice.reason,
        best=rows([choice.best])[0] if choice.best is not None else None,
        pareto=rows(choice.pareto), pareto_power=rows(choice.pareto_power),
        preferred_in_range=choice.preferred_in_range)


def plan_fleet(model: WorkloadModel, clients: Sequence[Mapping], deadline_s: float, epochs: int = 1,
               confidence: float = DEFAULT_CONFIDENCE) -> fleet.FleetPlan:
    """Per-client power modes for one federated round; see :mod:`predictor.fleet` for the rule.

    The deadline (s) must hold for the upper end of each client's time interval at ``confidence``.
    """
    deadline_s = rec.check_limit(deadline_s, "deadline_s")
    if deadline_s is None:
        raise InputError("deadline_s is required (s, > 0)", "deadline_s")
    epochs = rec.check_epochs(1 if epochs is None else epochs)
    confidence = rec.check_confidence(confidence)
    return fleet.plan_round(lambda device: predict_space(model, device, confidence), clients, deadline_s,
                            epochs, confidence)


def plan_profiling(device: Device | str, budget: int,
                   candidates: pd.DataFrame | Sequence[Mapping] | None = None,
                   model: WorkloadModel | None = None) -> planning.Plan:
    """The ``budget`` modes to profile and the time each takes (``est_profile_s``); see :mod:`.planning`.

    ``candidates`` defaults to the device's modes in the planning region (:func:`planning.operating_region`);
    given candidates are used as they are and are the region the plan must cover. The profiling time uses
    the minibatch time predicted by ``model`` when one is given, else by the device's reference workloads.
    """
    device = resolve_device(device)
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer):
        raise InputError(f"budget must be a whole number >= 1, got {budget!r}", "budget")
    if model is not None and model.device_id != device.id:
        raise InputError(f"the model was fitted on {model.device_id!r}, the plan is for {device.id!r}",
                         "device")
    table = resolve_modes(device, "all" if candidates is None else candidates)
    table = table.drop_duplicates(subset=list(MODE_FIELDS)).reset_index(drop=True)
    if candidates is None:
        table = table[planning.operating_region(device, *(table[f].to_numpy() for f in MODE_FIELDS))]
        table = table.reset_index(drop=True)
    return planning.plan(device, table, int(budget), model)
