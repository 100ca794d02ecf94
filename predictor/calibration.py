"""Interval calibration on real measurements: the scales of :data:`constants.INTERVAL_SCALES` [E11].

Targets are the real AGX Xavier sweeps (ResNet-18/CIFAR-10, MobileNetV3/GLD-23k and the CPU-bound
LeNet-5/MNIST on the published modes a-j, POMACS 2022 Fig 9, ``models/reference/agx-xavier-published.csv``).
For each target, every design of 1-4 profiled modes among a-j is fitted under three references that do not
contain it (the other real workloads; a twin sweep of the opposite regime, its CPU-bound LeNet-5 for the
GPU-bound targets and its ResNet-18 for LeNet-5; another device's sweeps moved through physics) and scored
on its held-out modes: a jackknife over designs and references.
Per stratum of design sizes (1, 2, 3+ profiled modes: ``POOLED_FROM_MODES``) and output (time, power,
energy) the scale of the model's own relative SD is the smallest on ``SCALE_GRID`` under which the nominal
90% intervals hold at least ``POOLED_COVERAGE`` of that stratum's held-out real values and ``CELL_COVERAGE``
in each of its (target, reference, size) cells. Run ``python -m tools.calibrate_intervals`` to recompute.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import ModeArrays, load_device
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor.constants import (
    CELL_COVERAGE,
    POOLED_COVERAGE,
    POOLED_FROM_MODES,
    SCALE_GRID,
    IntervalScales,
)
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE, MAX_CONFIDENCE
from jetpredict.predictor.model import fit_with_reference, z_of
from jetpredict.predictor.reference import (
    REFERENCE_DIR,
    DeviceReference,
    build_reference,
    read_simulated_rows,
)
from jetpredict.predictor.transfer import derive_reference

OUTPUTS = ("time", "power", "energy")

#: The device of the real targets and of every reference they are scored against.
TARGET_DEVICE = "agx-xavier"


def real_targets() -> pd.DataFrame:
    return read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")


#: The real CPU-bound target; the twin's sweep of the opposite regime is its ResNet-18 for it, its
#: LeNet-5 for the others.
CPU_BOUND_TARGET = "lenet5-mnist"


def opposite_regime(target: str) -> str:
    """The twin workload of the other regime than ``target``."""
    return "resnet18-cifar10" if target == CPU_BOUND_TARGET else CPU_BOUND_TARGET


#: The three references of a target, in the order :func:`references` and :func:`residual_cells` give them.
CASES = ("other real", "opposite regime", "other device")


class SimulatedReferences:
    """The simulated references ("opposite regime", "other device"), each built on first use and kept by this
    object: pass one to :func:`references` for every target of one computation so the shared references are
    built once, not per target. The CSVs come from :func:`reference.read_simulated_rows`, whose cache is keyed
    by each file's mtime and size, so a fresh object after an edited CSV builds from the edit."""

    def __init__(self) -> None:
        self._opposite: dict[str, DeviceReference] = {}
        self._other_device: DeviceReference | None = None

    def opposite_regime(self, target: str) -> DeviceReference:
        """The twin's AGX Xavier sweep of the regime opposite to ``target``'s."""
        workload = opposite_regime(target)
        if workload not in self._opposite:
            twin = _simulated_rows(TARGET_DEVICE)
            self._opposite[workload] = build_reference(twin[twin["workload"] == workload], TARGET_DEVICE)
        return self._opposite[workload]

    def other_device(self) -> DeviceReference:
        """Xavier NX's simulated sweeps moved to AGX Xavier through device physics (the same for every target)."""
        if self._other_device is None:
            nx = build_reference(_simulated_rows("xavier-nx"), "xavier-nx")
            self._other_device = derive_reference(nx, load_device(TARGET_DEVICE))
        return self._other_device


def _simulated_rows(device_id: str) -> pd.DataFrame:
    rows = read_simulated_rows(device_id)
    if rows is None:
        raise FileNotFoundError(f"calibration needs {device_id}'s simulated sweeps: no "
                                f"{device_id}-simulated*.csv in {REFERENCE_DIR}")
    return rows


def references(real: pd.DataFrame, target: str, cases: Iterable[str] | None = None,
               simulated: SimulatedReferences | None = None) -> dict[str, DeviceReference]:
    """The references of ``target`` among :data:`CASES` (none contains it; "other real" is the rest of
    ``real``), in that order. ``cases``: build only those (default all; other names are ignored).
    ``simulated``: where the simulated ones are taken from (default a fresh :class:`SimulatedReferences`)."""
    wanted = CASES if cases is None else tuple(cases)
    simulated = SimulatedReferences() if simulated is None else simulated
    build = {"other real": lambda: build_reference(real[real["workload"] != target], TARGET_DEVICE),
             "opposite regime": lambda: simulated.opposite_regime(target),
             "other device": simulated.other_device}
    return {case: make() for case, make in build.items() if case in wanted}


