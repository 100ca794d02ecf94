"""The device-level model learned from reference sweeps of other workloads on the same device.

A :class:`DeviceReference` holds what transfers between workloads on one device: the core-contention
constants, the *shape* of each time component (term coefficients normalised to 1 s of epoch at the
device's fastest preset) with its spread, the base-power model, the dynamic-power coefficients and the
noise levels. ``load_reference(device_id)`` uses the device's reference CSVs in ``models/reference/``
(published preferred, then measured, then simulated) through the bundled artifact in ``models/fitted/``;
a device without any reference sweeps gets one derived from another device through device physics.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import read_profile_csv
from jetpredict.predictor import features as F
from jetpredict.predictor.model import (
    POWER_NOISE_REL,
    POWER_SD_FLOOR_REL,
    POWER_SD_FLOOR_W,
    SHARE_SD_FLOOR,
    TIME_NOISE_REL,
    fit_terms,
    fit_time,
    measured_components,
    mode_arrays,
    row_power_w,
    source_of,
)

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "models" / "reference"
#: Preference among a device's reference CSVs (``<device>-<kind>.csv``).
SOURCE_PREFERENCE = ("published", "measured", "simulated")
KAPPA_GRID = np.round(np.arange(0.0, 2.01, 0.125), 3)
#: Devices to derive a reference from when a device has no sweeps of its own (closest architecture first).
DERIVE_FROM = ("agx-xavier", "orin-agx", "xavier-nx", "nano", "orin-nx", "orin-nano")


@dataclass
class DeviceReference:
    """Device-level model from reference sweeps (see module docstring). Units: s, W, MHz."""

    device_id: str
    source: str
    workloads: tuple[str, ...]
    kappa_cpu: float
    kappa_pipe: float
    shape_mean: dict[str, np.ndarray]
    shape_sd: dict[str, np.ndarray]
    workload_shapes: dict[str, dict[str, np.ndarray]]
    time_noise_rel: float
    base_coef: np.ndarray
    base_noise_rel: float
    power_mean: np.ndarray
    power_sd: np.ndarray
    power_noise_rel: float
    maxima: dict[str, float]
    anchor: tuple[float, float, float, float]
    interval_scale: float = 1.0
    derived_from: str | None = None
    training_sha256: str = ""
    rows: pd.DataFrame | None = field(default=None, repr=False)
    #: Epoch time (s) of each reference workload at ``anchor``: with ``workload_shapes`` it gives the
    #: absolute term coefficients that cross-device transfer compares between devices.
    workload_anchor_s: dict[str, float] = field(default_factory=dict)
    #: Calibrated multipliers of power and energy interval half-widths; ``interval_scale`` is time's.
    power_interval_scale: float = 1.0
    energy_interval_scale: float = 1.0
    #: Sweeps of the workloads shared across devices (the simulated ones) when the primary reference is
    #: another set (e.g. AGX Xavier's published sweeps): the basis of reference-workload transfer.
    transfer: DeviceReference | None = field(default=None, repr=False)


class _Kappas:
    """The minimal reference that :func:`fit_time` needs for a weak (data-only) fit."""

    def __init__(self, kappa_cpu: float, kappa_pipe: float, noise: float = TIME_NOISE_REL) -> None:
        self.kappa_cpu, self.kappa_pipe, self.time_noise_rel = kappa_cpu, kappa_pipe, noise


def _prepare(rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.reset_index(drop=True).copy()
    for col in ("num_workers",):
        rows[col] = pd.to_numeric(rows.get(col, 4.0), errors="coerce").fillna(4.0)
    for col in ("stall_time_s", "compute_time_s", "avg_power_w", "epoch_energy_j", "base_power_w"):
        rows[col] = pd.to_numeric(rows[col], errors="coerce") if col in rows.columns else np.nan
    return rows


def _sse(fits: dict, rows: pd.DataFrame, kc: float, kp: float, names=None) -> float:
    """Sum of squared residuals (relative to the epoch) of the component fits ``names`` (default all)."""
    from jetpredict.predictor.model import component_targets

    cores, cpu, gpu, emc = mode_arrays(rows)
    feats = F.time_features(cores, cpu, gpu, emc, rows["num_workers"].to_numpy(float), kc, kp)
    epoch = rows["epoch_time_s"].to_numpy(float)
    total = 0.0
    for name, y in component_targets(rows).items():
        if names is None or name in names:
            pred, _ = fits[name].predict(feats)
            total += float(np.sum(((y - pred) / epoch) ** 2))
    return total


def _kappa_error(groups: dict[str, pd.DataFrame], kc: float, kp: float, names) -> float:
    err = 0.0
    for g in groups.values():
        err += _sse(fit_time(g, _Kappas(kc, kp), weak=True), g, kc, kp, names)
    # A small pull toward moderate contention keeps kappa identified when no sweep varies cores.
    return err + 1e-6 * ((kc - 0.5) ** 2 + (kp - 1.0) ** 2)


def _fit_kappas(groups: dict[str, pd.DataFrame]) -> tuple[float, float]:
    """Contention constants minimising the reference workloads' relative residuals (grid search).

    With measured components the search is separable: compute and rest depend on the CPU constant only,
    stall on the pipeline constant only; totals need the joint grid (a coarser one).
    """
    if all(measured_components(g) for g in groups.values()):
        kc = min(KAPPA_GRID, key=lambda k: _kappa_error(groups, k, 1.0, ("compute", "rest")))
        kp = min(KAPPA_GRID, key=lambda k: _kappa_error(groups, kc, k, ("stall",)))
        return float(kc), float(kp)
    grid = KAPPA_GRID[::2]
    best = min(((kc, kp) for kc in grid for kp in grid), key=lambda k: _kappa_error(groups, *k, None))
    return float(best[0]), float(best[1])


def _total_shape(shapes: dict[str, np.ndarray]) -> np.ndarray:
    """Collapse component shapes onto ``TOTAL_TERMS``."""
    if "total" in shapes:
        return shapes["total"]
    out = dict.fromkeys(F.TOTAL_TERMS, 0.0)
    for name, coef in shapes.items():
        for term, c in zip(F.COMPONENT_TERMS[name], coef, strict=True):
            out[term] += float(c)
    return np.array([out[t] for t in F.TOTAL_TERMS])


def summarise_shapes(shapes: dict[str, dict[str, np.ndarray]], anchor, kc: float, kp: float,
                     workers: float = 4.0):
    """Normalise each workload's component coefficients to 1 s of epoch at ``anchor`` and return the
    per-component prior (mean, SD with the share floor), the normalised shapes and each workload's epoch
    time at ``anchor`` (s)."""
    a_feats = F.time_features(*(np.atleast_1d(v) for v in anchor), workers, kc, kp)
    norm, anchors = {}, {}
    for w, comps in shapes.items():
        t_anchor = sum(float(F.design(a_feats, F.COMPONENT_TERMS[n])[0] @ c) for n, c in comps.items())
        norm[w] = {n: c / t_anchor for n, c in comps.items()}
        anchors[w] = t_anchor
    all_components = all("total" not in comps for comps in norm.values())
    names = ("compute", "stall", "rest", "total") if all_components else ("total",)
    shape_mean, shape_sd = {}, {}
    for name in names:
        stack = np.array([(_total_shape(norm[w]) if name == "total" else norm[w][name]) for w in norm])
        terms = F.COMPONENT_TERMS[name]
        x_anchor = np.array([float(a_feats[t][0]) for t in terms])
        spread = stack.std(axis=0, ddof=1) if len(stack) > 1 else np.zeros(len(terms))
        shape_mean[name] = stack.mean(axis=0)
        shape_sd[name] = np.maximum(spread, SHARE_SD_FLOOR / x_anchor)
    return shape_mean, shape_sd, norm, anchors


def rows_sha256(rows: pd.DataFrame) -> str:
    """SHA-256 of the rows' CSV text (training-data fingerprint)."""
    return hashlib.sha256(rows.to_csv(index=False, lineterminator="\n").encode()).hexdigest()


