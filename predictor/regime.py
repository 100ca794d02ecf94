"""Which reference workloads a workload's rows resemble, and how far outside them it lies.

The rows' own measured split (stall and compute shares, core contrast) weights the reference workloads in
the prior and the contention constants (:func:`regime_weights`, :func:`regime_kappas`,
:func:`regime_prior`) [E8], lets a pipeline heavier than the references' measure its own contention
(:func:`own_contention`) [E5], and, beyond the span of the reference workloads, widens the extrapolation
part of the intervals (:func:`regime_evidence`, :func:`regime_factor`) [E10].
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from jetpredict.models.catalogue import ModeArrays
from jetpredict.predictor import features as F
from jetpredict.predictor.constants import (
    KAPPA_FACTORS,
    KAPPA_GRID,
    REGIME_FACTOR_MAX,
    REGIME_NEAR,
    REGIME_SIMILARITY_SCALE,
    REGIME_TOLERANCE,
)
from jetpredict.predictor.reference import DeviceReference, shape_prior
from jetpredict.predictor.terms import ProfileArrays, ShapePrior


def core_contrast(modes: ModeArrays, ln_time_s: np.ndarray) -> float | None:
    """Mean ln time ratio (fewer cores over more cores) over pairs of distinct modes whose clocks are equal
    and whose core counts differ, each mode at its rows' mean ln time; None without such a pair.

    Rows at one mode are merged first, and pairs form only within a clock setting (at most a dozen core
    counts each), so the cost is O(n log n) in the rows. Plain numpy: a fit asks for it once per reference
    workload and evidence kind on a handful of modes, where a table merge cost ~10 ms a call."""
    mode_id, clock_id = modes.setting_ids()
    count = np.bincount(mode_id)
    clock = np.bincount(mode_id, clock_id) / count  # one clock id per mode: exact integers
    cores = np.bincount(mode_id, modes.cpu_cores) / count
    ln_t = np.bincount(mode_id, ln_time_s) / count
    order = np.argsort(clock, kind="stable")
    clock, cores, ln_t = clock[order], cores[order], ln_t[order]
    # Every (mode, mode of the same clock setting) pair at once: each mode repeated once per member of its
    # setting, against that setting's members in turn.
    new_setting = np.r_[True, clock[1:] != clock[:-1]]
    starts = np.flatnonzero(new_setting)
    setting = np.cumsum(new_setting) - 1
    size = np.diff(np.r_[starts, len(clock)])[setting]
    left = np.repeat(np.arange(len(clock)), size)
    right = np.repeat(starts[setting], size) + np.arange(len(left)) - np.repeat(np.cumsum(size) - size, size)
    few = cores[left] < cores[right]
    diffs = ln_t[left[few]] - ln_t[right[few]]
    return float(diffs.mean()) if diffs.size else None


def _evidence_of(coefs: Mapping[str, np.ndarray], modes: ModeArrays, num_workers: np.ndarray,
                 kappas: tuple[float, float]) -> dict[str, float]:
    """Regime evidence of per-component term coefficients at ``modes``: stall share, CPU-side share
    (CPU, pipeline and clock-independent terms) and core contrast (ln time ratio of fewer to more cores)."""
    feats = F.time_features(modes, num_workers, *kappas)
    total = F.design(feats, F.TOTAL_TERMS) @ F.total_coefs(coefs)
    total = np.maximum(total, 1e-12)
    coef = dict(zip(F.TOTAL_TERMS, F.total_coefs(coefs), strict=True))
    cpu_side = sum(coef[t] * feats[t] for t in F.CPU_SIDE_TERMS) + coef["one"]
    out = {"cpu_share": float(np.mean(cpu_side / total))}
    if "stall" in coefs:
        stall = F.design(feats, F.COMPONENT_TERMS["stall"]) @ np.asarray(coefs["stall"], dtype=float)
        out["stall_share"] = float(np.mean(stall / total))
    contrast = core_contrast(modes, np.log(total))
    if contrast is not None:
        out["core_contrast"] = contrast
    return out


def _implied_kappa(rows: ProfileArrays, component: np.ndarray, terms: tuple[str, ...]) -> float | None:
    """Contention constant that best explains ``component`` times (s) of rows with >= 2 core counts as
    ``terms`` (``cpu`` or ``pipe`` contended, the others clock terms), non-negative least squares in
    relative error over ``KAPPA_GRID``. None when the rows do not vary the cores or
    number no more than the terms."""
    if len(np.unique(rows.modes.cpu_cores)) < 2 or len(rows) <= len(terms):
        return None
    # Imported here, not at the top: a fit needs it, a prediction from a fitted model does not (0.14 s a start).
    from scipy.optimize import nnls

    y = component / rows.epoch_time_s
    best, best_k = np.inf, None
    clocks = F.time_features(rows.modes, rows.num_workers, 0.0, 0.0)  # the clock terms, the same for every k
    for k in KAPPA_GRID:
        feats = F.with_contention(clocks, rows.modes, rows.num_workers, k, k)
        x = F.design(feats, terms) / rows.epoch_time_s[:, None]
        err = float(nnls(x, y)[1])
        if err < best - 1e-12:
            best, best_k = err, float(k)
    return best_k


def own_contention(rows: ProfileArrays, kappas: tuple[float, float],
                   span: Mapping[str, tuple[float, float]]) -> tuple[float, float]:
    """Contention constants ``kappas`` (CPU, pipeline) moved to what the rows' own measured components say
    when the rows' stall share lies above the reference workloads' (``span``, :func:`reference_span` at the
    rows' modes; beyond ``REGIME_TOLERANCE``): lowered when that lies below the spread between workloads
    (``KAPPA_FACTORS``), raised whenever it is higher [E5].

    The stall is the data pipeline's CPU work (and its memory traffic), so its change with the cores
    measures the pipeline's contention (:func:`_implied_kappa`). A light pipeline implies far less than the
    references, whose constants would read its small core contrast as "no CPU work". The main thread
    competes with the same workers, so the CPU constant moves by the same factor, within what the
    compute time's own core contrast implies (below the references' constant when it implies less).
    """
    if kappas[1] <= 0 or not rows.measured_components:
        return kappas
    # Only a pipeline heavier than the references' is measured well enough to overrule their constants: a
    # stall of ~1% of the epoch barely moves with the cores whatever the constant [E5].
    _, stall_high = span.get("stall_share", (0.0, np.inf))
    if float(np.mean(rows.stall_time_s / rows.epoch_time_s)) <= stall_high + REGIME_TOLERANCE["stall_share"]:
        return kappas
    pipe = _implied_kappa(rows, rows.stall_time_s, ("pipe", "pmem", "emc"))
    if pipe is None or KAPPA_FACTORS[0] <= pipe / kappas[1] <= 1.0:
        return kappas
    if pipe > kappas[1]:
        # A pipeline busier than the references' contends more: its own constant, the main thread's
        # raised by the same factor up to what the compute's own core contrast allows, below the
        # references' when it says less (real LeNet-5: 0.625 from its compute, 0.875 from its stall) [E5].
        cpu_cap = _implied_kappa(rows, rows.compute_time_s, ("cpu", "cmem"))
        # A compute that implies no contention (0.0) caps it at 0, not at the references' constant.
        return min(kappas[0] * pipe / kappas[1], kappas[0] if cpu_cap is None else cpu_cap), pipe
    factor = pipe / kappas[1]
    # All of the compute as main-thread work: the least contention its core contrast allows.
    cpu_floor = _implied_kappa(rows, rows.compute_time_s, ("cpu",)) or 0.0
    return min(kappas[0], max(kappas[0] * factor, cpu_floor)), pipe


def regime_evidence(coefs: Mapping[str, np.ndarray], kappas: tuple[float, float], rows: ProfileArrays,
                    span: Mapping[str, tuple[float, float]]
                    ) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """The workload's own regime evidence at its profiled modes (its fitted per-component time coefficients
    ``coefs`` under contention constants ``kappas``), and of ``span`` (the reference workloads' values at the
    same modes, :func:`reference_span`) the kinds it has: stall share (measured when the rows carry it), core
    contrast (measured, from rows that differ only in cores) and fitted CPU-side share."""
    own = _evidence_of(coefs, rows.modes, rows.num_workers, kappas)
    if np.isfinite(rows.stall_time_s).all():
        own["stall_share"] = float(np.mean(rows.stall_time_s / rows.epoch_time_s))
    contrast = core_contrast(rows.modes, np.log(rows.epoch_time_s))
    if contrast is not None:
        own["core_contrast"] = contrast
    return own, {k: v for k, v in span.items() if k in own}


def reference_span(rows: ProfileArrays, ref: DeviceReference) -> dict[str, tuple[float, float]]:
    """(low, high) of each kind of regime evidence over the reference workloads, at the rows' modes."""
    refs = [_evidence_of(shape, rows.modes, rows.num_workers, ref.kappas) for shape in ref.workload_shapes.values()]
    if not refs:
        return {}
    return {k: (min(r[k] for r in refs), max(r[k] for r in refs)) for k in refs[0] if all(k in r for r in refs)}


