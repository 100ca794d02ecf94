"""The predictor's operations, as the CLI and the HTTP API call them (no Flask, no printing).

- :func:`resolve_modes`: presets, the full space, or a user table of modes, checked against a device;
- :func:`predict`: a fitted workload model on those modes, vectorised, with provenance columns;
- :func:`recommend`: best mode for an objective under limits, and the time/energy Pareto front;
- :func:`plan_fleet`: per-client modes of a federated round (see :mod:`predictor.fleet`);
- :func:`plan_profiling`: which modes to profile and how long it takes (see :mod:`predictor.planning`).

Bad input raises :class:`models.errors.InputError` naming the field and the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, load_device
from jetpredict.models.errors import InputError, ModeOutOfRangeError
from jetpredict.models.profile_rows import rows_to_records
from jetpredict.predictor import fleet, planning, space
from jetpredict.predictor import recommend as rec

MODE_COLUMNS: tuple[str, ...] = ("mode", *MODE_FIELDS)
PREDICTION_COLUMNS: tuple[str, ...] = (
    "epoch_time_s", "epoch_time_s_low", "epoch_time_s_high", "avg_power_w",
    "epoch_energy_j", "epoch_energy_j_low", "epoch_energy_j_high")
TO_ACCURACY_COLUMNS: tuple[str, ...] = (
    "time_to_accuracy_s", "time_to_accuracy_s_low", "time_to_accuracy_s_high",
    "energy_to_accuracy_j", "energy_to_accuracy_j_low", "energy_to_accuracy_j_high")
PROVENANCE_COLUMNS: tuple[str, ...] = (
    "cross_device", "power_source", "reference_source", "profiled_modes", "model_version")
#: A user-supplied mode table larger than the biggest device space is a mistake (or abuse).
MAX_MODE_ROWS = 100_000


@lru_cache(maxsize=16)
def _all_modes(device_id: str) -> pd.DataFrame:
    space = load_device(device_id).modes()
    df = pd.DataFrame(space.as_arrays(), columns=list(MODE_FIELDS))
    df.insert(0, "mode", space.labels())
    return df


def _presets(device_id: str) -> pd.DataFrame:
    return pd.DataFrame([p.as_dict() for p in load_device(device_id).presets], columns=list(MODE_COLUMNS))


def _mode_table(device_id: str, modes: pd.DataFrame | Sequence[Mapping]) -> pd.DataFrame:
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
    if len(df) > MAX_MODE_ROWS:
        raise InputError(f"modes may hold at most {MAX_MODE_ROWS} rows, got {len(df)}", "modes")
    missing = [c for c in MODE_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"modes is missing column(s) {', '.join(missing)}; each mode needs "
                         f"{', '.join(MODE_COLUMNS)}", f"modes.{missing[0]}")
    if "device" in df.columns:
        other = sorted({str(d) for d in df["device"].dropna() if str(d).strip() and str(d) != device_id})
        if other:
            raise InputError(f"modes are for device {other[0]!r} but the prediction is for {device_id!r}; "
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
    for field in MODE_FIELDS:
        values = pd.to_numeric(df[field], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"modes[{i}].{field} must be a number, got {df[field].iloc[i]!r}",
                             f"modes.{i}.{field}")
        out[field] = values
    device = load_device(device_id)
    if device.out_of_range(*(out[f].to_numpy() for f in MODE_FIELDS)):
        # Name the first offending row: check row by row only on this (rare) error path.
        for i, knobs in enumerate(out[list(MODE_FIELDS)].to_numpy()):
            problems = device.out_of_range(*(np.atleast_1d(k) for k in knobs))
            if problems:
                field, message = next(iter(problems.items()))
                raise ModeOutOfRangeError(f"modes[{i}] ({out['mode'].iloc[i]}): {message}",
                                          f"modes.{i}.{field}")
    out["cpu_cores"] = out["cpu_cores"].astype(int)
    return out.reset_index(drop=True)


def resolve_modes(device_id: str, modes: str | pd.DataFrame | Sequence[Mapping] = "presets") -> pd.DataFrame:
    """The modes to predict as a table ``mode, cpu_cores, cpu_mhz, gpu_mhz, emc_mhz``.

    ``modes`` is ``"presets"``, ``"all"`` (every mode of the device) or a table / list of mode objects
    (other columns ignored). Knobs may take any value inside the device's range.
    """
    load_device(device_id)  # UnknownDeviceError names the valid ids
    if isinstance(modes, str):
        if modes == "presets":
            return _presets(device_id)
        if modes == "all":
            return _all_modes(device_id).copy()
        raise InputError(f'modes must be "presets", "all", or a list of mode objects; got {modes!r}', "modes")
    return _mode_table(device_id, modes)


def _target_device(model, device_id: str | None) -> str:
    if device_id is None:
        return model.device_id
    if not isinstance(device_id, str):
        raise InputError(f"device must be a catalogue id, got {device_id!r}", "device")
    load_device(device_id)
    return device_id


def predict(model, modes: str | pd.DataFrame | Sequence[Mapping] = "presets", device_id: str | None = None,
            epochs: int | None = None) -> pd.DataFrame:
    """Predicted epoch time (s), mean power (W) and energy (J) with intervals, one row per mode.

    ``device_id`` other than the model's gives cross-device predictions; the modes are checked against
    the target device, so a model refuses another device's modes unless asked for that device.
    With ``epochs``, adds time/energy to accuracy (see :func:`predictor.recommend.add_to_accuracy`).
    """
    target = _target_device(model, device_id)
    epochs = rec.check_epochs(epochs)
    # The cached full space is only read here, so it is not copied (a 29,232-row copy costs milliseconds).
    table = _all_modes(target) if isinstance(modes, str) and modes == "all" else resolve_modes(target, modes)
    # Series keep their dtypes (the text labels are not re-inferred); scalars broadcast without copies.
    data = prediction_columns(model, table["mode"].reset_index(drop=True),
                              {c: table[c].reset_index(drop=True) for c in MODE_FIELDS}, target, epochs)
    return pd.DataFrame(data, index=pd.RangeIndex(len(table)), copy=False)


def _provenance_model(model, target: str):
    """The model whose reference data a prediction on ``target`` rests on (the transferred one across devices)."""
    if target == model.device_id:
        return model
    from jetpredict.predictor.transfer import transfer_model

    return transfer_model(model, target)


def prediction_columns(model, labels, knobs: Mapping[str, object], target: str, epochs: int | None
                       ) -> dict[str, object]:
    """The columns of :func:`predict` for modes already checked: ``labels`` and ``knobs`` (MODE_FIELDS ->
    arrays) in, ``{column: array or provenance scalar}`` out, in output order. The HTTP service builds
    its rows for short mode lists from this directly (no data frame)."""
    index = space.catalogue_index(target, knobs)
    if index is None:  # knobs off the catalogue steps (e.g. nvpmodel caps): predict them directly
        pred = model.predict_arrays(*(np.asarray(knobs[c]) for c in MODE_FIELDS), device_id=target)
    else:
        pred = {k: (v[index] if np.ndim(v) else v) for k, v in space.space_prediction(model, target).items()}
    data: dict[str, object] = {"mode": labels, **{c: knobs[c] for c in MODE_FIELDS}}
    data.update({c: np.asarray(pred[c], dtype=float) for c in PREDICTION_COLUMNS})
    if epochs is not None:
        data.update(rec.to_accuracy(data, epochs, target))
    data.update({
        "cross_device": bool(np.asarray(pred["cross_device"]).item()),
        "power_source": str(np.asarray(pred["power_source"]).item()),
        "reference_source": _provenance_model(model, target).reference_source,
        "profiled_modes": int(model.profiled_modes),
        "model_version": model.model_version,
    })
    return data


def recommend(model, objective: str, max_power_w: float | None = None, max_epoch_time_s: float | None = None,
              device_id: str | None = None, epochs: int | None = None) -> dict:
    """Best mode over the device's full space for ``min-time`` or ``min-energy`` under the limits.

    Limits apply to the point predictions of mean power (W) and epoch time (s). Returns ``{"best": row
    | None, "pareto": time-vs-energy front of the modes meeting the limits (rows, fastest first),
    "pareto_power": time-vs-power front, "feasible", "reason", "device", "objective", "modes_considered"}``.
    The best mode is always on both fronts.
    """
    if objective not in rec.OBJECTIVES:
        raise InputError(f"objective must be one of {', '.join(rec.OBJECTIVES)}, got {objective!r}",
                         "objective")
    max_power_w = rec.check_limit(max_power_w, "max_power_w")
    max_epoch_time_s = rec.check_limit(max_epoch_time_s, "max_epoch_time_s")
    target = _target_device(model, device_id)
    df = predict(model, "all", device_id=target, epochs=epochs)
    choice = rec.choose(df, objective, max_power_w, max_epoch_time_s)

    def rows(index) -> list[dict]:
        return rows_to_records(df.loc[index])

    return {
        "device": target, "objective": objective, "modes_considered": len(df),
        "constraints": {"max_power_w": max_power_w, "max_epoch_time_s": max_epoch_time_s},
        "best": rows([choice["best"]])[0] if choice["best"] is not None else None,
        "pareto": rows(choice["pareto"]), "pareto_power": rows(choice["pareto_power"]),
        "feasible": choice["feasible"], "reason": choice["reason"],
    }


def plan_fleet(model, clients: Sequence[Mapping], deadline_s: float, epochs: int = 1) -> dict:
    """Per-client power modes for one federated round; see :func:`predictor.fleet.plan_round`."""
    return fleet.plan_round(model, clients, deadline_s, epochs)


def plan_profiling(device_id: str, budget: int, candidates: pd.DataFrame | Sequence[Mapping] | None = None,
                   model=None) -> pd.DataFrame:
    """The ``budget`` modes to profile (D-optimal, :mod:`predictor.planning`) and ``est_profile_s`` each.

    ``candidates`` defaults to the device's modes in the planning region (every clock >= 50% of its
    maximum, >= 2 cores; see :mod:`predictor.planning`); given candidates are used as they are. The
    profiling time uses the minibatch time predicted by ``model`` when one is given, else by the
    device's bundled reference workload.
    """
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer):
        raise InputError(f"budget must be a whole number >= 1, got {budget!r}", "budget")
    table = resolve_modes(device_id, "all" if candidates is None else candidates)
    table = table.drop_duplicates(subset=list(MODE_FIELDS)).reset_index(drop=True)
    if candidates is None:
        region = planning.operating_region(load_device(device_id), *(table[f].to_numpy() for f in MODE_FIELDS))
        table = table[region].reset_index(drop=True)
    if model is not None and model.device_id != device_id:
        raise InputError(f"the model was fitted on {model.device_id!r}, the plan is for {device_id!r}", "device")
    from jetpredict.predictor.reference import load_reference

    ref = load_reference(device_id)
    workers = model.num_workers if model is not None else planning.DEFAULT_NUM_WORKERS
    x = planning.design_matrix(*(table[f].to_numpy() for f in MODE_FIELDS), ref.kappa_cpu, ref.kappa_pipe,
                               workers)
    chosen = planning.d_optimal(x, int(budget))
    picked = table.iloc[chosen].reset_index(drop=True)
    picked["est_profile_s"] = planning.profile_time_s(planning.minibatch_time_s(device_id, picked, model))
    return picked
