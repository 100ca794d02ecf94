"""Choosing power modes from predictions: Pareto fronts, constraints, time/energy to accuracy.

Works on prediction tables (one row per mode, columns as returned by :func:`predictor.service.predict`),
fully vectorised so that the 29,232 modes of an AGX Xavier take a few milliseconds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from jetpredict.models.errors import InputError

OBJECTIVES = {"min-time": "epoch_time_s", "min-energy": "epoch_energy_j"}

#: Run-to-run spread of end-to-end training time (fraction), from the POMACS 2022 15-hour runs on five
#: devices of each type (S1 §5.4, ``shared/data/published/facts.csv``): AGX Xavier ResNet-18 within 1%,
#: Xavier NX MobileNetV3 5.4%, Nano LeNet-5 7.8%. Devices without a published figure get the widest one.
RUN_TO_RUN_SPREAD = {"agx-xavier": 0.01, "xavier-nx": 0.054, "nano": 0.078}
DEFAULT_RUN_TO_RUN_SPREAD = 0.078


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Boolean mask of the points not dominated when minimising both ``x`` and ``y``.

    Among exact duplicates only the first is kept, so the front has no repeated points.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    mask = np.zeros(x.shape, dtype=bool)
    valid = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    if valid.size == 0:
        return mask
    # Sort by x then y: a point is on the front iff its y is below every y seen before it.
    order = valid[np.lexsort((y[valid], x[valid]))]
    ys = y[order]
    best_before = np.concatenate(([np.inf], np.minimum.accumulate(ys)[:-1]))
    mask[order[ys < best_before]] = True
    return mask


def pareto_front(df: pd.DataFrame, x: str = "epoch_time_s", y: str = "epoch_energy_j") -> pd.DataFrame:
    """The rows of ``df`` on the (``x``, ``y``) Pareto front, sorted by ``x`` ascending."""
    front = df[pareto_mask(df[x].to_numpy(), df[y].to_numpy())]
    return front.sort_values(x, kind="stable")


def check_limit(value: float | None, field: str) -> float | None:
    """A constraint must be a finite number > 0 (or absent)."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{field} must be a number > 0, got {value!r}", field) from None
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise InputError(f"{field} must be a finite number > 0, got {value!r}", field)
    return number


def check_epochs(epochs: int | None) -> int | None:
    """``epochs`` must be a whole number >= 1 (or absent)."""
    if epochs is None:
        return None
    if isinstance(epochs, bool) or not isinstance(epochs, int | np.integer) or epochs < 1:
        raise InputError(f"epochs must be a whole number >= 1, got {epochs!r}", "epochs")
    return int(epochs)


def to_accuracy(pred, epochs: int, device_id: str) -> dict[str, np.ndarray]:
    """Time- and energy-to-accuracy for ``epochs`` epochs (DAWNBench's metric), s and J.

    ``pred`` maps ``epoch_time_s``/``epoch_energy_j`` and their ``_low``/``_high`` to arrays (a
    prediction table or dict). The interval is the per-epoch interval times ``epochs``, widened by the
    device's run-to-run spread (:data:`RUN_TO_RUN_SPREAD`): a long run on a real board varies this much
    even when the per-epoch prediction is exact.
    """
    spread = RUN_TO_RUN_SPREAD.get(device_id, DEFAULT_RUN_TO_RUN_SPREAD)
    out: dict[str, np.ndarray] = {}
    for name, base in (("time_to_accuracy_s", "epoch_time_s"), ("energy_to_accuracy_j", "epoch_energy_j")):
        out[name] = epochs * np.asarray(pred[base], dtype=float)
        out[f"{name}_low"] = epochs * np.asarray(pred[f"{base}_low"], dtype=float) * (1.0 - spread)
        out[f"{name}_high"] = epochs * np.asarray(pred[f"{base}_high"], dtype=float) * (1.0 + spread)
    return out


def add_to_accuracy(df: pd.DataFrame, epochs: int, device_id: str) -> pd.DataFrame:
    """:func:`to_accuracy` added to a prediction table as columns, in place."""
    for name, values in to_accuracy(df, epochs, device_id).items():
        df[name] = values
    return df


def feasible_mask(df: pd.DataFrame, max_power_w: float | None, max_epoch_time_s: float | None) -> np.ndarray:
    """Modes whose predicted mean power and epoch time (point estimates) meet the limits."""
    ok = np.ones(len(df), dtype=bool)
    if max_power_w is not None:
        ok &= df["avg_power_w"].to_numpy() <= max_power_w
    if max_epoch_time_s is not None:
        ok &= df["epoch_time_s"].to_numpy() <= max_epoch_time_s
    return ok


def _why_infeasible(df: pd.DataFrame, max_power_w: float | None, max_epoch_time_s: float | None) -> str:
    parts = []
    if max_power_w is not None:
        low = df.loc[df["avg_power_w"].idxmin()]
        parts.append(f"the lowest predicted power is {low['avg_power_w']:.3g} W (mode {low['mode']})")
    if max_epoch_time_s is not None:
        fast = df.loc[df["epoch_time_s"].idxmin()]
        parts.append(f"the shortest predicted epoch is {fast['epoch_time_s']:.4g} s (mode {fast['mode']})")
    limits = ", ".join(f"{k}={v:g}" for k, v in (("max_power_w", max_power_w),
                                                  ("max_epoch_time_s", max_epoch_time_s)) if v is not None)
    if (max_power_w is not None and max_epoch_time_s is not None
            and (df["avg_power_w"] <= max_power_w).any() and (df["epoch_time_s"] <= max_epoch_time_s).any()):
        parts = ["each limit alone can be met, but no mode meets both"]
    return f"no mode meets {limits}: " + "; ".join(parts)


def choose(df: pd.DataFrame, objective: str, max_power_w: float | None = None,
           max_epoch_time_s: float | None = None) -> dict:
    """Best mode for ``objective`` among the modes meeting the limits, and the Pareto fronts.

    Returns ``{"best": index label | None, "pareto": index labels of the time-vs-energy front of the
    feasible modes, "pareto_power": time-vs-power front of the feasible modes, "feasible", "reason"}``.
    Ties on the objective go to the other quantity (time for min-energy, energy for min-time), so the
    best mode is always on the front.
    """
    if objective not in OBJECTIVES:
        raise InputError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}", "objective")
    max_power_w = check_limit(max_power_w, "max_power_w")
    max_epoch_time_s = check_limit(max_epoch_time_s, "max_epoch_time_s")
    ok = feasible_mask(df, max_power_w, max_epoch_time_s)
    if not ok.any():
        return {"best": None, "pareto": [], "pareto_power": [], "feasible": False,
                "reason": _why_infeasible(df, max_power_w, max_epoch_time_s)}
    cand = df[ok]
    key = OBJECTIVES[objective]
    other = "epoch_energy_j" if key == "epoch_time_s" else "epoch_time_s"
    order = np.lexsort((cand[other].to_numpy(), cand[key].to_numpy()))
    best = cand.index[order[0]]
    front = pareto_front(cand, "epoch_time_s", "epoch_energy_j")
    power_front = pareto_front(cand, "epoch_time_s", "avg_power_w")
    return {"best": best, "pareto": list(front.index), "pareto_power": list(power_front.index),
            "feasible": True, "reason": None}
