"""The device-level model learned from reference sweeps of other workloads on the same device.

A :class:`DeviceReference` holds what transfers between workloads on one device: the core-contention
constants, the *shape* of each time component (term coefficients normalised to 1 s of epoch at the
device's fastest preset) with its spread, the base-power model, the dynamic-power coefficients and the
noise levels. :func:`build_reference` fits one from profile rows; which sweeps a device uses by default
(bundled artifact, CSV, or derived from another device) is decided in :mod:`jetpredict.predictor.bundled`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.paths import data_path
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.models.profile_rows import DEFAULT_NUM_WORKERS
from jetpredict.predictor import features as F
from jetpredict.predictor.constants import (
    BASE_NOISE_FLOOR,
    DYNAMIC_POWER_NOISE_FLOOR,
    FALLBACK_MODULE_POWER_W,
    FALLBACK_POWER_NOISE_REL,
    FALLBACK_POWER_SHARE,
    FALLBACK_POWER_SPLIT,
    KAPPA_GRID,
    MEASURED_KAPPAS,
    POWER_NOISE_REL,
    POWER_SD_FLOOR_REL,
    POWER_SD_FLOOR_W,
    REFERENCE_TIME_NOISE_FLOOR,
    SHARE_SD_FLOOR,
    TIME_NOISE_REL,
    UNMEASURED_BASE_SD,
    UNMEASURED_BASE_SHARE,
)
from jetpredict.predictor.provenance import SOURCE_TRUST, least_trusted, source_of
from jetpredict.predictor.terms import (
    ProfileArrays,
    ShapePrior,
    TermFit,
    check_columns,
    fit_terms,
    fit_time,
    split_compute,
)

REFERENCE_DIR = data_path("reference")


@dataclass(frozen=True, eq=False)
class DeviceReference:
    """Device-level model from reference sweeps (see module docstring). Units: s, W, MHz."""

    device_id: str
    source: str
    workloads: tuple[str, ...]
    kappa_cpu: float
    kappa_pipe: float
    shape: ShapePrior
    #: Each reference workload's component coefficients normalised to 1 s at ``anchor``.
    workload_shapes: Mapping[str, Mapping[str, np.ndarray]]
    time_noise_rel: float
    base_coef: np.ndarray
    base_noise_rel: float
    power_mean: np.ndarray
    power_sd: np.ndarray
    power_noise_rel: float
    maxima: Mapping[str, float]
    anchor: tuple[float, float, float, float]
    derived_from: str | None = None
    training_sha256: str = ""
    #: Epoch time (s) of each reference workload at ``anchor``: with ``workload_shapes`` it gives the
    #: absolute term coefficients that cross-device transfer compares between devices.
    workload_anchor_s: Mapping[str, float] = field(default_factory=dict)
    #: Sweeps of the workloads shared across devices (the simulated ones) when the primary reference is
    #: another set (e.g. AGX Xavier's published sweeps): the basis of reference-workload transfer.
    transfer: DeviceReference | None = None
    #: Each reference workload's own contention constants (CPU, pipeline), fitted on its sweep alone when
    #: it varies the cores: a regime-weighted fit takes them from the workloads its rows resemble
    #: (``regime.regime_prior``). Empty: the pooled ``kappas`` for every workload.
    workload_kappas: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def anchor_modes(self) -> ModeArrays:
        return ModeArrays(*self.anchor)

    @property
    def kappas(self) -> tuple[float, float]:
        return self.kappa_cpu, self.kappa_pipe


def _sse(fits: Mapping[str, TermFit], rows: ProfileArrays, kappas: tuple[float, float], names=None) -> float:
    """Sum of squared residuals (relative to the epoch) of the component fits ``names`` (default all)."""
    feats = F.time_features(rows.modes, rows.num_workers, *kappas)
    epoch = rows.epoch_time_s
    total = 0.0
    for name, y in rows.component_targets().items():
        if names is None or name in names:
            total += float(np.sum(((y - fits[name].mean(feats)) / epoch) ** 2))
    return total


def _kappa_error(groups: Mapping[str, ProfileArrays], kappas: tuple[float, float], names) -> float:
    err = sum(_sse(fit_time(g, kappas, TIME_NOISE_REL), g, kappas, names) for g in groups.values())
    # A small pull toward moderate contention keeps kappa identified when no sweep varies cores.
    return err + 1e-6 * ((kappas[0] - 0.5) ** 2 + (kappas[1] - 1.0) ** 2)


def _fit_kappas(groups: Mapping[str, ProfileArrays]) -> tuple[float, float]:
    """Contention constants minimising the reference workloads' relative residuals (grid search).

    With measured components the search is separable: compute and rest depend on the CPU constant only,
    stall on the pipeline constant only; totals need the joint grid (a coarser one).
    """
    if all(g.measured_components for g in groups.values()):
        kc = min(KAPPA_GRID, key=lambda k: _kappa_error(groups, (k, 1.0), ("compute", "rest")))
        kp = min(KAPPA_GRID, key=lambda k: _kappa_error(groups, (kc, k), ("stall",)))
        return float(kc), float(kp)
    grid = KAPPA_GRID[::2]
    best = min(((kc, kp) for kc in grid for kp in grid), key=lambda k: _kappa_error(groups, k, None))
    return float(best[0]), float(best[1])


def summarise_shapes(shapes: Mapping[str, Mapping[str, np.ndarray]], anchor: ModeArrays,
                     kappas: tuple[float, float], workers: float = DEFAULT_NUM_WORKERS
                     ) -> tuple[ShapePrior, dict[str, dict[str, np.ndarray]], dict[str, float]]:
    """Normalise each workload's component coefficients to 1 s of epoch at ``anchor``; returns the
    per-component prior (mean, SD with the share floor), the normalised shapes and each workload's epoch
    time at ``anchor`` (s)."""
    a_feats = F.time_features(anchor, workers, *kappas)
    norm, anchors = {}, {}
    for w, comps in shapes.items():
        t_anchor = sum(float(F.design(a_feats, F.COMPONENT_TERMS[n])[0] @ c) for n, c in comps.items())
        norm[w] = {n: np.asarray(c, dtype=float) / t_anchor for n, c in comps.items()}
        anchors[w] = t_anchor
    return shape_prior(norm, a_feats), norm, anchors


def shape_prior(shapes: Mapping[str, Mapping[str, np.ndarray]], anchor_feats: Mapping[str, np.ndarray],
                weights: Mapping[str, float] | None = None) -> ShapePrior:
    """Per-component prior of normalised workload ``shapes``: their mean and spread per term (equal weights:
    the sample SD; ``weights`` summing to 1: the weighted mean and SD), the SD floored at
    ``SHARE_SD_FLOOR`` of the epoch at the anchor mode (``anchor_feats``, its time features): real workloads
    differ widely in their shares, so the prior fills only what a workload's rows leave open [E6]."""
    all_components = all("total" not in comps for comps in shapes.values())
    names = ("compute", "stall", "rest", "total") if all_components else ("total",)
    mean, sd = {}, {}
    for name in names:
        stack = np.array([(F.total_coefs(shapes[w]) if name == "total" else shapes[w][name]) for w in shapes])
        terms = F.COMPONENT_TERMS[name]
        x_anchor = np.array([float(anchor_feats[t][0]) for t in terms])
        if weights is None:
            mean[name] = stack.mean(axis=0)
            spread = stack.std(axis=0, ddof=1) if len(stack) > 1 else np.zeros(len(terms))
        else:
            w = np.array([weights[k] for k in shapes])[:, None]
            mean[name] = (w * stack).sum(axis=0)
            spread = np.sqrt((w * (stack - mean[name]) ** 2).sum(axis=0))
        sd[name] = np.maximum(spread, SHARE_SD_FLOOR / x_anchor)
    return ShapePrior(mean, sd)


