"""The decision a fitted model supports, and how unsure it is: the mode ``recommend`` would pick under the
user's goal (objective and caps met by the interval's upper end) over a decision set, its rivals, and the
uncertainty adaptive profiling (:mod:`.adaptive`) drives down.

The decision's uncertainty (:func:`decide`, dimensionless) is

    U = w(best) + sum over the K strongest rivals of P(rival beats best) x w(rival)

where ``w`` is the relative width (high - low) / point of the objective's interval (time for min-time,
energy for min-energy) and a rival is any other mode of the decision set; P(rival beats best) is the
normal probability, on log scale, that its objective is below the best one's (SDs from the rival's lower
half-interval and the best's upper one), times the probability that it meets the caps (from its power /
time interval). Time keeps physics: more cores and faster clocks never slow an epoch, so a mode's lower
bound is at least that of any mode of the set that dominates it (:func:`dominance_floor`), and no mode the
best dominates is a rival for min-time. The first term is how
sure the chosen mode's figure is; the second, how likely another mode on or near the front overturns the
choice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, Device, ModeArrays
from jetpredict.predictor import recommend as rec
from jetpredict.predictor.bundled import predict_modes
from jetpredict.predictor.checks import check_confidence, check_limit, check_objective
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE, DEFAULT_OBJECTIVE, OBJECTIVES
from jetpredict.predictor.model import WorkloadModel, z_of
from scipy.special import ndtr


def norm_pdf(x: np.ndarray) -> np.ndarray:
    """Standard normal density."""
    return np.exp(-0.5 * np.square(x)) / math.sqrt(2.0 * math.pi)

#: Rivals counted in the decision's uncertainty (the strongest by P(beats best) x width).
RIVALS = 8
#: No more profiling is proposed for caps that no mode meets when even the likeliest mode's chance to meet
#: them once profiled (its point against the cap, :func:`_meets_caps`) is below this: the points already
#: lie that far over the cap, and each mode profiled on a real board costs minutes (set by hand).
UNREACHABLE_CAP_CHANCE = 0.05


@dataclass(frozen=True)
class Goal:
    """What the user decides: ``objective`` (min-time | min-energy), caps met by the interval's upper end
    at ``confidence`` (W, s; None = no cap)."""

    objective: str = DEFAULT_OBJECTIVE
    max_power_w: float | None = None
    max_epoch_time_s: float | None = None
    confidence: float = DEFAULT_CONFIDENCE

    def checked(self, device: Device) -> Goal:
        """The goal with every field checked, the power cap against ``device``'s range as ``recommend``
        checks it (InputError naming the field and the rule)."""
        cap = device.check_power_cap(check_limit(self.max_power_w, "max_power_w"), "max_power_w")
        return Goal(check_objective(self.objective), cap,
                    check_limit(self.max_epoch_time_s, "max_epoch_time_s"),
                    check_confidence(self.confidence))

    def describe(self) -> str:
        caps = []
        if self.max_power_w is not None:
            caps.append(f"power <= {self.max_power_w:g} W")
        if self.max_epoch_time_s is not None:
            caps.append(f"epoch <= {self.max_epoch_time_s:g} s")
        return f"{self.objective}" + (f" under {' and '.join(caps)}" if caps else "")


@dataclass(frozen=True)
class Decision:
    """The recommendation a model makes over a decision set, and how unsure it is.

    ``best``: position of the recommended mode in the set (None when no mode meets the caps);
    ``time_width_rel``/``objective_width_rel``: its relative interval widths; ``rivals``: positions of the
    strongest rivals with ``rival_p``, the probability each beats the best; ``uncertainty``: U above;
    ``rival_gain``: the largest expected relative gain of any mode over the best (see
    :data:`.limits.MAX_RIVAL_GAIN`).
    """

    table: pd.DataFrame = field(repr=False)
    best: int | None
    time_width_rel: float
    objective_width_rel: float
    rivals: np.ndarray = field(repr=False)
    rival_p: np.ndarray = field(repr=False)
    uncertainty: float
    rival_gain: float = math.inf
    reason: str | None = None
    #: Position of the unprofiled mode with that largest expected gain (None when no mode has any).
    top_rival: int | None = None

    @property
    def best_row(self) -> dict[str, Any] | None:
        return None if self.best is None else self.table.iloc[self.best].to_dict()


def _table(model: WorkloadModel, modes: pd.DataFrame, labelled: ModeArrays, confidence: float) -> pd.DataFrame:
    """Predictions of ``modes`` (mode column + knobs; ``labelled``: them with the GPU share their labels give)
    as a table ``recommend.choose`` reads."""
    pred = predict_modes(model, labelled, None, confidence).columns()
    data = {"mode": modes["mode"].to_numpy(), **{k: modes[k].to_numpy(dtype=float) for k in MODE_FIELDS}}
    data.update({k: v for k, v in pred.items() if isinstance(v, np.ndarray)})
    return pd.DataFrame(data)


def _upper_log_sd(df: pd.DataFrame, column: str, z: float) -> np.ndarray:
    """SD on log scale of a column's upper half-interval, (ln high - ln point) / z: what a cap met by the
    interval's upper end reads (time bounds keep physics, so the two halves may differ)."""
    point = np.maximum(df[column].to_numpy(dtype=float), 1e-12)
    return (np.log(np.maximum(df[f"{column}_high"].to_numpy(dtype=float), 1e-12)) - np.log(point)) / z