def build_reference(rows: pd.DataFrame, device_id: str | None = None) -> DeviceReference:
    """Fit a :class:`DeviceReference` from reference sweeps (profile rows of >= 1 workload, one device)."""
    if not isinstance(rows, pd.DataFrame) or rows.empty:
        raise InputError("reference sweeps are empty", "reference")
    missing = [c for c in ("device", "workload", "epoch_time_s", *MODE_FIELDS) if c not in rows.columns]
    if missing:
        raise InputError(f"reference sweeps lack column(s) {', '.join(missing)}", "reference")
    devices = sorted(set(rows["device"].astype(str)))
    if len(devices) != 1:
        raise InputError(f"reference sweeps must be of one device, got {devices}", "reference")
    dev_id = devices[0]
    if device_id is not None and device_id != dev_id:
        raise InputError(f"reference sweeps are of device {dev_id!r}, not {device_id!r}", "reference")
    device = load_device(dev_id)
    rows = _prepare(rows)
    groups = {str(w): g.reset_index(drop=True) for w, g in rows.groupby("workload", sort=True)}
    small = [w for w, g in groups.items() if len(g) < 3]
    if small:
        raise InputError(f"reference workload(s) {small} have fewer than 3 modes; a reference sweep needs "
                         f">= 3 modes per workload", "reference")
    kc, kp = _fit_kappas(groups)
    maxima = F.device_maxima(device)
    anchor = device.maxn.knobs()
    workers = float(rows["num_workers"].median())

    shapes: dict[str, dict[str, np.ndarray]] = {}
    resid: list[float] = []
    for w, g in groups.items():
        fits = fit_time(g, _Kappas(kc, kp), weak=True)
        shapes[w] = {name: f.coef for name, f in fits.items()}
        resid.append(_sse(fits, g, kc, kp) / max(len(g) - 2, 1))
    shape_mean, shape_sd, shapes, anchors = summarise_shapes(shapes, anchor, kc, kp, workers)
    time_noise = float(max(np.sqrt(np.mean(resid)), 0.015))

    base_coef, base_noise = _fit_base(rows, maxima)
    power_mean, power_sd, power_noise = _fit_dynamic_power(groups, shapes, base_coef, maxima, kc, kp)
    return DeviceReference(
        device_id=dev_id, source=source_of(rows), workloads=tuple(groups), kappa_cpu=kc, kappa_pipe=kp,
        shape_mean=shape_mean, shape_sd=shape_sd, workload_shapes=shapes, time_noise_rel=time_noise,
        base_coef=base_coef, base_noise_rel=base_noise, power_mean=power_mean, power_sd=power_sd,
        power_noise_rel=power_noise, maxima=maxima, anchor=tuple(float(v) for v in anchor),
        training_sha256=rows_sha256(rows), rows=rows, workload_anchor_s=anchors,
    )


