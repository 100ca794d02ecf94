"""Federated-learning round plans: one power mode per client so that the round meets its deadline.

Each client trains ``epochs`` local epochs per round. A client's mode must meet the deadline with its
*upper* time bound (``epoch_time_s_high``): that margin is what keeps it from straggling. Among those
modes it gets the one of least energy, counting the energy it spends idling at the mode's base power
from finishing (point estimate) until the deadline — a fast mode that then idles is not free. Clients
that cannot meet the deadline are reported with their fastest mode, never dropped silently.

The workload model is fitted on one device; clients of other types get cross-device predictions. The
all-modes prediction runs once per device *type* per request, so a round of hundreds of clients costs
a handful of vectorised predictions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from jetpredict.models.catalogue import load_device, mode_label
from jetpredict.models.errors import InputError
from jetpredict.predictor.recommend import check_epochs, check_limit
from jetpredict.predictor.space import space_prediction

MAX_CLIENTS = 10_000


def _check_clients(clients: Sequence[Mapping]) -> list[tuple[str, str]]:
    if not isinstance(clients, Sequence) or isinstance(clients, str | bytes) or not clients:
        raise InputError("clients must be a non-empty list of {id, device} objects", "clients")
    if len(clients) > MAX_CLIENTS:
        raise InputError(f"clients may list at most {MAX_CLIENTS} clients, got {len(clients)}", "clients")
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, client in enumerate(clients):
        if not isinstance(client, Mapping):
            raise InputError(f"clients[{i}] must be an object with id and device", f"clients.{i}")
        cid, device = client.get("id"), client.get("device")
        if cid is None or str(cid).strip() == "":
            raise InputError(f"clients[{i}].id is required", f"clients.{i}.id")
        if str(cid) in seen:
            raise InputError(f"clients[{i}].id {cid!r} is listed twice; ids must be unique", f"clients.{i}.id")
        if not isinstance(device, str) or not device:
            raise InputError(f"clients[{i}].device is required (a catalogue id)", f"clients.{i}.device")
        try:
            load_device(device)
        except InputError as exc:
            raise InputError(f"clients[{i}].device: {exc.message}", f"clients.{i}.device") from None
        seen.add(str(cid))
        out.append((str(cid), device))
    return out


def _device_choice(model, device_id: str, deadline_s: float, epochs: int) -> dict:
    """The mode of one device type for this round (same for every client of that type)."""
    device = load_device(device_id)
    knobs = device.modes().as_arrays()
    pred = space_prediction(model, device_id)
    round_s = epochs * np.asarray(pred["epoch_time_s"], dtype=float)
    round_high_s = epochs * np.asarray(pred["epoch_time_s_high"], dtype=float)
    train_j = epochs * np.asarray(pred["epoch_energy_j"], dtype=float)
    idle_j = np.asarray(pred["base_power_w"], dtype=float) * np.clip(deadline_s - round_s, 0.0, None)
    total_j = train_j + idle_j
    meets = round_high_s <= deadline_s
    if meets.any():
        # Least energy among modes that meet the deadline; ties to the shorter upper bound.
        i = int(np.lexsort((round_high_s, np.where(meets, total_j, np.inf)))[0])
        reason = None
    else:
        i = int(np.argmin(round_high_s))
        reason = (f"cannot meet deadline_s={deadline_s:g}: the fastest mode needs up to "
                  f"{round_high_s[i]:.4g} s for {epochs} epoch(s)")
    knob = {k: knobs[k][i] for k in ("cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz")}
    return {
        "mode": mode_label(**knob),
        "cpu_cores": int(knob["cpu_cores"]), "cpu_mhz": float(knob["cpu_mhz"]),
        "gpu_mhz": float(knob["gpu_mhz"]), "emc_mhz": float(knob["emc_mhz"]),
        "epoch_time_s": float(pred["epoch_time_s"][i]),
        "round_time_s": float(round_s[i]),
        "round_time_s_high": float(round_high_s[i]),
        "avg_power_w": float(pred["avg_power_w"][i]),
        "train_energy_j": float(train_j[i]),
        "idle_energy_j": float(idle_j[i]) if reason is None else 0.0,
        "energy_j": float(total_j[i]) if reason is None else float(train_j[i]),
        "meets_deadline": reason is None,
        "cross_device": bool(np.asarray(pred["cross_device"]).item()),
        "power_source": str(np.asarray(pred["power_source"]).item()),
        "reason": reason,
    }


def plan_round(model, clients: Sequence[Mapping], deadline_s: float, epochs: int = 1) -> dict:
    """Per-client modes for one FL round; see the module docstring for the rule.

    Returns ``{"feasible", "total_energy_j", "deadline_s", "epochs", "clients": [...],
    "infeasible_clients": [ids]}``. ``energy_j`` of a client = training energy of its local epochs +
    idle energy until the deadline (J); ``total_energy_j`` sums the clients that meet the deadline.
    """
    deadline_s = check_limit(deadline_s, "deadline_s")
    if deadline_s is None:
        raise InputError("deadline_s is required (s, > 0)", "deadline_s")
    epochs = check_epochs(1 if epochs is None else epochs)
    pairs = _check_clients(clients)
    per_device: dict[str, dict] = {}
    for i, (_, device_id) in enumerate(pairs):
        if device_id not in per_device:
            try:
                per_device[device_id] = _device_choice(model, device_id, deadline_s, epochs)
            except InputError as exc:
                raise InputError(f"clients[{i}].device: {exc.message}", f"clients.{i}.device") from None
    planned = [{"id": cid, "device": device_id, **per_device[device_id]} for cid, device_id in pairs]
    late = [c["id"] for c in planned if not c["meets_deadline"]]
    total = math.fsum(c["energy_j"] for c in planned if c["meets_deadline"])
    return {"feasible": not late, "total_energy_j": total, "deadline_s": deadline_s, "epochs": epochs,
            "clients": planned, "infeasible_clients": late}