#: Largest lattice of distinct knob values :func:`dominance_floor` builds (cells): a device's own modes
#: lie on its steps (AGX Xavier's 29,232 fill 29,232 cells); a list of arbitrary clocks may not.
MAX_LATTICE_CELLS = 2_000_000


def dominance_floor(knobs: np.ndarray, values: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Per row of ``knobs`` (modes x knobs), the largest ``values`` among the ``eligible`` rows whose every knob
    is at least its own (itself included): more cores and faster clocks never slow an epoch, so a lower bound
    of a mode's time is one of every mode it dominates too. Rows not ``eligible`` keep their value, and so
    do all when the distinct knob values span more than :data:`MAX_LATTICE_CELLS` cells."""
    out = np.asarray(values, dtype=float).copy()
    if not eligible.any():
        return out
    uniques, index = zip(*(np.unique(col, return_inverse=True) for col in knobs[eligible].T), strict=True)
    shape = tuple(len(u) for u in uniques)
    if int(np.prod(shape, dtype=float)) > MAX_LATTICE_CELLS:
        return out
    lattice = np.full(shape, -np.inf)
    np.maximum.at(lattice, tuple(index), out[eligible])
    for axis in range(lattice.ndim):  # the max over every cell at or above each cell, one axis at a time
        lattice = np.flip(np.maximum.accumulate(np.flip(lattice, axis), axis=axis), axis)
    out[eligible] = lattice[tuple(index)]
    return out


def _width(df: pd.DataFrame, column: str) -> np.ndarray:
    point = df[column].to_numpy(dtype=float)
    return (df[f"{column}_high"].to_numpy(dtype=float) - df[f"{column}_low"].to_numpy(dtype=float)) / point


def _meets_caps(df: pd.DataFrame, goal: Goal, z: float, profiled: np.ndarray | None = None) -> np.ndarray:
    """Probability (normal, log scale) that each mode, once profiled, meets the caps as ``recommend`` holds
    them: by its interval's upper end, not its point. A profiled mode keeps about the interval of those
    profiled already (``profiled``: their mask; the median of their log SDs), so a mode certifies only if
    its power (time) lies that margin under the cap; with none profiled the margin is 0."""
    p = np.ones(len(df))
    for column, cap in (("avg_power_w", goal.max_power_w), ("epoch_time_s", goal.max_epoch_time_s)):
        if cap is not None:
            point = np.maximum(df[column].to_numpy(dtype=float), 1e-12)
            sd = np.maximum(_upper_log_sd(df, column, z), 1e-9)
            margin = z * float(np.median(sd[profiled])) if profiled is not None and profiled.any() else 0.0
            p *= ndtr((math.log(cap) - margin - np.log(point)) / sd)
    return p


def decide(model: WorkloadModel, modes: pd.DataFrame, goal: Goal, open_: np.ndarray | None = None,
           presets: np.ndarray | None = None) -> Decision:
    """The recommendation over ``modes`` (a checked mode table) and its uncertainty U (module docstring).

    ``open_``: the modes not profiled yet (default all); ``rival_gain`` counts only those, since more
    profiling cannot narrow a profiled mode's interval below its run-to-run noise. ``presets``: the rows
    that are nvpmodel presets, preferred as ``recommend`` prefers them (:func:`.recommend.choose`).
    """
    labelled = model.device.labelled_modes(modes)
    df = _table(model, modes, labelled, goal.confidence)
    choice = rec.choose(df, goal.objective, goal.max_power_w, goal.max_epoch_time_s, goal.confidence, presets)
    empty = np.zeros(0, dtype=int)
    if choice.best is None:
        return Decision(df, None, math.inf, math.inf, empty, np.zeros(0), math.inf, reason=choice.reason)
    key = OBJECTIVES[goal.objective]
    z = z_of(goal.confidence)
    b = choice.best
    value = np.maximum(df[key].to_numpy(dtype=float), 1e-12)
    low = np.maximum(df[f"{key}_low"].to_numpy(dtype=float), 1e-12)
    meets = _meets_caps(df, goal, z, None if open_ is None else ~open_)
    if key == "epoch_time_s":
        knobs, ungated = np.column_stack(labelled.arrays()), ~labelled.gated
        low = np.minimum(dominance_floor(knobs, low, ungated), value)
        if ungated[b]:  # no mode the best dominates (a gated GPU less still) is faster
            meets = np.where(np.all(knobs <= knobs[b], axis=1), 0.0, meets)
    # A mode overturns the choice if it comes out lower than the best: its interval's lower half against the
    # best's upper half (log scale).
    down = np.maximum(np.log(value) - np.log(low), 0.0) / z
    spread = np.maximum(np.hypot(down, _upper_log_sd(df, key, z)[b]), 1e-9)
    gap = math.log(value[b]) - np.log(value)  # > 0 where a mode's point beats the best's
    p = ndtr(gap / spread) * meets
    p[b] = 0.0
    # Expected gain on log scale of switching to each mode: E[max(0, N(gap, spread^2))].
    gain = (spread * norm_pdf(gap / spread) + gap * ndtr(gap / spread)) * meets
    gain[b] = 0.0
    widths = _width(df, key)
    weight = p * widths
    rivals = np.argsort(-weight, kind="stable")[:RIVALS]
    rivals = rivals[weight[rivals] > 0]
    u = float(widths[b] + weight[rivals].sum())
    if open_ is not None:
        gain = np.where(open_, gain, 0.0)
    top = int(np.argmax(gain))
    return Decision(df, b, float(_width(df, "epoch_time_s")[b]), float(widths[b]), rivals, p[rivals], u,
                    float(gain[top]), top_rival=top if gain[top] > 0 else None)


def unreachable_caps(decision: Decision, goal: Goal) -> str | None:
    """Why profiling more cannot help ``decision`` (None when it can): no mode meets the caps, and none has
    even :data:`UNREACHABLE_CAP_CHANCE` to meet them by its point once profiled."""
    if decision.best is None and (goal.max_power_w is not None or goal.max_epoch_time_s is not None):
        chance = _meets_caps(decision.table, goal, z_of(goal.confidence))
        likeliest = float(chance.max()) if chance.size else 0.0
        if likeliest < UNREACHABLE_CAP_CHANCE:
            return (f"even the likeliest mode has a {likeliest:.1%} chance to meet the caps once profiled: relax "
                    f"them (profiling more cannot help)")
    return None