def regime_factor(own: Mapping[str, float], span: Mapping[str, tuple[float, float]]) -> float:
    """Multiplier (1..REGIME_FACTOR_MAX) of the extrapolation SDs for evidence ``own`` against the
    reference workloads' ``span``: the share of the epoch of a kind the reference never exhibited, beyond
    ``REGIME_TOLERANCE`` [E10]. The fitted CPU-side share counts only when nothing is measured."""
    excess = 0.0
    measured = {"stall_share", "core_contrast"} & set(span)
    for key, (low, high) in span.items():
        if measured and key not in measured:
            continue
        beyond = max(own[key] - high, low - own[key], 0.0)
        excess = max(excess, beyond - REGIME_TOLERANCE[key])
    return float(min(1.0 + excess, REGIME_FACTOR_MAX))


def regime_weights(rows: ProfileArrays, ref: DeviceReference) -> dict[str, float] | None:
    """Normalised weight per reference workload: ``exp(-d^2 / 2 REGIME_SIMILARITY_SCALE^2)`` of the RMS
    difference d between its stall and compute shares at the rows' modes and the rows' measured ones;
    None when the rows measure no components, the reference has one workload, or none lies within
    ``REGIME_NEAR`` scales: look-alikes pool, a workload of the other regime gets almost no weight [E8]."""
    shapes = ref.workload_shapes
    if len(shapes) < 2 or not rows.measured_components or any("total" in c for c in shapes.values()):
        return None
    feats = F.time_features(rows.modes, rows.num_workers, *ref.kappas)
    own = np.concatenate([rows.stall_time_s / rows.epoch_time_s, rows.compute_time_s / rows.epoch_time_s])
    weights = {}
    for w, comps in shapes.items():
        parts = {n: F.design(feats, F.COMPONENT_TERMS[n]) @ np.asarray(c, dtype=float) for n, c in comps.items()}
        epoch = np.maximum(sum(parts.values()), 1e-12)
        theirs = np.concatenate([parts["stall"] / epoch, parts["compute"] / epoch])
        d = float(np.sqrt(np.mean((own - theirs) ** 2)))
        weights[w] = float(np.exp(-0.5 * (d / REGIME_SIMILARITY_SCALE) ** 2))
    # Beyond REGIME_NEAR scales from every reference workload, none describes the rows: pool them all.
    if max(weights.values()) < np.exp(-0.5 * REGIME_NEAR ** 2):
        return None
    total = sum(weights.values())
    return {w: v / total for w, v in weights.items()}


def regime_kappas(weights: Mapping[str, float] | None, ref: DeviceReference) -> tuple[float, float]:
    """The contention constants of the reference workloads the rows resemble (weighted mean of their own,
    :attr:`DeviceReference.workload_kappas`); the pooled ones without weights or per-workload constants."""
    if not weights or not all(w in ref.workload_kappas for w in weights):
        return ref.kappas
    pairs = np.array([ref.workload_kappas[w] for w in weights])
    k = np.array(list(weights.values())) @ pairs
    return float(k[0]), float(k[1])


def regime_prior(rows: ProfileArrays, ref: DeviceReference, weights: Mapping[str, float] | None
                 ) -> ShapePrior:
    """The reference's shape prior with its mean the reference workloads' shapes under ``weights``
    (:func:`regime_weights`): the workload's own split decides its regime, and a reference of several
    regimes does not pull it toward their average. The SDs are the weighted spread around that mean,
    floored as the reference's (:func:`reference.shape_prior`). The reference's own prior without weights."""
    if weights is None:
        return ref.shape
    return shape_prior(ref.workload_shapes, F.time_features(ref.anchor_modes, rows.num_workers[:1], *ref.kappas),
                       weights)