def contention_for(ref: DeviceReference, rows_kind: str) -> tuple[float, float]:
    """Contention constants for a workload's rows of provenance ``rows_kind`` under ``ref``: the
    reference's own, except that measured (or published) rows never take a simulated reference's: the
    twin's contention is too weak for real hardware [E5]."""
    if ref.source == "simulated" and rows_kind != "simulated":
        return MEASURED_KAPPAS
    return ref.kappas


def rows_sha256(rows: pd.DataFrame) -> str:
    """SHA-256 of the rows' CSV text (training-data fingerprint)."""
    return hashlib.sha256(rows.to_csv(index=False, lineterminator="\n").encode()).hexdigest()


def build_reference(rows: pd.DataFrame, device_id: str | None = None,
                    power_from: DeviceReference | None = None) -> DeviceReference:
    """Fit a :class:`DeviceReference` from reference sweeps (profile rows of >= 1 workload, one device).

    ``power_from``: the device's reference whose power model (base and dynamic) serves when no workload of
    the sweeps has power readings of >= 3 modes (sweeps timed without a meter); the source is then the
    less trusted of the two. Without it such sweeps get a generic, deliberately vague power split [E7].
    """
    check_columns(rows, "reference sweeps", "reference")
    devices = sorted(set(rows["device"].astype(str)))
    if len(devices) != 1:
        raise InputError(f"reference sweeps must be of one device, got {devices}", "reference")
    dev_id = devices[0]
    if device_id is not None and device_id != dev_id:
        raise InputError(f"reference sweeps are of device {dev_id!r}, not {device_id!r}", "reference")
    device = load_device(dev_id)
    fingerprint = rows_sha256(rows)
    groups = {str(w): ProfileArrays.from_frame(g) for w, g in rows.groupby("workload", sort=True)}
    small = [w for w, g in groups.items() if len(g) < 3]
    if small:
        raise InputError(f"reference workload(s) {small} have fewer than 3 modes; a reference sweep needs "
                         f">= 3 modes per workload", "reference")
    kappas = _fit_kappas(groups)
    own_kappas = {w: _fit_kappas({w: g}) for w, g in groups.items()
                  if len(groups) > 1 and len(np.unique(g.modes.cpu_cores)) > 1}
    maxima = F.device_maxima(device)
    anchor = tuple(float(v) for v in device.maxn.knobs())
    workers = float(np.median(np.concatenate([g.num_workers for g in groups.values()])))

    shapes: dict[str, dict[str, np.ndarray]] = {}
    resid: list[float] = []
    for w, g in groups.items():
        fits = fit_time(g, kappas, TIME_NOISE_REL)
        shapes[w] = {name: f.coef for name, f in fits.items()}
        resid.append(_sse(fits, g, kappas) / max(len(g) - 2, 1))
    prior, norm, anchors = summarise_shapes(shapes, ModeArrays(*anchor), kappas, workers)
    time_noise = float(max(np.sqrt(np.mean(resid)), REFERENCE_TIME_NOISE_FLOOR))

    source = source_of(rows)
    metered = any(np.isfinite(g.power_w()).sum() >= 3 for g in groups.values())
    if power_from is not None and not metered:
        base_coef, base_noise = power_from.base_coef, power_from.base_noise_rel
        power_mean, power_sd = power_from.power_mean, power_from.power_sd
        power_noise = power_from.power_noise_rel
        source = least_trusted([source, power_from.source])
    else:
        base_coef, base_noise = _fit_base(ProfileArrays.from_frame(rows), maxima)
        power_mean, power_sd, power_noise = _fit_dynamic_power(groups, norm, base_coef, maxima, kappas)
    return DeviceReference(
        device_id=dev_id, source=source, workloads=tuple(groups), kappa_cpu=kappas[0],
        kappa_pipe=kappas[1], shape=prior, workload_shapes=norm, time_noise_rel=time_noise,
        base_coef=base_coef, base_noise_rel=base_noise, power_mean=power_mean, power_sd=power_sd,
        power_noise_rel=power_noise, maxima=maxima, anchor=anchor, training_sha256=fingerprint,
        workload_anchor_s=anchors, workload_kappas=own_kappas,
    )


