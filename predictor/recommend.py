"""Choosing power modes from predictions: limits met by the interval, the Pareto front, time/energy to accuracy.

Works on prediction tables (one row per mode, the columns of :func:`predictor.service.predict`), fully
vectorised, so the 29,232 modes of an AGX Xavier take a few milliseconds.

Rules ("caps are met with the interval, not the point", as the README says):

- a power cap holds when the *upper* end of the mode's power interval (``avg_power_w_high``, at the
  prediction's confidence) is within it; a time cap when ``epoch_time_s_high`` is;
- among the modes meeting the limits the objective is minimised on the point prediction;
- a mode whose knobs lie outside the profiled ranges (``extrapolated_knobs`` not empty) loses to the best
  in-range mode unless it is better beyond its own interval: its objective's upper bound is below the
  in-range mode's point prediction;
- the device's nvpmodel presets are candidates too (their caps are often not exact clock steps, so the
  space may not hold them), under the same out-of-range rule as every other mode (:func:`range_guard`,
  one pass over presets and space together): an out-of-range preset whose upper bound is not below the
  best in-range point never wins, however low its point. Among the presets that rule lets stand (in
  range, or better beyond their interval), the best meeting the limits is chosen whenever its point
  prediction beats the pick (a user can set it by name), so the chosen mode is never worse on the point
  than any of them. Ties go to the preset (:func:`with_presets` puts presets first). :func:`pick` holds
  these rules for ``recommend`` and fleet plans alike; :func:`preset_comparison` states that preset and
  what the chosen mode saves against it;
- the time/energy Pareto front (point predictions) is built over the modes meeting the limits that the
  out-of-range rule lets stand, so the chosen mode is on it and no member of it dominates the chosen mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS
from jetpredict.models.numbers import finite_or_none
from jetpredict.predictor.limits import OBJECTIVES, percent

#: Per-mode columns of a prediction table that hold one value for the whole answer (stated once in compact
#: answers; scalars in a fleet plan's per-device predictions), the confidence last as in every table.
CONSTANT_COLUMNS: tuple[str, ...] = ("cross_device", "power_source", "confidence")

#: Run-to-run spread of end-to-end training time (fraction), from the POMACS 2022 15-hour runs on five
#: devices of each type (Prashanthi et al., POMACS 6(3) 2022, §5.4): AGX Xavier ResNet-18 within 1%,
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


def pareto_positions(df: pd.DataFrame, ok: np.ndarray, x: str, y: str) -> np.ndarray:
    """Positions of the rows with ``ok`` on the (``x``, ``y``) Pareto front, sorted by ``x`` ascending."""
    xs = np.where(ok, df[x].to_numpy(dtype=float), np.nan)
    ys = np.where(ok, df[y].to_numpy(dtype=float), np.nan)
    front = np.flatnonzero(pareto_mask(xs, ys))
    return front[np.argsort(xs[front], kind="stable")]


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


def feasible_mask(df: pd.DataFrame, max_power_w: float | None, max_epoch_time_s: float | None) -> np.ndarray:
    """Modes whose upper power bound and upper epoch-time bound meet the limits (W, s)."""
    ok = np.ones(len(df), dtype=bool)
    if max_power_w is not None:
        ok &= df["avg_power_w_high"].to_numpy(dtype=float) <= max_power_w
    if max_epoch_time_s is not None:
        ok &= df["epoch_time_s_high"].to_numpy(dtype=float) <= max_epoch_time_s
    return ok


def extrapolated_mask(df: pd.DataFrame) -> np.ndarray:
    """Modes with at least one knob outside the profiled range: a prediction table's ``extrapolated``
    column, else whether its ``extrapolated_knobs`` name any (29,232 texts compared cost ~2 ms a call)."""
    if "extrapolated" in df.columns:
        return df["extrapolated"].to_numpy(dtype=bool)
    if "extrapolated_knobs" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return df["extrapolated_knobs"].astype(str).to_numpy() != ""


def lowest_position(value: np.ndarray, tie: np.ndarray) -> int:
    """Position of the lowest ``value``, ties to the lowest ``tie`` and then to the first position, NaN
    ranking last in both: ``np.lexsort((tie, value))[0]`` in one pass instead of a sort (a fleet plan asks
    this of every device type's 1,800-29,232 modes)."""
    v = np.where(np.isnan(value), np.inf, value)
    lows = np.flatnonzero(v == v.min())
    ties = tie[lows]
    return int(lows[np.argmin(np.where(np.isnan(ties), np.inf, ties))])


def lowest_among(mask: np.ndarray, value: np.ndarray, tie: np.ndarray) -> int:
    """:func:`lowest_position` over the positions ``mask`` holds (at least one), as a position of the whole
    arrays. Not over ``value`` masked to inf: NaN ranks last too, so where every masked-in value is NaN the
    first masked-out position would win."""
    allowed = np.flatnonzero(mask)
    return int(allowed[lowest_position(value[allowed], tie[allowed])])


def range_guard(value: np.ndarray, tie: np.ndarray, value_high: np.ndarray, ok: np.ndarray,
                extrapolated: np.ndarray) -> tuple[np.ndarray, int | None]:
    """The out-of-range rule: (mask of the positions it lets win, position of the best in-range ``ok`` one
    by ``value``, ties to ``tie``; None when no ``ok`` position is in range).

    An in-range position always stands; an extrapolated one only when ``value_high`` (its upper bound) is
    below the best in-range ``value``, i.e. it is better beyond its interval. With nothing in range every
    position stands: there is nothing trusted to lose to. The mask is not limited to ``ok``.
    """
    inside = ok & ~extrapolated
    if not inside.any():
        return np.ones(len(value), dtype=bool), None
    best_in = lowest_among(inside, value, tie)
    return ~extrapolated | (value_high < value[best_in]), best_in


@dataclass(frozen=True)
class Pick:
    """Outcome of :func:`pick`: positions in the candidates' arrays.

    ``best``: the position chosen; ``preferred_in_range``: a better-looking extrapolated mode gave way under
    :func:`range_guard` to ``best``, in range or better than those beyond its interval (not an out-of-range
    preset); ``preset``: the best preset meeting the limits (see :func:`pick`; None when none meets them);
    ``preferred_preset``: the extrapolated mode gave way to that preset, out of range but better than the
    in-range modes beyond its interval, so it is ``best``; ``stands``: the mask :func:`range_guard` gave,
    the positions the rule lets stand (None: it was not needed, as no ``ok`` position is extrapolated).
    """

    best: int
    preferred_in_range: bool
    preset: int | None
    preferred_preset: bool
    stands: np.ndarray | None = field(default=None, repr=False)


def pick(value: np.ndarray, tie: np.ndarray, value_high: np.ndarray, ok: np.ndarray, extrapolated: np.ndarray,
         presets: np.ndarray | None) -> Pick:
    """The rule ``recommend`` and fleet plans choose by, over presets and space modes together.

    ``value`` is minimised among ``ok`` (ties to ``tie``, then to the first position: :func:`with_presets`
    puts presets first); an extrapolated winner that :func:`range_guard` does not let stand (its
    ``value_high``, the upper bound, not below the best in-range ``value``) gives way to the best position
    the guard lets stand: in range, or better than the best in-range one beyond its interval, presets and
    space alike. A user can always set a preset by name, so an out-of-range preset that stands and wins
    so is ``Pick.preferred_preset``; one not better beyond its interval is no such guarantee, and never
    wins. ``Pick.preset`` is the best preset meeting the limits that the guard lets stand; when it lets
    none stand, the best of those on the point (so the comparison still names one, which the chosen mode
    may then not beat on the point). ``presets``: mask of the preset rows (None: none). ``ok`` must hold
    at least one True.
    """
    best = lowest_among(ok, value, tie)
    candidates = None if presets is None else ok & presets
    has_presets = candidates is not None and bool(candidates.any())
    if not has_presets and not (ok & extrapolated).any():
        return Pick(best, False, None, False)  # nothing for the guard to decide: skip its pass over the modes
    stands, best_in = range_guard(value, tie, value_high, ok, extrapolated)
    displaced = bool(best_in is not None and not stands[best])
    if displaced:
        best = lowest_among(ok & stands, value, tie)
    if not has_presets:
        return Pick(best, displaced, None, False, stands)
    standing = candidates & stands
    preset = lowest_among(standing if standing.any() else candidates, value, tie)
    by_preset = displaced and bool(presets[best] and extrapolated[best])
    return Pick(best, displaced and not by_preset, preset, by_preset, stands)


@dataclass(frozen=True)
class Choice:
    """Outcome of :func:`choose`: positions in the prediction table (``best`` None when nothing fits).

    ``preset``: the position of the best preset meeting the limits that the out-of-range rule lets stand
    (else the best meeting them; None when no preset row meets them or the table has none: see
    :func:`pick`); ``preferred_in_range`` and ``preferred_preset``: as :class:`Pick` says (a better-looking
    mode outside the profiled ranges gave way; to that preset, for the latter, which is then ``best``).
    """

    best: int | None
    pareto: np.ndarray = field(repr=False)
    feasible: bool
    reason: str | None
    preferred_in_range: bool
    preset: int | None = None
    preferred_preset: bool = False


def _lowest(bounds: pd.Series) -> int | None:
    """Position of the lowest known bound (an unknown, NaN, bound is never the lowest); None if none is known."""
    values = bounds.to_numpy(dtype=float)
    return None if np.isnan(values).all() else int(np.nanargmin(values))


def _over_cap_text(value: float, cap: float, digits: int) -> str:
    """``value`` with ``digits`` significant digits, or as many more as it takes to print it above ``cap``
    when it is above (a bound of 5.81175 W against a cap of 5.8109 W read "5.81 W", as if it met it)."""
    text = f"{value:.{digits}g}"
    while value > cap and not float(text) > cap and digits < 17:
        digits += 1
        text = f"{value:.{digits}g}"
    return text


def _why_infeasible(df: pd.DataFrame, max_power_w: float | None, max_epoch_time_s: float | None,
                    confidence: float) -> str:
    level = percent(confidence)
    parts = []
    power_ok = time_ok = True
    if max_power_w is not None:
        i = _lowest(df["avg_power_w_high"])
        power_ok = i is not None and df["avg_power_w_high"].iloc[i] <= max_power_w
        parts.append(f"no mode has a known upper bound of power at {level}" if i is None else
                     f"the lowest upper bound of power at {level} is "
                     f"{_over_cap_text(df['avg_power_w_high'].iloc[i], max_power_w, 3)} W "
                     f"(mode {df['mode'].iloc[i]})")
    if max_epoch_time_s is not None:
        i = _lowest(df["epoch_time_s_high"])
        time_ok = i is not None and df["epoch_time_s_high"].iloc[i] <= max_epoch_time_s
        parts.append(f"no mode has a known upper bound of the epoch at {level}" if i is None else
                     f"the shortest upper bound of the epoch at {level} is "
                     f"{_over_cap_text(df['epoch_time_s_high'].iloc[i], max_epoch_time_s, 4)} s "
                     f"(mode {df['mode'].iloc[i]})")
    limits = ", ".join(f"{k}={v:g}" for k, v in (("max_power_w", max_power_w),
                                                  ("max_epoch_time_s", max_epoch_time_s)) if v is not None)
    if max_power_w is not None and max_epoch_time_s is not None and power_ok and time_ok:
        parts = ["each limit alone can be met, but no mode meets both"]
    return f"no mode meets {limits} at confidence {confidence:g}: " + "; ".join(parts)


def with_presets(presets: pd.DataFrame, space: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """(the presets' prediction rows followed by the space's, a mask of the preset rows) for :func:`choose`.

    Presets come first, so where a preset and a space mode have the same knobs and prediction, ties (and
    the Pareto front's duplicates) keep the preset's name.
    """
    table = pd.concat([presets, space], ignore_index=True)
    mask = np.zeros(len(table), dtype=bool)
    mask[:len(presets)] = True
    return table, mask


def choose(df: pd.DataFrame, objective: str, max_power_w: float | None, max_epoch_time_s: float | None,
           confidence: float, presets: np.ndarray | None = None) -> Choice:
    """Best mode for ``objective`` among the modes meeting the limits (checked values), and the front.

    ``df`` holds predictions at ``confidence`` (its ``_high`` columns are the bounds the limits use).
    The front is time vs energy (point predictions), fastest first, of the feasible modes the out-of-range
    rule lets stand: those ``best`` is picked from, so ``best`` is on it and no member dominates it. Ties on
    the objective go to the other quantity. ``presets``: mask of the rows that are the device's nvpmodel presets
    (:func:`with_presets`); the best of those meeting the limits that the out-of-range rule lets stand is
    chosen whenever its point prediction beats the mode that rule picks (:func:`pick`).
    """
    key = OBJECTIVES[objective]
    other = "epoch_energy_j" if key == "epoch_time_s" else "epoch_time_s"
    ok = feasible_mask(df, max_power_w, max_epoch_time_s)
    empty = np.zeros(0, dtype=int)
    if not ok.any():
        reason = _why_infeasible(df, max_power_w, max_epoch_time_s, confidence)
        return Choice(None, empty, False, reason, False)
    got = pick(df[key].to_numpy(dtype=float), df[other].to_numpy(dtype=float),
               df[f"{key}_high"].to_numpy(dtype=float), ok, extrapolated_mask(df), presets)
    # A discarded extrapolated mode would dominate ``best`` on a front of every feasible mode.
    front = pareto_positions(df, ok if got.stands is None else ok & got.stands, "epoch_time_s", "epoch_energy_j")
    return Choice(got.best, front, True, None, got.preferred_in_range, got.preset, got.preferred_preset)


#: Columns of the preset a recommendation is compared with (see :func:`preset_comparison`).
PRESET_COMPARISON_COLUMNS = ("epoch_time_s", "epoch_time_s_high", "epoch_energy_j", "epoch_energy_j_high",
                             "avg_power_w", "avg_power_w_high")


def _saving(preset: object, chosen: object) -> tuple[float | None, float | None]:
    """(preset - chosen, that as a share of the preset): positive when the chosen mode saves; None when
    either is unknown."""
    p, c = finite_or_none(preset), finite_or_none(chosen)
    if p is None or c is None:
        return None, None
    return p - c, ((p - c) / p if p else 0.0)


def preset_comparison(best: dict | None, preset: dict | None, objective: str, max_power_w: float | None,
                      max_epoch_time_s: float | None, confidence: float) -> dict[str, object]:
    """The chosen mode (``best``, a prediction row) against the best preset (``preset``) meeting the same
    limits at the same ``confidence``: the preset's name, time (s), energy (J) and power (W), and the
    saving of the chosen mode against it (s and J, and as shares of the preset's; positive = saved).
    ``preset`` None: no preset meets the limits, and ``reason`` says so."""
    out: dict[str, object] = {"objective": objective, "preset": None, "chosen_is_preset": False,
                              **dict.fromkeys(PRESET_COMPARISON_COLUMNS),
                              "time_saving_s": None, "time_saving_share": None,
                              "energy_saving_j": None, "energy_saving_share": None, "reason": None}
    if preset is None:
        limits = ", ".join(f"{k}={v:g}" for k, v in (("max_power_w", max_power_w),
                                                      ("max_epoch_time_s", max_epoch_time_s)) if v is not None)
        out["reason"] = (f"no nvpmodel preset meets {limits or 'the limits'} at confidence {confidence:g}")
        return out
    out["preset"] = str(preset["mode"])
    out.update({c: finite_or_none(preset[c]) for c in PRESET_COMPARISON_COLUMNS})
    if best is not None:
        out["chosen_is_preset"] = (all(finite_or_none(best[k]) == finite_or_none(preset[k]) for k in MODE_FIELDS)
                                   and best["mode"] == preset["mode"])
        out["time_saving_s"], out["time_saving_share"] = _saving(preset["epoch_time_s"], best["epoch_time_s"])
        out["energy_saving_j"], out["energy_saving_share"] = _saving(preset["epoch_energy_j"],
                                                                     best["epoch_energy_j"])
    return out
