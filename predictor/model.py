"""The workload model: a mechanistic few-shot fit of epoch time and power, with a prior from reference sweeps.

Time per epoch is a sum of non-negative terms (``predictor.features``): GPU work / f_gpu, memory traffic /
f_emc, CPU work / f_cpu x contention, data-pipeline work / f_cpu x contention, and a constant, fitted per
component (compute, stall, rest) when the rows measure them. Each term's coefficient has a Gaussian prior
centred on the reference workloads' *shape* (term shares, scaled to the new workload's level) and wide
enough that a workload's own rows move the shares; the maximum a-posteriori fit is constrained to be
non-negative. One row gives a scaled reference shape; the prior fades as rows accumulate.

Power = base(mode) + dynamic terms (GPU busy x f V^2, memory, active cores x f V^2, constant); energy =
power x time. The GPU term's busy share excludes the time the GPU waits on a main thread slower than at the
top CPU clock, so a CPU-bound workload's GPU power falls with the CPU clock as its kernels thin out.
Intervals (nominal 90%) come from the posterior covariance, the model-form variants, the residual noise
and, outside the profiled clock ranges, an extrapolation term (see ``EXTRAPOLATION_REL_SD``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import HOST_DEVICE, source_kind
from jetpredict.predictor import features as F
from scipy.optimize import nnls
from sklearn.base import BaseEstimator, RegressorMixin

MODEL_VERSION = "jetpredict-0.1.0/mech-4"
#: Two-sided 90% normal quantile.
Z90 = 1.6449
#: Prior relative noise of one profiled epoch time / power reading (run-to-run spread, ~2-3% in the paper).
TIME_NOISE_REL = 0.025
POWER_NOISE_REL = 0.03
#: Floor of the relative noise of a new epoch's time in intervals: the same setting measured twice
#: differs ~3% between runs (POMACS 2022), more than the smooth reference sweeps' residuals suggest.
INTERVAL_NOISE_FLOOR = 0.03
#: Floor of a time term's prior SD, as a share of the epoch at the anchor mode: the reference workloads
#: are all GPU bound, so the prior must leave room for a CPU-bound workload's rows to move the shares.
SHARE_SD_FLOOR = 0.4
#: Floor of a dynamic-power coefficient's prior SD, relative to the reference mean and in W.
POWER_SD_FLOOR_REL = 0.35
POWER_SD_FLOOR_W = 0.5
#: Range of a workload's contention constants around the device reference's (the per-workload values
#: implied by the published AGX Xavier modes a/b and e/f span about 0.5-1.2x the pooled fit).
KAPPA_FACTORS = (0.5, 1.3)
#: Relative SD per unit of extrapolation (share of the output a knob drives x ln-distance of the mode
#: outside the profiled range of that knob), per output. The evidence disagrees by source: leave-one-
#: workload-out on the real AGX Xavier sweeps (4 of modes a-j profiled) needs none inside their range, the
#: real GPU-114.75 MHz fact ~0.02 (6% off at ~2 units), the synthetic mechanisms of bench/accuracy.py
#: ~0.1 and the twin's full-range sweeps profiled on random 4-mode designs 0.25-0.3 (weak designs of
#: CPU-bound workloads, bench/results/accuracy.md). 0.1 for time sits between the real and simulated
#: evidence; power and energy errors grow less with distance (the shares are of the whole module power).
EXTRAPOLATION_REL_SD = {"time": 0.10, "power": 0.05, "energy": 0.05}
#: Extra relative SD on cross-device predictions (physics transfer is coarser than a same-device fit).
CROSS_DEVICE_REL_SD = 0.12


class PriorLinearRegression(RegressorMixin, BaseEstimator):
    """Non-negative linear regression with an independent Gaussian prior on each coefficient (MAP fit).

    Minimises ``sum(((y - X b) / (noise_rel * scale))^2) + sum(((b - prior_mean) / prior_sd)^2)`` over
    ``b >= 0`` (an augmented NNLS). ``scale`` (per row, s) sets the noise level; the noise estimate blends
    the prior ``noise_rel`` (worth ``noise_dof`` rows) with the residuals. Fitted: ``coef_``, ``cov_``
    (Laplace approximation), ``noise_rel_``.
    """

    def __init__(self, prior_mean=None, prior_sd=None, noise_rel: float = TIME_NOISE_REL,
                 noise_dof: float = 4.0) -> None:
        self.prior_mean = prior_mean
        self.prior_sd = prior_sd
        self.noise_rel = noise_rel
        self.noise_dof = noise_dof

    def fit(self, X, y, scale=None):
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        n, p = X.shape
        scale = np.abs(y) if scale is None else np.asarray(scale, dtype=float)
        scale = np.maximum(scale, 1e-12)
        mu = np.zeros(p) if self.prior_mean is None else np.asarray(self.prior_mean, dtype=float)
        tau = np.full(p, 1e6) if self.prior_sd is None else np.maximum(np.asarray(self.prior_sd, float), 1e-12)
        sigma = self.noise_rel * scale
        a = np.vstack([X / sigma[:, None], np.diag(1.0 / tau)])
        b = np.concatenate([y / sigma, mu / tau])
        coef, _ = nnls(a, b, maxiter=50 * p)
        resid_rel = (y - X @ coef) / scale
        # Residual noise, shrunk toward the prior level; exactly-determined fits keep the prior level.
        self.noise_rel_ = float(np.sqrt((self.noise_dof * self.noise_rel ** 2 + np.sum(resid_rel ** 2))
                                        / (self.noise_dof + n)))
        ratio = self.noise_rel_ / self.noise_rel
        self.coef_ = coef
        self.cov_ = np.linalg.pinv(a.T @ a) * ratio ** 2
        self.n_features_in_ = p
        return self

    def predict(self, X, return_std: bool = False):
        X = np.asarray(X, dtype=float)
        mean = X @ self.coef_
        if not return_std:
            return mean
        return mean, np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", X, self.cov_, X), 0.0))


@dataclass
class TermFit:
    """Fitted coefficients of one time/power component on its named terms."""

    terms: tuple[str, ...]
    coef: np.ndarray
    cov: np.ndarray
    noise_rel: float

    def predict(self, feats: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        x = F.design(feats, self.terms)
        mean = x @ self.coef
        sd = np.sqrt(np.maximum(np.sum((x @ self.cov) * x, axis=1), 0.0))
        return mean, sd

    def scaled(self, factors: dict[str, float]) -> TermFit:
        """The same fit with each term's coefficient multiplied (cross-device transfer)."""
        s = np.array([factors.get(t, 1.0) for t in self.terms])
        return TermFit(self.terms, self.coef * s, self.cov * np.outer(s, s), self.noise_rel)