def _fit_base(rows: ProfileArrays, maxima: Mapping[str, float]) -> tuple[np.ndarray, float]:
    """Base (idle-at-mode) power model, W; without measured base power, ``UNMEASURED_BASE_SHARE`` of the
    lowest mean power [E7]."""
    base = rows.base_power_w
    ok = ~np.isnan(base)
    if ok.sum() >= 2:
        x = F.design(F.base_features(rows.modes.take(ok), maxima), F.BASE_TERMS)
        fit = fit_terms(x, base[ok], base[ok], F.BASE_TERMS, noise_rel=POWER_NOISE_REL)
        return fit.coef, max(fit.noise_rel, BASE_NOISE_FLOOR)
    power = rows.power_w()
    level = UNMEASURED_BASE_SHARE * float(np.nanmin(power)) if np.isfinite(power).any() else 1.0
    # Without any base measurement only a constant is identifiable; it is uncertain, hence the wide SD.
    return np.array([level] + [0.0] * (len(F.BASE_TERMS) - 1)), UNMEASURED_BASE_SD


def _fit_dynamic_power(groups: Mapping[str, ProfileArrays], shapes: Mapping[str, Mapping[str, np.ndarray]],
                       base_coef: np.ndarray, maxima: Mapping[str, float], kappas: tuple[float, float]
                       ) -> tuple[np.ndarray, np.ndarray, float]:
    coefs, noises = [], []
    for w, g in groups.items():
        power = g.power_w()
        ok = ~np.isnan(power)
        if ok.sum() < 3:
            continue
        modes = g.modes.take(ok)
        workers = g.num_workers[ok]
        feats = F.time_features(modes, workers, *kappas)
        # Shapes are normalised to 1 s at the fastest preset, so their prediction is 1 / progress rate.
        rate = 1.0 / sum(F.design(feats, F.COMPONENT_TERMS[n]) @ c for n, c in shapes[w].items())
        if g.measured_components:
            busy = (g.compute_time_s / g.epoch_time_s)[ok]
        else:
            coef = np.asarray(shapes[w]["total"], dtype=float)
            compute, _ = split_compute({"total": TermFit(F.TOTAL_TERMS, coef, np.zeros((coef.size,) * 2), 0.0)},
                                       feats)
            busy = compute * rate
        # The GPU's own busy share: the shapes are in units of the anchor epoch, hence the rate factor.
        name = "compute" if "compute" in shapes[w] else "total"
        cpu_coef = float(shapes[w][name][F.COMPONENT_TERMS[name].index("cpu")])
        active = np.maximum(busy - F.launch_wait_s(cpu_coef, modes, workers, kappas[0], maxima["cpu_mhz"])
                            * rate, 0.0)
        base = F.design(F.base_features(modes, maxima), F.BASE_TERMS) @ base_coef
        base_meas = g.base_power_w[ok]
        base = np.where(np.isnan(base_meas), base, base_meas)
        x = F.design(F.power_features(modes, workers, busy, maxima, rate, active), F.POWER_TERMS)
        fit = fit_terms(x, power[ok] - base, power[ok], F.POWER_TERMS, noise_rel=POWER_NOISE_REL)
        coefs.append(fit.coef)
        noises.append(fit.noise_rel)
    if not coefs:
        # No power measured: a generic split of a share of the module budget, deliberately vague [E7].
        mean = (np.array(FALLBACK_POWER_SPLIT) * FALLBACK_POWER_SHARE
                * maxima.get("module_power_w", FALLBACK_MODULE_POWER_W))
        return mean, mean.copy() + POWER_SD_FLOOR_W, FALLBACK_POWER_NOISE_REL
    stack = np.array(coefs)
    mean = stack.mean(axis=0)
    spread = stack.std(axis=0, ddof=1) if len(stack) > 1 else np.zeros_like(mean)
    sd = np.maximum.reduce([spread, POWER_SD_FLOOR_REL * mean, np.full_like(mean, POWER_SD_FLOOR_W)])  # [E7]
    return mean, sd, float(max(np.mean(noises), DYNAMIC_POWER_NOISE_FLOOR))