def residual_cells(sizes: Iterable[int] = (1, 2, 3, 4), cases: Iterable[str] | None = None,
                   targets: Iterable[str] | None = None, excluded: Iterable[str] = ()
                   ) -> dict[tuple[str, str, int], dict[str, np.ndarray]]:
    """Per (target, reference, design size) and output: rows of ``|ln(observed / predicted)|``, the
    model's own relative SD, the rest of the relative SD (noise and extrapolation) and 1 when the workload
    lies outside the reference's regime (else 0), one per held-out (design, mode) pair. ``targets``: the
    real workloads to score (default all). ``excluded``: real workloads neither scored nor in any reference,
    so scales calibrated on these cells are out of sample for them."""
    excluded = tuple(excluded)
    cases = None if cases is None else tuple(cases)  # read once per target
    real = real_targets()
    real = real[~real["workload"].isin(excluded)]
    scored = set(real["workload"]) if targets is None else [t for t in targets if t not in excluded]
    cells: dict[tuple[str, str, int], dict[str, np.ndarray]] = {}
    simulated = SimulatedReferences()  # shared by the targets: the simulated references are built once
    for target in sorted(scored):
        rows = real[real["workload"] == target].reset_index(drop=True)
        # Held-out modes and readings taken once per target: each design only masks them.
        all_modes = ModeArrays.from_frame(rows)
        all_t_obs = rows["epoch_time_s"].to_numpy(float)
        all_e_obs = rows["epoch_energy_j"].to_numpy(float)
        for case, ref in references(real, target, cases, simulated).items():
            for size in sizes:
                parts: dict[str, list[np.ndarray]] = {k: [] for k in OUTPUTS}
                for pick in map(list, itertools.combinations(range(len(rows)), size)):
                    held_out = np.ones(len(rows), dtype=bool)
                    held_out[pick] = False
                    model = fit_with_reference(rows.iloc[pick], ref)
                    t, pw, _ = model.parts(all_modes.take(held_out))
                    t_obs, e_obs = all_t_obs[held_out], all_e_obs[held_out]
                    p_obs = e_obs / t_obs
                    # Out-of-regime widening (regime.regime_factor) is part of the rest, not calibrated.
                    sds = model.relative_sds(t, pw)
                    # Outside the references' regime no scale narrows the model's SD (IntervalScales.in_regime).
                    outside = np.full(len(t_obs), float(model.interval_scales.extrapolation > 1.0))
                    for out, obs, pred in (("time", t_obs, t.epoch_s), ("power", p_obs, pw.power_w),
                                           ("energy", e_obs, pw.power_w * t.epoch_s)):
                        parts[out].append(np.column_stack([np.abs(np.log(obs / pred)), *sds[out], outside]))
                cells[(target, case, size)] = {k: np.vstack(v) for k, v in parts.items()}
    return cells


def half_width(scale: float, rows: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> np.ndarray:
    """Half-width (ln units) of the nominal ``confidence`` interval of each of ``rows`` at ``scale`` (at
    least 1 for rows of a workload outside the references' regime, as :meth:`IntervalScales.in_regime`
    applies it)."""
    applied = np.where(rows[:, 3] > 0, max(scale, 1.0), scale)
    return z_of(confidence) * np.sqrt((applied * rows[:, 1]) ** 2 + rows[:, 2] ** 2)


def coverage(scale: float, rows: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> float:
    """Share of ``rows`` (from :func:`residual_cells`) inside the nominal ``confidence`` interval at ``scale``."""
    return float(np.mean(rows[:, 0] <= half_width(scale, rows, confidence)))


def stratum(size: int) -> int:
    """The calibration stratum (the key of ``INTERVAL_SCALES``) of designs of ``size`` profiled modes."""
    return min(size, POOLED_FROM_MODES)


def strata(cells: dict[tuple[str, str, int], dict[str, np.ndarray]]
           ) -> dict[int, dict[tuple[str, str, int], dict[str, np.ndarray]]]:
    """``cells`` (from :func:`residual_cells`) grouped by the :func:`stratum` of their design size, strata in
    increasing order, cells in their order."""
    out: dict[int, dict[tuple[str, str, int], dict[str, np.ndarray]]] = {}
    for key, c in cells.items():
        out.setdefault(stratum(key[2]), {})[key] = c
    return dict(sorted(out.items()))


def tail_coverage(cells: dict[tuple[str, str, int], dict[str, np.ndarray]], scales: Mapping[int, IntervalScales],
                  output: str, confidence: float) -> tuple[float, float, tuple[str, str, int]]:
    """The check beyond the calibrated level: the share of every cell's held-out real values inside the
    nominal ``confidence`` intervals under ``scales`` (per stratum), pooled, and the lowest cell's."""
    shares = {key: (coverage(getattr(scales[stratum(key[2])], output), c[output], confidence), len(c[output]))
              for key, c in cells.items()}
    pooled = sum(share * n for share, n in shares.values()) / sum(n for _, n in shares.values())
    worst = min(shares, key=lambda key: shares[key][0])
    return pooled, shares[worst][0], worst


def calibrate(cells: dict[tuple[str, str, int], dict[str, np.ndarray]]) -> dict[int, IntervalScales]:
    """Per stratum of design sizes (:func:`stratum`), the smallest scale per output meeting
    :data:`POOLED_COVERAGE` over that stratum's held-out values and :data:`CELL_COVERAGE` in each of its cells
    (a stratified, Mondrian-style split: one profiled mode leaves the shares to the prior, three or more pin
    them, and one scale cannot fit both), and whose ``MAX_CONFIDENCE`` intervals hold that share of the pooled
    values: every level a user may ask for is backed by the real data, not only the calibrated 90%."""
    out: dict[int, IntervalScales] = {}
    for group, members in strata(cells).items():
        grouped = list(members.values())
        scales = {}
        for name in OUTPUTS:
            pooled = np.vstack([c[name] for c in grouped])
            scales[name] = float(SCALE_GRID[-1])
            for s in SCALE_GRID:
                if coverage(s, pooled) >= POOLED_COVERAGE and min(coverage(s, c[name]) for c in grouped) \
                        >= CELL_COVERAGE and coverage(s, pooled, MAX_CONFIDENCE) >= MAX_CONFIDENCE:
                    scales[name] = float(s)
                    break
        out[group] = IntervalScales(**scales)
    return out