def fit_terms(x: np.ndarray, y: np.ndarray, scale: np.ndarray, terms: tuple[str, ...], prior_mean=None,
              prior_sd=None, noise_rel: float = TIME_NOISE_REL) -> TermFit:
    est = PriorLinearRegression(prior_mean, prior_sd, noise_rel).fit(x, y, scale)
    return TermFit(terms, est.coef_, est.cov_, est.noise_rel_)


def measured_components(rows: pd.DataFrame) -> bool:
    """True when every row measures both stall and compute (then each component gets its own model)."""
    return bool(rows["stall_time_s"].notna().all() and rows["compute_time_s"].notna().all())


def component_targets(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per-component targets in s: compute, stall and the rest of the epoch (clipped at 0), or the total."""
    epoch = rows["epoch_time_s"].to_numpy(float)
    if not measured_components(rows):
        return {"total": epoch}
    stall = rows["stall_time_s"].to_numpy(float)
    compute = rows["compute_time_s"].to_numpy(float)
    return {"compute": compute, "stall": stall, "rest": np.maximum(epoch - stall - compute, 0.0)}


def row_power_w(rows: pd.DataFrame) -> np.ndarray:
    """Mean training power per row (W): ``avg_power_w``, else energy / time; NaN when neither is known."""
    power = rows["avg_power_w"].to_numpy(float).copy()
    energy = rows["epoch_energy_j"].to_numpy(float)
    fill = np.isnan(power) & ~np.isnan(energy)
    power[fill] = energy[fill] / rows["epoch_time_s"].to_numpy(float)[fill]
    return power


def mode_arrays(rows: pd.DataFrame) -> tuple[np.ndarray, ...]:
    return tuple(rows[k].to_numpy(float) for k in MODE_FIELDS)


@dataclass
class WorkloadModel:
    """The fitted state of one workload on one device (picklable; no torch)."""

    device_id: str
    workload_id: str
    reference_source: str
    profiled_modes: int
    has_power: bool
    num_workers: float
    kappa_cpu: float
    kappa_pipe: float
    time_fits: dict[str, TermFit]
    base_coef: np.ndarray
    base_ratio: float
    base_sd_rel: float
    power_fit: TermFit
    maxima: dict[str, float]
    interval_scale: float = 1.0
    cross_device: bool = False
    source_device_id: str | None = None
    model_version: str = MODEL_VERSION
    #: Time fits under other plausible contention constants: (kappa_cpu, kappa_pipe, fits). Their spread
    #: is the model-form uncertainty of attributing the core-count effect to CPU work.
    alt_time_fits: list = field(default_factory=list, repr=False)
    #: Lowest CPU clock profiled (MHz). Below it, clock-independent time may be CPU work that faster
    #: CPUs hid behind the GPU (launch-bound steps surface once the CPU slows): a second model variant.
    hidden_cpu_ref_mhz: float | None = None
    #: Extra relative SD of a cross-device prediction, and how the transfer was made
    #: (``reference-workloads`` or ``physics``); see :mod:`predictor.transfer`.
    cross_device_rel_sd: float = CROSS_DEVICE_REL_SD
    transfer_method: str | None = None
    #: Calibrated multipliers of power and energy interval half-widths (``interval_scale`` is time's).
    power_interval_scale: float = 1.0
    energy_interval_scale: float = 1.0
    #: Knob ranges of the profiled modes, ``{knob: (low, high)}``: outside them each output's interval
    #: widens by ``EXTRAPOLATION_REL_SD[output] x sqrt(sum((share_of_knob x ln-distance)^2))`` (see
    #: :meth:`_extrapolation`). None: no widening (cross-device models carry their own SD instead).
    profiled_ranges: dict | None = None
    training_rows: list[dict] = field(default_factory=list, repr=False)

    # -- prediction -----------------------------------------------------------------------------------
    def _time(self, cores, cpu, gpu, emc) -> dict[str, np.ndarray]:
        """Per-component and epoch time (s) averaged over the contention variants, with relative SD."""
        variants = [(self.kappa_cpu, self.kappa_pipe, self.time_fits), *self.alt_time_fits]
        comps: dict[str, list[np.ndarray]] = {}
        totals, variances = [], []
        noise = max(INTERVAL_NOISE_FLOOR, *(f.noise_rel for f in self.time_fits.values()))
        surfaced = (np.maximum(1.0, self.hidden_cpu_ref_mhz / cpu) - 1.0 if self.hidden_cpu_ref_mhz
                    else None)
        central = F.time_features(cores, cpu, gpu, emc, self.num_workers, self.kappa_cpu, self.kappa_pipe)
        top_cpu = 1000.0 / self.maxima["cpu_mhz"]
        for i, (kc, kp, fits) in enumerate(variants):
            feats = central if i == 0 else F.with_contention(central, cores, cpu, self.num_workers, kc, kp)
            total, var, extra = 0.0, 0.0, 0.0
            for name, fit in fits.items():
                # Posterior variance from the central variant only: the variants' spread is added below.
                if i == 0:
                    mean, sd = fit.predict(feats)
                    var = var + sd ** 2
                else:  # a weighted sum of a few columns: cheaper than building the design matrix
                    mean = sum(c * feats[t] for t, c in zip(fit.terms, fit.coef, strict=True))
                comps.setdefault(name, []).append(mean)
                total = total + mean
                gpu_side = name in ("compute", "total")
                if gpu_side:
                    # GPU idle time: the main thread's work beyond its length at the top CPU clock.
                    wait = fit.coef[fit.terms.index("cpu")] * np.maximum(feats["cpu"] - top_cpu, 0.0)
                    comps.setdefault("gpu_wait", []).append(wait)
                if surfaced is not None:
                    one = fit.coef[fit.terms.index("one")] * surfaced
                    comps.setdefault(name + "_hidden", []).append(mean + one)
                    if gpu_side:
                        comps.setdefault("gpu_wait_hidden", []).append(wait + one)
                    extra = extra + one
            totals.append(total)
            if i == 0:
                variances.append(var)
            if surfaced is not None:
                totals.append(total + extra)
        if surfaced is not None:
            for name in [*self.time_fits, "gpu_wait"]:
                comps[name] = comps[name] + comps.pop(name + "_hidden")
        # Model averaging over the contention constants (flat weights over their plausible range).
        out = {name: sum(v) / len(v) for name, v in comps.items()}
        epoch = sum(totals) / len(totals)
        out["epoch"] = epoch
        # The contention variants span the range seen across reference workloads: their spread is a 90%
        # range. Whether hidden CPU work surfaces is an extrapolation question: the extrapolation term
        # below carries it (in proportion to the distance) instead of the two variants' far wider spread.
        contention_totals = ([(a + b) / 2.0 for a, b in zip(totals[::2], totals[1::2], strict=True)]
                             if surfaced is not None else totals)
        spread = np.max(np.abs(np.array(contention_totals) - epoch), axis=0) / Z90
        var = np.mean(variances, axis=0) + spread ** 2
        # The calibrated scale corrects the model's own uncertainty (posterior and model form); the
        # run-to-run noise of a measured epoch is a property of the hardware and stays as it is.
        out["rel_sd_model"] = np.sqrt(var) / np.maximum(epoch, 1e-12)
        out["rel_sd_noise"] = np.full_like(epoch, noise)
        out["distances"] = self._knob_distances(cores, cpu, gpu, emc)
        out["extrapolation"] = self._extrapolation(central, out["distances"], epoch)
        rel_sd = np.sqrt((self.interval_scale * out["rel_sd_model"]) ** 2 + noise ** 2
                         + (EXTRAPOLATION_REL_SD["time"] * out["extrapolation"]) ** 2)
        if self.cross_device:
            rel_sd = np.sqrt(rel_sd ** 2 + self.__dict__.get("cross_device_rel_sd", CROSS_DEVICE_REL_SD) ** 2)
        out["rel_sd"] = rel_sd
        return out

    def _knob_distances(self, cores, cpu, gpu, emc) -> dict[str, np.ndarray] | None:
        ranges = self.__dict__.get("profiled_ranges")
        return None if not ranges else F.extrapolation_distances(cores, cpu, gpu, emc, ranges)

    def _extrapolation(self, feats, d: dict[str, np.ndarray] | None, epoch) -> np.ndarray:
        """Extrapolation units of epoch time per mode (0 inside the profiled ranges); ``d`` from
        :meth:`_knob_distances`.

        A knob's effect outside the profiled range is only as good as the assumed form of its terms, so
        the error grows with the share of the epoch those terms take times the log-distance: GPU clock
        drives the ``gpu`` and ``mem`` terms, memory clock ``mem`` and ``emc``, CPU clock and cores the
        CPU and pipeline terms, and below the lowest profiled CPU clock also the clock-independent time
        (CPU work the faster clocks hid).
        """
        if d is None:
            return np.zeros_like(epoch)
        coef = dict.fromkeys(F.TOTAL_TERMS, 0.0)  # the components share the central features
        for fit in self.time_fits.values():
            for term, c in zip(fit.terms, fit.coef, strict=True):
                coef[term] += float(c)
        inv = 1.0 / np.maximum(epoch, 1e-12)
        mem = coef["mem"] * feats["mem"]
        s_gpu = (coef["gpu"] * feats["gpu"] + mem) * inv
        s_emc = (mem + coef["emc"] * feats["emc"]) * inv
        s_cpu = coef["cpu"] * feats["cpu"] + coef["pipe"] * feats["pipe"]
        if self.hidden_cpu_ref_mhz:
            s_cpu = s_cpu + coef["one"] * (d["cpu_mhz"] > 0)
        s_cpu = s_cpu * inv
        return np.sqrt((s_gpu * d["gpu_mhz"]) ** 2 + (s_emc * d["emc_mhz"]) ** 2
                       + (s_cpu * d["cpu_mhz"]) ** 2 + (s_cpu * d["cpu_cores"]) ** 2)

    def anchor_time_s(self) -> float:
        """Predicted epoch time (s) at the device's fastest preset: the reference for progress rates."""
        cached = self.__dict__.get("_anchor_time_s")
        if cached is None:
            knobs = load_device(self.device_id).maxn.knobs()
            cached = float(self._time(*(np.atleast_1d(float(k)) for k in knobs))["epoch"][0])
            self.__dict__["_anchor_time_s"] = cached
        return cached

    def gpu_active(self, t: dict[str, np.ndarray], compute) -> np.ndarray:
        """Share of the epoch the GPU runs kernels: the compute time less the GPU's wait on a main thread
        slower (or more contended) than at the top CPU clock; ``t`` from :meth:`_time`."""
        return np.maximum(compute - t["gpu_wait"], 0.0) / np.maximum(t["epoch"], 1e-12)

    def _power(self, cores, cpu, gpu, emc, gpu_busy, epoch, gpu_active=None, distances=None
               ) -> dict[str, np.ndarray]:
        bfeats = F.base_features(cores, cpu, gpu, emc, self.maxima)
        base_parts = {t: self.base_ratio * c * bfeats[t] for t, c in zip(F.BASE_TERMS, self.base_coef, strict=True)}
        base = sum(base_parts.values())
        rate = self.anchor_time_s() / np.maximum(epoch, 1e-12)
        pfeats = F.power_features(cores, cpu, gpu, emc, self.num_workers, gpu_busy, self.maxima, rate,
                                  gpu_active)
        dyn, dyn_sd = self.power_fit.predict(pfeats)
        dyn = np.maximum(dyn, 0.0)
        power = base + dyn
        model_sd = np.sqrt(dyn_sd ** 2 + (self.base_sd_rel * base) ** 2) / power
        noise = np.full_like(power, self.power_fit.noise_rel)
        # Extrapolated power: each domain's share (dynamic and idle) times its knob's distance (cores go
        # with the CPU).
        d = distances if distances is not None else self._knob_distances(cores, cpu, gpu, emc)
        extrapolation = np.zeros_like(power)
        if d is not None:
            share = {t: (np.maximum(c * pfeats[t], 0.0) + np.abs(base_parts[t])) / power for t, c in
                     zip(self.power_fit.terms, self.power_fit.coef, strict=True)}
            extrapolation = np.sqrt((share["gpu"] * d["gpu_mhz"]) ** 2 + (share["emc"] * d["emc_mhz"]) ** 2
                                    + (share["cpu"] * np.maximum(d["cpu_mhz"], d["cpu_cores"])) ** 2)
        rel_sd = np.sqrt((self.__dict__.get("power_interval_scale", 1.0) * model_sd) ** 2 + noise ** 2
                         + (EXTRAPOLATION_REL_SD["power"] * extrapolation) ** 2)
        if self.cross_device:
            rel_sd = np.sqrt(rel_sd ** 2 + self.__dict__.get("cross_device_rel_sd", CROSS_DEVICE_REL_SD) ** 2)
        return {"power": power, "base": base, "rel_sd": rel_sd, "rel_sd_model": model_sd, "rel_sd_noise": noise,
                "extrapolation": extrapolation}

    def predict_arrays(self, cpu_cores, cpu_mhz, gpu_mhz, emc_mhz, device_id: str | None = None
                       ) -> dict[str, np.ndarray]:
        """Predict every mode given as knob arrays (cores; MHz). ``device_id`` of another catalogue device
        transfers the model through device physics (``cross_device`` True, wider intervals).

        Returns arrays ``epoch_time_s`` (+``_low``/``_high``), ``stall_time_s``, ``compute_time_s``,
        ``avg_power_w`` (+``_low``/``_high``), ``base_power_w``, ``epoch_energy_j`` (+``_low``/``_high``)
        and scalars ``cross_device``, ``power_source``. Knobs outside the device raise InputError.
        """
        if device_id is not None and device_id != self.device_id:
            from jetpredict.predictor.transfer import transfer_model

            return transfer_model(self, device_id).predict_arrays(cpu_cores, cpu_mhz, gpu_mhz, emc_mhz)
        cores, cpu, gpu, emc = (np.atleast_1d(np.asarray(a, dtype=float)) for a in
                                (cpu_cores, cpu_mhz, gpu_mhz, emc_mhz))
        bad = load_device(self.device_id).out_of_range(cores, cpu, gpu, emc)
        if bad:
            fld, message = next(iter(bad.items()))
            raise InputError(f"model of device {self.device_id!r}: {message}", fld)
        t = self._time(cores, cpu, gpu, emc)
        epoch = t["epoch"]
        if "compute" in t:
            compute, stall = t["compute"], t["stall"]
        else:
            # Only totals were profiled: split with the GPU/memory terms as compute, the pipeline as stall.
            feats = F.time_features(cores, cpu, gpu, emc, self.num_workers, self.kappa_cpu, self.kappa_pipe)
            fit = self.time_fits["total"]
            parts = {term: c * feats[term] for term, c in zip(fit.terms, fit.coef, strict=True)}
            # Models saved before the roofline term (no ``mem``) counted ``emc`` as GPU memory traffic.
            gpu_side = ("gpu", "mem", "cpu") if "mem" in parts else ("gpu", "emc", "cpu")
            compute = sum(parts[k] for k in gpu_side)
            stall = sum(parts[k] for k in ("pipe", "emc") if k not in gpu_side)
        busy = compute / np.maximum(epoch, 1e-12)
        active = self.gpu_active(t, compute)
        p = self._power(cores, cpu, gpu, emc, busy, epoch, active, t["distances"])
        power = p["power"]
        energy = power * epoch
        t_rel, p_rel = t["rel_sd"], p["rel_sd"]
        # Time and power errors partly cancel in energy (a slower epoch draws less power), so energy has
        # its own calibrated scale on the combined spread.
        e_scale = self.__dict__.get("energy_interval_scale", 1.0)
        e_rel = np.sqrt(e_scale ** 2 * (t["rel_sd_model"] ** 2 + p["rel_sd_model"] ** 2)
                        + t["rel_sd_noise"] ** 2 + p["rel_sd_noise"] ** 2
                        + EXTRAPOLATION_REL_SD["energy"] ** 2 * (t["extrapolation"] ** 2 + p["extrapolation"] ** 2))
        if self.cross_device:
            e_rel = np.sqrt(e_rel ** 2 + 2 * self.__dict__.get("cross_device_rel_sd", CROSS_DEVICE_REL_SD) ** 2)

        def band(x, rel):
            return x * np.exp(-Z90 * rel), x * np.exp(Z90 * rel)

        t_lo, t_hi = band(epoch, t_rel)
        p_lo, p_hi = band(power, p_rel)
        e_lo, e_hi = band(energy, e_rel)
        return {
            "epoch_time_s": epoch, "epoch_time_s_low": t_lo, "epoch_time_s_high": t_hi,
            "stall_time_s": stall, "compute_time_s": compute,
            "avg_power_w": power, "avg_power_w_low": p_lo, "avg_power_w_high": p_hi,
            "base_power_w": p["base"],
            "epoch_energy_j": energy, "epoch_energy_j_low": e_lo, "epoch_energy_j_high": e_hi,
            "cross_device": bool(self.cross_device),
            "power_source": "workload" if self.has_power else "reference",
        }

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_transfer_cache", None)
        state.pop("_anchor_time_s", None)
        return state


# -- fitting ----------------------------------------------------------------------------------------------
def _check_rows(rows: pd.DataFrame, device_id: str | None) -> tuple[str, str]:
    if not isinstance(rows, pd.DataFrame) or rows.empty:
        raise InputError("no profile rows: at least 1 profiled mode is needed to fit a workload", "rows")
    missing = [c for c in ("device", "workload", "epoch_time_s", *MODE_FIELDS) if c not in rows.columns]
    if missing:
        raise InputError(f"profile rows lack column(s) {', '.join(missing)}", missing[0])
    devices = sorted(set(rows["device"].astype(str)))
    if len(devices) > 1:
        raise InputError(f"profile rows mix devices {devices}: fit one device at a time", "device")
    workloads = sorted(set(rows["workload"].astype(str)))
    if len(workloads) > 1:
        raise InputError(f"profile rows mix workloads {workloads}: fit one workload at a time", "workload")
    row_device = devices[0]
    if device_id is not None and device_id != row_device:
        raise InputError(f"--device {device_id!r} does not match the rows' device {row_device!r}", "device")
    if row_device == HOST_DEVICE:
        raise InputError("rows of device 'host' have no Jetson power modes: profile on a Jetson or "
                         "sim:DEVICE to fit a power-mode model", "device")
    load_device(row_device)  # UnknownDeviceError names the valid ids
    knobs = rows[list(MODE_FIELDS)].apply(pd.to_numeric, errors="coerce")
    if knobs.isna().any().any():
        fld = knobs.columns[knobs.isna().any()][0]
        raise InputError(f"profile rows need {fld} on every row to fit a power-mode model", fld)
    t = pd.to_numeric(rows["epoch_time_s"], errors="coerce")
    if t.isna().any() or (t <= 0).any():
        raise InputError("epoch_time_s must be a positive number on every row", "epoch_time_s")
    return row_device, workloads[0]


def _scale_to_shape(x_total: np.ndarray, shape: np.ndarray, epoch: np.ndarray) -> float:
    """Geometric-mean factor that maps the reference shape (s at the anchor) onto the rows' epoch times."""
    pred = x_total @ shape
    return float(np.exp(np.mean(np.log(epoch / np.maximum(pred, 1e-12)))))


def fit_time(rows: pd.DataFrame, ref, *, weak: bool = False, kappas: tuple[float, float] | None = None
             ) -> dict[str, TermFit]:
    """Per-component time fits of one workload's rows, with ``ref``'s prior (``weak``: almost none);
    ``kappas`` overrides the reference's contention constants."""
    cores, cpu, gpu, emc = mode_arrays(rows)
    workers = rows["num_workers"].to_numpy(float)
    kc, kp = kappas or (ref.kappa_cpu, ref.kappa_pipe)
    feats = F.time_features(cores, cpu, gpu, emc, workers, kc, kp)
    epoch = rows["epoch_time_s"].to_numpy(float)
    targets = component_targets(rows)
    if not weak and any(name not in ref.shape_mean for name in targets):
        targets = {"total": epoch}  # the reference only knows totals: fit the total on its shape
    fits: dict[str, TermFit] = {}
    scale = None
    if not weak:
        scale = _scale_to_shape(F.design(feats, F.TOTAL_TERMS), ref.shape_mean["total"], epoch)
    for name, y in targets.items():
        terms = F.COMPONENT_TERMS[name]
        x = F.design(feats, terms)
        if weak:
            fits[name] = fit_terms(x, y, epoch, terms, noise_rel=ref.time_noise_rel)
            continue
        mean = scale * ref.shape_mean[name]
        sd = scale * ref.shape_sd[name]
        fits[name] = fit_terms(x, y, epoch, terms, mean, sd, noise_rel=ref.time_noise_rel)
    return fits


def fit_workload(rows: pd.DataFrame, device_id: str | None = None, reference: pd.DataFrame | None = None
                 ) -> WorkloadModel:
    """Fit one workload's profile rows (one device) with the device reference as prior.

    ``reference``: your own reference sweeps (profile rows of other workloads on the same device) or a
    fitted :class:`~predictor.reference.DeviceReference`; default the bundled reference of the device. Raises InputError for mixed devices/workloads, ``host`` rows,
    unknown devices or unusable rows.
    """
    from jetpredict.predictor.reference import build_reference, load_reference

    dev_id, workload = _check_rows(rows, device_id)
    rows = rows.reset_index(drop=True).copy()
    if "num_workers" not in rows.columns:
        rows["num_workers"] = 4.0
    rows["num_workers"] = pd.to_numeric(rows["num_workers"], errors="coerce").fillna(4.0)
    for col in ("stall_time_s", "compute_time_s", "avg_power_w", "epoch_energy_j", "base_power_w"):
        if col not in rows.columns:
            rows[col] = np.nan
        rows[col] = pd.to_numeric(rows[col], errors="coerce")
    if reference is None:
        ref = load_reference(dev_id)
    elif isinstance(reference, pd.DataFrame):
        ref = build_reference(reference, dev_id)
    else:
        ref = reference  # an already fitted DeviceReference (calibration loops reuse one)
    if ref.device_id != dev_id:
        raise InputError(f"reference sweeps are of device {ref.device_id!r}, rows of {dev_id!r}", "reference")

    time_fits = fit_time(rows, ref)
    alt = []
    if rows["cpu_cores"].nunique() > 1:
        # The core-count contrast measures CPU work x (contention - 1): a contention constant off by a
        # factor rescales the CPU share. Refit under the ends of the plausible range of the constants.
        for factor in KAPPA_FACTORS:
            kc, kp = ref.kappa_cpu * factor, ref.kappa_pipe * factor
            alt.append((kc, kp, fit_time(rows, ref, kappas=(kc, kp))))
    model = WorkloadModel(
        device_id=dev_id, workload_id=workload, reference_source=ref.source,
        profiled_modes=int(rows[list(MODE_FIELDS)].drop_duplicates().shape[0]), has_power=False,
        num_workers=float(rows["num_workers"].median()), kappa_cpu=ref.kappa_cpu, kappa_pipe=ref.kappa_pipe,
        time_fits=time_fits, base_coef=ref.base_coef, base_ratio=1.0, base_sd_rel=ref.base_noise_rel * 2,
        power_fit=TermFit(F.POWER_TERMS, ref.power_mean.copy(), np.diag(ref.power_sd ** 2),
                          POWER_NOISE_REL * 2),
        maxima=ref.maxima, interval_scale=ref.interval_scale,
        power_interval_scale=getattr(ref, "power_interval_scale", 1.0),
        energy_interval_scale=getattr(ref, "energy_interval_scale", 1.0), alt_time_fits=alt,
        hidden_cpu_ref_mhz=float(rows["cpu_mhz"].min()),
        profiled_ranges={k: (float(rows[k].min()), float(rows[k].max())) for k in MODE_FIELDS},
        training_rows=rows.astype(object).where(rows.notna(), None).to_dict(orient="records"),
    )
    fit_power(model, rows, ref)
    return model


def fit_power(model: WorkloadModel, rows: pd.DataFrame, ref) -> None:
    """Fit base ratio and dynamic power of ``model`` in place from rows that measured power."""
    power = row_power_w(rows)
    cores, cpu, gpu, emc = mode_arrays(rows)
    base_ref = F.design(F.base_features(cores, cpu, gpu, emc, model.maxima), F.BASE_TERMS) @ model.base_coef
    base_meas = rows["base_power_w"].to_numpy(float)
    ok = ~np.isnan(base_meas)
    if ok.any():
        # Shrink the workload's base-power ratio toward 1 (the base is mostly a device property).
        log_ratio = np.log(base_meas[ok] / base_ref[ok])
        k = ok.sum()
        model.base_ratio = float(np.exp(log_ratio.sum() / (k + 1.0)))
        model.base_sd_rel = float(np.sqrt((ref.base_noise_rel ** 2 * 2 + np.sum((log_ratio - np.log(
            model.base_ratio)) ** 2)) / (k + 2.0)))
    has = ~np.isnan(power)
    if not has.any():
        return
    model.has_power = True
    sub = rows[has]
    t = model._time(*(a[has] for a in (cores, cpu, gpu, emc)))
    compute = t.get("compute", None)
    if compute is None:
        feats = F.time_features(cores[has], cpu[has], gpu[has], emc[has], model.num_workers,
                                model.kappa_cpu, model.kappa_pipe)
        fit = model.time_fits["total"]
        parts = {term: c * feats[term] for term, c in zip(fit.terms, fit.coef, strict=True)}
        compute = parts["gpu"] + parts["mem"] + parts["cpu"]
    busy = compute / t["epoch"]
    active = model.gpu_active(t, compute)
    base = model.base_ratio * base_ref[has]
    dyn = power[has] - base
    rate = model.anchor_time_s() / t["epoch"]
    x = F.design(F.power_features(cores[has], cpu[has], gpu[has], emc[has], sub["num_workers"].to_numpy(float),
                                  busy, model.maxima, rate, active), F.POWER_TERMS)
    model.power_fit = fit_terms(x, dyn, power[has], F.POWER_TERMS, ref.power_mean, ref.power_sd,
                                noise_rel=ref.power_noise_rel)


def source_of(rows: pd.DataFrame) -> str:
    """The provenance kind of a set of reference rows (the least trustworthy kind present)."""
    kinds = {source_kind(s) for s in rows.get("source", pd.Series(["measured"]))}
    for kind in ("simulated", "measured", "published"):
        if kind in kinds:
            return kind
    return "measured"


def save_model(model: WorkloadModel, path) -> None:
    """Write ``model`` with joblib plus a JSON manifest (versions, SHA-256) next to it (``PATH.json``)."""
    from jetpredict.predictor.artifacts import save_artifact

    save_artifact(model, path, kind="workload-model", extra={
        "device_id": model.device_id, "workload_id": model.workload_id,
        "reference_source": model.reference_source, "profiled_modes": model.profiled_modes,
        "model_version": model.model_version})


def load_model(path) -> WorkloadModel:
    """Load a model file written by :func:`save_model`; InputError if its manifest or SHA-256 fails."""
    from jetpredict.predictor.artifacts import load_artifact

    model = load_artifact(path, kind="workload-model")
    if not isinstance(model, WorkloadModel):
        raise InputError(f"{path} does not hold a jetpredict workload model", "model")
    return model
