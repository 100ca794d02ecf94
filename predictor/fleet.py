"""Federated-learning round plans: one power mode per client so that the round meets its deadline.

Each client trains ``epochs`` local epochs per round. A client's mode must meet the deadline with the
*upper* end of its time interval (``epoch_time_s_high`` at the plan's confidence): that margin is what
keeps it from straggling. Among those modes it gets the one of least energy, counting the energy it
spends idling at the mode's base power from finishing (point estimate) until the deadline -- a fast mode
that then idles is not free. The device's nvpmodel presets and its space are chosen from together by the
rule ``recommend`` uses (:func:`predictor.recommend.pick`): a mode or preset outside the profiled knob ranges
is taken only when it saves energy beyond its interval, and the best preset that rule lets stand is taken
whenever its point beats the pick. Clients that cannot meet the deadline are reported with their fastest
mode, never dropped silently.

This module only chooses: the caller (:func:`predictor.service.plan_fleet`) hands it one all-modes
prediction per device *type*, so a round of hundreds of clients costs a handful of vectorised predictions.
A workload may hold rows of several device types: each client's plan says whose rows it rests on
(``rows_device``; ``own_rows`` when they are its own device's, else the prediction is transferred).

Each client's :class:`ClientAssignment` carries every interval the choice rests on (round time, training
energy and power, low and high), so a caller never predicts a client's mode again.
:func:`round_figures` and :func:`assignment_fields` state a mode's round figures for any chooser.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np
from jetpredict.models.catalogue import MODE_FIELDS, Device, load_device, mode_label
from jetpredict.models.errors import InputError
from jetpredict.predictor.limits import DEADLINE_MISS_PREFIX, DEFAULT_CONFIDENCE, MAX_CLIENTS
from jetpredict.predictor.recommend import CONSTANT_COLUMNS, lowest_position, pick, to_accuracy

#: A device type's predictions over its whole space: column name -> array (or provenance scalar), with
#: the knob columns, the prediction columns, ``extrapolated`` (bool) and ``extrapolated_knobs``; optionally
#: ``rows_device``, the device whose rows the prediction rests on, ``mode`` (the rows' names; else their
#: knob labels serve) and ``presets``, the device's nvpmodel presets as a :data:`SpacePrediction` of their own.
SpacePrediction = Mapping[str, object]
#: Columns of a :data:`SpacePrediction` that hold one value for all its modes (provenance), not an array.
_SCALAR_COLUMNS = (*CONSTANT_COLUMNS, "rows_device")


def confidence_note(confidence: float, workload_sources: Sequence[str], crosses_devices: bool) -> str | None:
    """Why the real held-out predictions the intervals are calibrated on do not back ``confidence`` for
    predictions resting on rows of ``workload_sources`` (None when they do) [E11]: they back every
    accepted level (up to ``limits.MAX_CONFIDENCE``) for real rows on their own device; the twin's rows
    depart from the model in ways no real row shows, and crossing devices is checked at the default level
    only."""
    if "simulated" in workload_sources:
        return (f"the intervals are calibrated on real measurements, and this plan rests on simulated rows "
                f"(the digital twin): its {confidence:g} confidence is not checked for them")
    if crosses_devices and confidence > DEFAULT_CONFIDENCE:
        return (f"predictions that cross devices are checked on real rows at {DEFAULT_CONFIDENCE:g} only: "
                f"this plan's {confidence:g} confidence is not")
    return None


def one_mode(row: Mapping[str, object]) -> dict[str, object]:
    """A prediction row of one mode (scalars, e.g. ``service.predict(...).iloc[0]``) as a one-mode
    :data:`SpacePrediction`, for :func:`round_figures` and :func:`assignment_fields` at position 0."""
    return {k: v if k in _SCALAR_COLUMNS else [v] for k, v in row.items()}


@dataclass(frozen=True)
class ClientAssignment:
    """The mode of one client and what it costs: times in s, power in W, energy in J.

    ``round_time_s*`` cover the round's ``epochs`` local epochs (point, and the interval at the plan's
    confidence); ``train_energy_j*`` the training of those epochs; ``idle_energy_j`` the base power from
    finishing (point estimate) until the deadline; ``energy_j`` = training + idle (training alone for a
    client that cannot meet the deadline)."""

    id: str
    device: str
    mode: str
    cpu_cores: int
    cpu_mhz: float
    gpu_mhz: float
    emc_mhz: float
    epoch_time_s: float
    round_time_s: float
    round_time_s_low: float
    round_time_s_high: float
    avg_power_w: float
    avg_power_w_low: float
    avg_power_w_high: float
    train_energy_j: float
    train_energy_j_low: float
    train_energy_j_high: float
    idle_energy_j: float
    energy_j: float
    meets_deadline: bool
    cross_device: bool
    power_source: str
    extrapolated_knobs: str
    reason: str | None
    rows_device: str | None = None
    own_rows: bool | None = None


@dataclass(frozen=True)
class FleetPlan:
    """A round plan. ``total_energy_j`` sums the clients that meet the deadline (J; None when none does:
    0 would read as a free round). ``confidence_note``: why the real data the intervals are calibrated on
    do not back ``confidence`` here (None when they do; see :func:`confidence_note`)."""

    feasible: bool
    total_energy_j: float | None
    deadline_s: float
    epochs: int
    confidence: float
    clients: tuple[ClientAssignment, ...]
    infeasible_clients: tuple[str, ...]
    confidence_note: str | None = None

    def as_dict(self) -> dict:
        """Plain JSON-ready dict (clients as a list of dicts). Every field of a client is a scalar, so
        shallow copies do (``dataclasses.asdict`` deep-copies each value: seconds for 10,000 clients)."""
        names = [f.name for f in fields(ClientAssignment)]
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["clients"] = [{n: getattr(c, n) for n in names} for c in self.clients]
        out["infeasible_clients"] = list(self.infeasible_clients)
        return out


def check_clients(clients: Sequence[Mapping]) -> list[tuple[str, Device]]:
    """``(id, Device)`` per client; ids unique, devices in the catalogue (each resolved once)."""
    if not isinstance(clients, Sequence) or isinstance(clients, str | bytes) or not clients:
        raise InputError("clients must be a non-empty list of {id, device} objects", "clients")
    if len(clients) > MAX_CLIENTS:
        raise InputError(f"clients may list at most {MAX_CLIENTS} clients, got {len(clients)}", "clients")
    out: list[tuple[str, Device]] = []
    seen: set[str] = set()
    devices: dict[str, Device] = {}
    for i, client in enumerate(clients):
        if not isinstance(client, Mapping):
            raise InputError(f"clients[{i}] must be an object with id and device", f"clients.{i}")
        cid, device_id = client.get("id"), client.get("device")
        if cid is None or str(cid).strip() == "":
            raise InputError(f"clients[{i}].id is required", f"clients.{i}.id")
        if str(cid) in seen:
            raise InputError(f"clients[{i}].id {cid!r} is listed twice; ids must be unique",
                             f"clients.{i}.id")
        if not isinstance(device_id, str) or not device_id:
            raise InputError(f"clients[{i}].device is required (a catalogue id)", f"clients.{i}.device")
        if device_id not in devices:
            try:
                devices[device_id] = load_device(device_id)
            except InputError as exc:
                raise InputError(f"clients[{i}].device: {exc.message}", f"clients.{i}.device") from None
        seen.add(str(cid))
        out.append((str(cid), devices[device_id]))
    return out


#: Point, lower and upper end of an interval, as column-name suffixes.
_TAILS = ("", "_low", "_high")


def _col(pred: SpacePrediction, name: str) -> np.ndarray:
    return np.asarray(pred[name], dtype=float)


def round_figures(pred: SpacePrediction, deadline_s: float, epochs: int, device_id: str
                  ) -> dict[str, np.ndarray]:
    """Per mode of ``pred`` on device type ``device_id``: the round's time (s) and training energy (J) for
    ``epochs`` local epochs, each with its interval (``_low``, ``_high``: the per-epoch interval times the
    epochs, widened by the device's run-to-run spread, as :func:`~.recommend.to_accuracy` states any run of
    that many epochs), the idle energy at base power from finishing until ``deadline_s`` (J, never
    negative) and the total ``energy_j`` = training + idle."""
    runs = to_accuracy(pred, epochs, device_id)
    out = {f"round_time_s{tail}": runs[f"time_to_accuracy_s{tail}"] for tail in _TAILS}
    out.update({f"train_energy_j{tail}": runs[f"energy_to_accuracy_j{tail}"] for tail in _TAILS})
    out["idle_energy_j"] = _idle_j(pred, deadline_s, out["round_time_s"])
    out["energy_j"] = out["train_energy_j"] + out["idle_energy_j"]
    return out


def assignment_fields(pred: SpacePrediction, figures: Mapping[str, np.ndarray], i: int,
                      reason: str | None) -> dict:
    """The :class:`ClientAssignment` fields (all but ``id``, ``device`` and ``own_rows``) of mode ``i`` of
    ``pred``, with ``figures`` from :func:`round_figures`. ``reason`` not None: the mode cannot meet the
    deadline, so it counts no idle energy and ``energy_j`` is its training energy."""
    knob = {k: float(_col(pred, k)[i]) for k in MODE_FIELDS}
    fig = {name: float(values[i]) for name, values in figures.items()}
    if reason is not None:
        fig["idle_energy_j"], fig["energy_j"] = 0.0, fig["train_energy_j"]
    return {
        "mode": mode_label(**knob) if pred.get("mode") is None else str(np.asarray(pred["mode"])[i]),
        "cpu_cores": int(knob["cpu_cores"]), "cpu_mhz": knob["cpu_mhz"], "gpu_mhz": knob["gpu_mhz"],
        "emc_mhz": knob["emc_mhz"],
        "epoch_time_s": float(_col(pred, "epoch_time_s")[i]),
        **{f"avg_power_w{tail}": float(_col(pred, f"avg_power_w{tail}")[i]) for tail in _TAILS},
        **fig,
        "meets_deadline": reason is None,
        "cross_device": bool(pred["cross_device"]),
        "power_source": str(pred["power_source"]),
        "extrapolated_knobs": str(np.asarray(pred["extrapolated_knobs"])[i]),
        "reason": reason,
        "rows_device": None if pred.get("rows_device") is None else str(pred["rows_device"]),
    }


def _energy_high_j(pred: SpacePrediction, figures: Mapping[str, np.ndarray], deadline_s: float) -> np.ndarray:
    """Upper end of each mode's energy until the round ends (J): training at its upper end, and idle from
    the earliest finish (the low end of the round's time), when the idle share is largest. The guard that
    lets an extrapolated mode win compares this bound, so it must bound both parts."""
    return figures["train_energy_j_high"] + _idle_j(pred, deadline_s, figures["round_time_s_low"])


def _idle_j(pred: SpacePrediction, deadline_s: float, finish_s: np.ndarray) -> np.ndarray:
    """Energy (J) of each mode idling at its base power from ``finish_s`` until ``deadline_s`` (never < 0)."""
    return _col(pred, "base_power_w") * np.clip(deadline_s - finish_s, 0.0, None)


def _device_choice(pred: SpacePrediction, deadline_s: float, epochs: int, device_id: str) -> dict:
    """The mode of one device type for this round (the same for every client of that type): the least
    energy (J) meeting the deadline (s) among its presets and its space, by
    :func:`predictor.recommend.pick`."""
    fig = round_figures(pred, deadline_s, epochs, device_id)
    presets = pred.get("presets")
    preset_fig = None if presets is None else round_figures(presets, deadline_s, epochs, device_id)
    # Presets first, then the space: one candidate list under recommend's rule, ties keeping the
    # preset's name (nvpmodel sets it).
    parts = [(pred, fig)] if presets is None else [(presets, preset_fig), (pred, fig)]
    n_presets = 0 if preset_fig is None else len(preset_fig["energy_j"])
    round_high_s = np.concatenate([f["round_time_s_high"] for _, f in parts])
    meets = round_high_s <= deadline_s

    def chosen(i: int, reason: str | None) -> dict:
        """The candidate at position ``i`` of the list (presets first)."""
        return (assignment_fields(presets, preset_fig, i, reason) if i < n_presets
                else assignment_fields(pred, fig, i - n_presets, reason))

    if not meets.any():
        i = lowest_position(round_high_s, round_high_s)  # NaN last, as pick ranks them; ties to a preset
        return chosen(i, f"{DEADLINE_MISS_PREFIX}{deadline_s:g}: the fastest mode needs up to "
                         f"{round_high_s[i]:.4g} s for {epochs} epoch(s)")
    # Least energy among the candidates that meet the deadline; ties to the shorter upper bound.
    got = pick(np.concatenate([f["energy_j"] for _, f in parts]), round_high_s,
               np.concatenate([_energy_high_j(p, f, deadline_s) for p, f in parts]), meets,
               np.concatenate([np.asarray(p["extrapolated"], dtype=bool) for p, _ in parts]),
               None if presets is None else np.arange(len(meets)) < n_presets)
    return chosen(got.best, None)


def plan_round(predict_space: Callable[[Device], SpacePrediction], clients: Sequence[Mapping],
               deadline_s: float, epochs: int, confidence: float) -> FleetPlan:
    """Per-client modes for one FL round (see the module docstring); arguments already checked except
    ``clients``. ``predict_space(device)`` gives a device type's all-modes prediction at ``confidence``."""
    pairs = check_clients(clients)
    per_device: dict[str, dict] = {}
    for i, (_, device) in enumerate(pairs):
        if device.id not in per_device:
            try:
                per_device[device.id] = _device_choice(predict_space(device), deadline_s, epochs, device.id)
            except InputError as exc:
                raise InputError(f"clients[{i}].device: {exc.message}", f"clients.{i}.device") from None
    planned = tuple(ClientAssignment(id=cid, device=device.id, **per_device[device.id],
                               own_rows=None if per_device[device.id]["rows_device"] is None
                               else per_device[device.id]["rows_device"] == device.id)
                    for cid, device in pairs)
    late = tuple(c.id for c in planned if not c.meets_deadline)
    met = [c.energy_j for c in planned if c.meets_deadline]
    total = math.fsum(met) if met else None
    return FleetPlan(feasible=not late, total_energy_j=total, deadline_s=deadline_s, epochs=epochs,
                     confidence=confidence, clients=planned, infeasible_clients=late)