def _fit_base(rows: pd.DataFrame, maxima: dict[str, float]) -> tuple[np.ndarray, float]:
    """Base (idle-at-mode) power model, W; without measured base power, 30% of the lowest mean power."""
    base = rows["base_power_w"].to_numpy(float)
    ok = ~np.isnan(base)
    if ok.sum() >= 2:
        x = F.design(F.base_features(*(a[ok] for a in mode_arrays(rows)), maxima), F.BASE_TERMS)
        fit = fit_terms(x, base[ok], base[ok], F.BASE_TERMS, noise_rel=POWER_NOISE_REL)
        return fit.coef, max(fit.noise_rel, 0.03)
    power = row_power_w(rows)
    level = 0.3 * float(np.nanmin(power)) if np.isfinite(power).any() else 1.0
    # Without any base measurement only a constant is identifiable; it is uncertain, hence the wide SD.
    return np.array([level, 0.0, 0.0, 0.0]), 0.25


def _fit_dynamic_power(groups, shapes, base_coef, maxima, kc, kp):
    coefs, noises = [], []
    for w, g in groups.items():
        power = row_power_w(g)
        ok = ~np.isnan(power)
        if ok.sum() < 3:
            continue
        modes = [a[ok] for a in mode_arrays(g)]
        feats = F.time_features(*modes, g["num_workers"].to_numpy(float)[ok], kc, kp)
        # Shapes are normalised to 1 s at the fastest preset, so their prediction is 1 / progress rate.
        rate = 1.0 / sum(F.design(feats, F.COMPONENT_TERMS[n]) @ c for n, c in shapes[w].items())
        if measured_components(g):
            busy = (g["compute_time_s"] / g["epoch_time_s"]).to_numpy(float)[ok]
        else:
            coef = shapes[w]["total"]
            parts = {t: c * feats[t] for t, c in zip(F.TOTAL_TERMS, coef, strict=True)}
            busy = (parts["gpu"] + parts["mem"] + parts["cpu"]) / sum(parts.values())
        # The GPU's own busy share: the shapes are in units of the anchor epoch, hence the rate factor.
        name = "compute" if "compute" in shapes[w] else "total"
        cpu_coef = float(shapes[w][name][F.COMPONENT_TERMS[name].index("cpu")])
        workers = g["num_workers"].to_numpy(float)[ok]
        active = np.maximum(busy - F.launch_wait(cpu_coef, modes[0], modes[1], workers, kc, maxima["cpu_mhz"])
                            * rate, 0.0)
        base = F.design(F.base_features(*modes, maxima), F.BASE_TERMS) @ base_coef
        base_meas = g["base_power_w"].to_numpy(float)[ok]
        base = np.where(np.isnan(base_meas), base, base_meas)
        x = F.design(F.power_features(*modes, workers, busy, maxima, rate, active), F.POWER_TERMS)
        fit = fit_terms(x, power[ok] - base, power[ok], F.POWER_TERMS, noise_rel=POWER_NOISE_REL)
        coefs.append(fit.coef)
        noises.append(fit.noise_rel)
    if not coefs:
        # No power measured: a generic split of a quarter of the module budget, deliberately vague.
        mean = np.array([0.4, 0.2, 0.2, 0.2]) * 0.25 * maxima.get("module_power_w", 20.0)
        return mean, mean.copy() + POWER_SD_FLOOR_W, 0.15
    stack = np.array(coefs)
    mean = stack.mean(axis=0)
    spread = stack.std(axis=0, ddof=1) if len(stack) > 1 else np.zeros_like(mean)
    sd = np.maximum.reduce([spread, POWER_SD_FLOOR_REL * mean, np.full_like(mean, POWER_SD_FLOOR_W)])
    return mean, sd, float(max(np.mean(noises), 0.02))