def reference_csvs(device_id: str, directory: Path | None = None) -> list[Path]:
    """The device's reference CSVs in preference order (published, measured, simulated)."""
    directory = directory or REFERENCE_DIR
    found = []
    for kind in SOURCE_TRUST:  # the provenance trust order
        found.extend(sorted(directory.glob(f"{device_id}-{kind}*.csv")))
    return found


def without_own_sweep(sweeps: pd.DataFrame, workload: str, kind: str) -> pd.DataFrame:
    """Reference sweeps without the rows' own workload's sweep when it is of their kind of data (real or
    simulated) and others remain: a reference's per-workload split is fitted to its sweep alone, and as the
    rows' own it would take the whole regime weight and decide what the rows leave open [E8]."""
    own = (sweeps["workload"] == workload).to_numpy()
    if not own.any() or own.all() or (source_of(sweeps[own]) == "simulated") != (kind == "simulated"):
        return sweeps
    return sweeps[~own].reset_index(drop=True)


def read_reference_rows(device_id: str) -> pd.DataFrame | None:
    """Rows of the most preferred reference CSV of a device (None when it has none); a copy of the
    file's parse, read once per process (and again when the file changes)."""
    paths = reference_csvs(device_id)
    return _read_once(paths[0]) if paths else None


def read_simulated_rows(device_id: str) -> pd.DataFrame | None:
    """The device's simulated sweeps (the workloads every device shares), None when it has none."""
    paths = sorted(REFERENCE_DIR.glob(f"{device_id}-simulated*.csv"))
    return _read_once(paths[0]) if paths else None


def _read_once(path: Path) -> pd.DataFrame:
    # A plan's first call fitted each reference workload without its own sweep, each from a fresh read and
    # check of the same file; the copy keeps the cached parse safe from callers that edit theirs.
    stat = path.stat()
    return _parsed(str(path), stat.st_mtime_ns, stat.st_size).copy()


@lru_cache(maxsize=32)
def _parsed(path: str, mtime_ns: int, size: int) -> pd.DataFrame:
    """The checked rows of a profile CSV; ``mtime_ns`` and ``size`` only key the cache."""
    return read_profile_csv(Path(path))