def _identifiable(modes: pd.DataFrame) -> bool:
    """True when every knob takes at least two values (each time term is then constrained by the rows)."""
    return all(modes[k].nunique() > 1 for k in MODE_FIELDS)


def calibrate_interval_scales(rows: pd.DataFrame, designs: int = 40, test_modes: int = 60, seed: int = 0
                              ) -> tuple[float, float, float]:
    """Time, power and energy interval scales that make the nominal 90% intervals hold 90% of held-out values.

    Leave one reference workload out: fit the rest as the reference, profile the left-out workload on
    ``designs`` random 4-mode sets that vary every knob (what ``plan`` picks), predict up to
    ``test_modes`` of its other modes and find the multiplier of the model's own relative SD (run-to-run
    noise is left as it is) under which 90% of the errors fall inside the interval; kept in [0.6, 2] (a
    few workloads are a small calibration set: never trust them to shrink intervals below 60%).
    """
    from jetpredict.predictor.model import Z90, fit_workload

    rows = _prepare(rows)
    workloads = sorted(set(rows["workload"].astype(str)))
    if len(workloads) < 2:
        return 1.0, 1.0, 1.0
    rng = np.random.default_rng(seed)
    # Per held-out mode: |log(observed / predicted)|, the model's relative SD and the noise's.
    res: dict[str, list[np.ndarray]] = {"time": [], "power": [], "energy": []}
    for w in workloads:
        new = rows[rows["workload"] == w].drop_duplicates(list(MODE_FIELDS)).reset_index(drop=True)
        if len(new) < 6:
            continue
        ref = build_reference(rows[rows["workload"] != w])
        power_true = row_power_w(new)
        # Large sweeps give many held-out modes per design: fewer designs suffice (and keep builds fast).
        for _ in range(designs if len(new) <= 30 else max(designs // 4, 1)):
            for _attempt in range(50):
                pick = rng.choice(len(new), 4, replace=False)
                if _identifiable(new.iloc[pick]):
                    break
            else:
                continue
            rest = np.setdiff1d(np.arange(len(new)), pick)
            rest = rng.choice(rest, min(test_modes, len(rest)), replace=False)
            model = fit_workload(new.iloc[pick], reference=ref)
            test = new.iloc[rest]
            knobs = [test[k].to_numpy(float) for k in MODE_FIELDS]
            p = model.predict_arrays(*knobs)
            t = model._time(*knobs)
            pw = model._power(*knobs, p["compute_time_s"] / p["epoch_time_s"], p["epoch_time_s"])
            t_obs = test["epoch_time_s"].to_numpy(float)
            res["time"].append(np.column_stack([np.abs(np.log(t_obs / p["epoch_time_s"])), t["rel_sd_model"],
                                                t["rel_sd_noise"]]))
            ok = ~np.isnan(power_true[rest])
            if model.has_power and ok.any():
                p_obs, e_obs = power_true[rest][ok], power_true[rest][ok] * t_obs[ok]
                res["power"].append(np.column_stack([np.abs(np.log(p_obs / p["avg_power_w"][ok])),
                                                     pw["rel_sd_model"][ok], pw["rel_sd_noise"][ok]]))
                res["energy"].append(np.column_stack([
                    np.abs(np.log(e_obs / p["epoch_energy_j"][ok])),
                    np.hypot(t["rel_sd_model"][ok], pw["rel_sd_model"][ok]),
                    np.hypot(t["rel_sd_noise"][ok], pw["rel_sd_noise"][ok])]))

    def scale(parts: list[np.ndarray]) -> float:
        if not parts or sum(len(a) for a in parts) < 10:
            return 1.0
        err, model_sd, noise = np.vstack(parts).T

        def cover(s: float) -> float:
            return float(np.mean(err <= Z90 * np.sqrt((s * model_sd) ** 2 + noise ** 2)))

        lo, hi = 0.6, 2.0
        if cover(lo) >= 0.9:
            return lo
        if cover(hi) < 0.9:
            return hi
        for _ in range(30):  # coverage grows with the scale: bisect for 90%
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if cover(mid) >= 0.9 else (mid, hi)
        return float(hi)

    return scale(res["time"]), scale(res["power"]), scale(res["energy"])


def reference_csvs(device_id: str, directory: Path | None = None) -> list[Path]:
    """The device's reference CSVs in preference order (published, measured, simulated)."""
    directory = directory or REFERENCE_DIR
    found = []
    for kind in SOURCE_PREFERENCE:
        found.extend(sorted(directory.glob(f"{device_id}-{kind}*.csv")))
    return found


def read_reference_rows(device_id: str) -> pd.DataFrame | None:
    """Rows of the most preferred reference CSV of a device (None when it has none)."""
    paths = reference_csvs(device_id)
    if not paths:
        return None
    return read_profile_csv(paths[0])


@cache
def load_reference(device_id: str) -> DeviceReference:
    """The device-level model of ``device_id`` (cached): bundled artifact, else fitted from its reference
    CSV, else derived from another device's reference through device physics."""
    load_device(device_id)  # UnknownDeviceError for ids outside the catalogue
    from jetpredict.predictor.artifacts import load_bundled_reference

    ref = load_bundled_reference(device_id)
    if ref is not None:
        return ref
    rows = read_reference_rows(device_id)
    if rows is not None:
        return build_reference(rows, device_id)
    from jetpredict.predictor.transfer import derive_reference

    for other in DERIVE_FROM:
        if other != device_id and reference_csvs(other):
            return derive_reference(load_reference(other), device_id)
    raise InputError(f"no reference sweeps for device {device_id!r} or any other device", "device")


@cache
def transfer_reference(device_id: str) -> DeviceReference | None:
    """Sweeps of ``device_id`` that cross-device transfer compares with other devices' (cached).

    The workloads shared by every device are the simulated ones; a device whose primary reference is
    another set carries them as ``transfer`` (refitted from its simulated CSV when an older artifact lacks
    them). None when the device has no sweeps of its own (a physics-derived reference cannot serve).
    """
    ref = load_reference(device_id)
    nested = getattr(ref, "transfer", None)
    if nested is not None:
        return nested
    if ref.derived_from is None and ref.source == "simulated" and getattr(ref, "workload_anchor_s", None):
        return ref
    paths = sorted(REFERENCE_DIR.glob(f"{device_id}-simulated*.csv"))
    if paths:
        return build_reference(read_profile_csv(paths[0]), device_id)
    return ref if ref.derived_from is None and getattr(ref, "workload_anchor_s", None) else None
