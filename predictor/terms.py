"""The estimator under every fit: non-negative term coefficients with a Gaussian prior, and what feeds it.

- :class:`PriorLinearRegression` (an estimator in scikit-learn's conventions) and :class:`TermFit` (its
  fitted coefficients on named terms, immutable);
- profile-row preparation and checks shared by workload fits and reference sweeps;
- :func:`fit_time`: the per-component time fit of one workload's rows.

The provenance rules (trust orders, their merge over several parts) are :mod:`~.provenance`'s.

Units: times in s per epoch, clocks in MHz, term features in 1/GHz (so coefficients are s x GHz).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, Device, ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import (
    COLUMNS,
    DEFAULT_NUM_WORKERS,
    HOST_DEVICE,
    MAX_TIME_S,
)
from jetpredict.models.reader_limits import MAX_COLUMNS
from jetpredict.predictor import features as F
from jetpredict.predictor.constants import NOISE_PRIOR_ROWS, ONE_SHARE_SD, TIME_NOISE_REL
from scipy.special import log_ndtr, ndtri_exp

#: Optional measured columns a fit reads (NaN = unknown), in :class:`ProfileArrays` order.
MEASURED_COLUMNS: tuple[str, ...] = ("stall_time_s", "compute_time_s", "avg_power_w", "epoch_energy_j",
                                     "base_power_w")

#: Epoch times a fit accepts (s): below a millisecond or above ~3 years (the rows' own ceiling) a row is a
#: unit or typing error, and the log-space fit would under- or overflow.
MIN_EPOCH_TIME_S, MAX_EPOCH_TIME_S = 1e-3, MAX_TIME_S
#: Gibbs sampler of a posterior restricted to non-negative coefficients (:attr:`TermFit.non_negative`):
#: parallel chains from the fitted point, sweeps discarded then kept (128 x 32 = 4,096 draws), seed 0. The
#: chains leave a corner of the orthant: 16 sweeps left an aliased pair's SD 9% short of rejection
#: sampling's (20 million draws), 64 within 1%.
NON_NEGATIVE_CHAINS = 128
NON_NEGATIVE_BURN_IN = 64
NON_NEGATIVE_SWEEPS = 32
#: A fit whose every coefficient lies this many SDs above 0 (under 0.2% below it) is left as it is.
NON_NEGATIVE_SKIP_SDS = 3.0
class PriorLinearRegression:
    """Non-negative linear regression with an independent Gaussian prior on each coefficient (MAP fit).

    Minimises ``sum(((y - X b) / (noise_rel * scale))^2) + sum(((b - prior_mean) / prior_sd)^2)`` over
    ``b >= 0`` (an augmented NNLS). ``scale`` (per row, s) sets the noise level; the noise estimate blends
    the prior ``noise_rel`` (worth ``noise_dof`` rows) with the residuals. Fitted: ``coef_``, ``cov_``
    (Laplace approximation), ``noise_rel_``.

    scikit-learn's estimator conventions (parameters stored as given, fitted state ending in ``_``), without
    its base classes: importing them took over a second of every service and command start.
    """

    def __init__(self, prior_mean=None, prior_sd=None, noise_rel: float = TIME_NOISE_REL,
                 noise_dof: float = NOISE_PRIOR_ROWS) -> None:
        self.prior_mean = prior_mean
        self.prior_sd = prior_sd
        self.noise_rel = noise_rel
        self.noise_dof = noise_dof

    def fit(self, X, y, scale=None):
        # Imported here, not at the top: a fit needs it, a prediction from a fitted model does not (0.14 s a start).
        from scipy.optimize import nnls

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
        return mean, np.sqrt(np.maximum(np.sum((X @ self.cov_) * X, axis=1), 0.0))


def _truncated_standard_normal(low: np.ndarray, high: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Standard normal draws restricted to ``[low, high]`` by inversion of uniforms ``u`` in [0, 1), in log
    space from the tail nearer the interval, so a bound 40 SDs out still gives a draw just beyond it."""
    with np.errstate(invalid="ignore"):  # low + high of -inf + inf: nothing to mirror
        mirror = low + high < 0.0
    a, b = np.where(mirror, -high, low), np.where(mirror, -low, high)
    upper_tail = log_ndtr(-a)  # ln P(Z > a)
    log_p = upper_tail + np.log1p(u * np.expm1(log_ndtr(-b) - upper_tail))  # ln(P(Z > a) - u P(a < Z < b))
    z = np.clip(-ndtri_exp(log_p), a, b)
    return np.where(mirror, -z, z)


def non_negative_moment(coef: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """Second moment about ``coef`` (>= 0) of the Gaussian N(coef, cov) restricted to the non-negative
    orthant, by Gibbs sampling (:data:`NON_NEGATIVE_CHAINS` chains, seed 0: deterministic).

    The chains move along the covariance's principal axes, scaled to unit SD, each step a draw of one axis
    within the interval the orthant leaves: along an aliased pair's long axis a step spans the whole
    segment, where steps along the coefficients' own axes would creep by the short axis's SD."""
    return non_negative_moments([(coef, cov)])[0]


def non_negative_moments(gaussians: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """:func:`non_negative_moment` of each ``(coef, cov)``, every one exactly as alone: the chains of all
    step in lockstep (one loop of numpy calls instead of one per Gaussian, the loop's cost being the calls),
    and step ``j`` of each takes the ``j``-th uniforms of the seed-0 stream, as it does alone. Gaussians of
    fewer coefficients or axes are padded with zero axes, which no step moves and no bound reads."""
    prepared = []
    for coef, cov in gaussians:
        coef = np.asarray(coef, dtype=float)
        values, vectors = np.linalg.eigh((cov + cov.T) / 2)
        keep = values > 1e-12 * max(float(values.max()), 0.0)
        prepared.append((coef, vectors[:, keep] * np.sqrt(values[keep])))  # coefficient change per unit step
    if not prepared:
        return []
    n, chains, sweeps = len(prepared), NON_NEGATIVE_CHAINS, NON_NEGATIVE_BURN_IN + NON_NEGATIVE_SWEEPS
    n_axes = np.array([a.shape[1] for _, a in prepared])
    width = max(len(c) for c, _ in prepared)
    axes = np.zeros((n, max(int(n_axes.max()), 1), width))
    x = np.zeros((n, chains, width))
    for g, (coef, a) in enumerate(prepared):
        axes[g, :a.shape[1], :len(coef)] = a.T
        x[g, :, :len(coef)] = np.maximum(coef, 0.0)
    up, down = axes > 0, axes < 0
    steps = np.zeros((n, chains, axes.shape[1]))
    kept: list[list[np.ndarray]] = [[] for _ in prepared]
    rng, every = np.random.default_rng(0), np.arange(n)
    period, last = np.maximum(n_axes, 1), sweeps * n_axes  # per Gaussian: steps per sweep, steps in all
    for j in range(sweeps * int(n_axes.max())):
        i = j % period  # each Gaussian's axis at its own step j (it stops at sweeps x axes)
        axis = axes[every, i][:, None, :]
        current = steps[every, :, i]
        rest = x - current[:, :, None] * axis  # the coefficients without this axis's step
        with np.errstate(divide="ignore", invalid="ignore"):  # zero components: no bound, masked below
            ratio = -rest / axis
        low, high = np.full((n, chains), -np.inf), np.full((n, chains), np.inf)
        for c in range(width):  # column by column: numpy reduces a short last axis slowly
            low = np.maximum(low, np.where(up[every, i, c][:, None], ratio[:, :, c], -np.inf))
            high = np.minimum(high, np.where(down[every, i, c][:, None], ratio[:, :, c], np.inf))
        # The current step lies inside up to rounding: kept inside, the interval is never empty.
        step = _truncated_standard_normal(np.minimum(low, current), np.maximum(high, current),
                                          rng.random(chains))
        x = np.maximum(rest + step[:, :, None] * axis, 0.0)
        steps[every, :, i] = step
        sweep_end = (j + 1) % period == 0
        for g in np.flatnonzero((n_axes > 0) & sweep_end & (j // period >= NON_NEGATIVE_BURN_IN) & (j < last)):
            kept[g].append(x[g, :, :len(prepared[g][0])] - prepared[g][0])
    moments = []
    for g, (coef, _) in enumerate(prepared):
        # No axis to move along: every kept sweep is the start.
        spread = np.concatenate(kept[g] or [x[g, :, :len(coef)] - coef] * NON_NEGATIVE_SWEEPS)
        moments.append(spread.T @ spread / len(spread))
    return moments


@dataclass(frozen=True, eq=False)
class TermFit:
    """Fitted coefficients of one time/power component on its named terms (s x GHz, or W)."""

    terms: tuple[str, ...]
    coef: np.ndarray
    cov: np.ndarray
    noise_rel: float

    def predict(self, feats: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Mean and posterior SD per mode."""
        x = F.design(feats, self.terms)
        mean = x @ self.coef
        sd = np.sqrt(np.maximum(np.sum((x @ self.cov) * x, axis=1), 0.0))
        return mean, sd

    def mean(self, feats: Mapping[str, np.ndarray]) -> np.ndarray:
        """The mean only: a weighted sum of a few columns, cheaper than the design matrix."""
        return sum(c * feats[t] for t, c in zip(self.terms, self.coef, strict=True))

    def coef_of(self, term: str) -> float:
        return float(self.coef[self.terms.index(term)]) if term in self.terms else 0.0

    def scaled(self, factors: Mapping[str, float]) -> TermFit:
        """The same fit with each term's coefficient multiplied (cross-device transfer)."""
        s = np.array([factors.get(t, 1.0) for t in self.terms])
        return TermFit(self.terms, self.coef * s, self.cov * np.outer(s, s), self.noise_rel)

    @cached_property
    def non_negative(self) -> TermFit:
        """The same fit with the covariance of its Gaussian (Laplace) posterior restricted to the
        coefficients the fit allows (all >= 0, as its NNLS), taken about the fitted point.

        Where two terms alias, the Gaussian spreads far along their line into negative work (GPU 217 +- 548,
        memory 230 +- 383 s x GHz, correlation -0.995), which cancels where the profiled modes lie but not
        once a transfer scales the terms by different factors. Sampled (:func:`non_negative_moment`) however
        little of the Gaussian's mass lies inside, so no unrestricted spread leaks back in [E12]; a fit with
        (almost) no mass below 0 is kept as it is. Cached: a model moves to several devices."""
        return self if self._restricted_whole else self._restricted(non_negative_moment(self.coef, self.cov))

    @property
    def _restricted_whole(self) -> bool:
        """Whether :attr:`non_negative` is the fit itself: no terms, an unusable covariance, or (almost) no
        mass below 0."""
        return (not len(self.terms) or not np.all(np.isfinite(self.cov))
                or bool(np.all(self.coef > NON_NEGATIVE_SKIP_SDS * np.sqrt(np.maximum(np.diag(self.cov), 0.0)))))

    def _restricted(self, moment: np.ndarray) -> TermFit:
        return TermFit(self.terms, self.coef, moment, self.noise_rel)


def restrict_together(fits: Iterable[TermFit]) -> None:
    """Fill the :attr:`TermFit.non_negative` of ``fits`` in one lockstep run (:func:`non_negative_moments`):
    the same values as one by one, at a fraction of the cost where a transfer restricts several fits."""
    todo = list({id(f): f for f in fits if "non_negative" not in f.__dict__ and not f._restricted_whole}.values())
    for fit, moment in zip(todo, non_negative_moments([(f.coef, f.cov) for f in todo]), strict=True):
        fit.__dict__["non_negative"] = fit._restricted(moment)  # where cached_property keeps its value


def fit_terms(x: np.ndarray, y: np.ndarray, scale: np.ndarray, terms: tuple[str, ...], prior_mean=None,
              prior_sd=None, noise_rel: float = TIME_NOISE_REL) -> TermFit:
    est = PriorLinearRegression(prior_mean, prior_sd, noise_rel).fit(x, y, scale)
    return TermFit(terms, est.coef_, est.cov_, est.noise_rel_)


# -- rows -------------------------------------------------------------------------------------------------
def check_columns(rows: pd.DataFrame, what: str, field: str | None = None) -> None:
    """InputError unless ``rows`` is a non-empty table with the columns every fit needs."""
    if not isinstance(rows, pd.DataFrame) or rows.empty:
        raise InputError(f"no {what}: at least 1 profiled mode is needed", field or "rows")
    missing = [c for c in ("device", "workload", "epoch_time_s", *MODE_FIELDS) if c not in rows.columns]
    if missing:
        raise InputError(f"{what} lack column(s) {', '.join(missing)}", field or missing[0])


def check_device(rows: pd.DataFrame, device: Device | None = None) -> tuple[Device, str]:
    """The rows' device and workload; InputError naming the field for missing columns, mixed devices or
    workloads, ``host`` rows, a device other than ``device``, or an unknown device."""
    if device is not None and not isinstance(device, Device):
        raise InputError(f"device must be a catalogue Device (resolve an id with "
                         f"models.catalogue.resolve_device), got {device!r}", "device")
    check_columns(rows, "profile rows")
    devices = sorted(set(rows["device"].astype(str)))
    if len(devices) > 1:
        raise InputError(f"profile rows mix devices {devices}: fit one device at a time", "device")
    workloads = sorted(set(rows["workload"].astype(str)))
    if len(workloads) > 1:
        raise InputError(f"profile rows mix workloads {workloads}: fit one workload at a time", "workload")
    row_device = devices[0]
    if row_device == HOST_DEVICE:
        raise InputError("rows of device 'host' have no Jetson power modes, so they cannot be fitted: a host "
                         "profile checks that the workload trains and measures its minibatch times and "
                         "complexity on this machine; to predict Jetson modes, profile on a Jetson "
                         "(--device jetson) or on the digital twin (--device sim:DEVICE)", "device")
    if device is not None and device.id != row_device:
        raise InputError(f"--device {device.id!r} does not match the rows' device {row_device!r}", "device")
    return device or load_device(row_device), workloads[0]  # UnknownDeviceError names the valid ids


def check_rows(rows: pd.DataFrame, device: Device | None = None) -> tuple[Device, str]:
    """:func:`check_device`, and every row has numeric knobs and a positive epoch time."""
    resolved, workload = check_device(rows, device)
    knobs = {}
    for fld in MODE_FIELDS:
        knobs[fld] = frame_column(rows, fld)
        if not np.isfinite(knobs[fld]).all():
            raise InputError(f"profile rows need {fld} on every row to fit a power-mode model", fld)
    bad = ModeArrays.from_frame(knobs).out_of_range(resolved)
    if bad:
        fld, message = next(iter(bad.items()))
        raise InputError(f"profile rows: {message}", fld)
    t = frame_column(rows, "epoch_time_s")
    if not (np.isfinite(t) & (t >= MIN_EPOCH_TIME_S) & (t <= MAX_EPOCH_TIME_S)).all():
        raise InputError(f"epoch_time_s must be a number of seconds in {MIN_EPOCH_TIME_S:g}..{MAX_EPOCH_TIME_S:g} "
                         f"on every row", "epoch_time_s")
    return resolved, workload


def frame_column(rows: pd.DataFrame, name: str) -> np.ndarray:
    """Column ``name`` of profile rows as floats (NaN where a cell is no number, all NaN without it)."""
    if name not in rows.columns:
        return np.full(len(rows), np.nan)
    values = rows[name]
    if values.dtype.kind in "fiu":
        return values.to_numpy(dtype=float)
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)


def row_modes(rows: pd.DataFrame, modes: ModeArrays) -> ModeArrays:
    """``modes`` with the GPU share of the rows that ran under a preset gating part of the GPU
    (``Device.labelled_modes``: labelled with the preset's name, at its knobs)."""
    try:
        device = load_device(str(rows["device"].iloc[0])) if "device" in rows.columns and len(rows) else None
    except InputError:  # host rows, or a device the checks name later
        device = None
    return modes if device is None else device.labelled_modes({**modes.as_dict(), "mode": rows.get("mode")})


@dataclass(frozen=True, eq=False)
class ProfileArrays:
    """The numbers of one set of profile rows as aligned float arrays (NaN = unknown): the modes, DataLoader
    workers, epoch time and its measured components (s), mean power and energy (W, J), base power (W),
    and the complexity columns (per training sample) with the samples per epoch."""

    modes: ModeArrays
    num_workers: np.ndarray
    epoch_time_s: np.ndarray
    stall_time_s: np.ndarray
    compute_time_s: np.ndarray
    avg_power_w: np.ndarray
    epoch_energy_j: np.ndarray
    base_power_w: np.ndarray
    flops_train: np.ndarray
    samples_per_epoch: np.ndarray

    @classmethod
    def from_frame(cls, rows: pd.DataFrame) -> ProfileArrays:
        col = partial(frame_column, rows)
        workers = col("num_workers")
        return cls(row_modes(rows, ModeArrays(*(col(k) for k in MODE_FIELDS))),
                   np.where(np.isnan(workers), float(DEFAULT_NUM_WORKERS), workers),
                   *(col(k) for k in ("epoch_time_s", *MEASURED_COLUMNS, "flops_train")),
                   col("batch_size") * col("minibatches_per_epoch"))

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, object]]) -> ProfileArrays:
        """The arrays a fit reads from profile rows given as records (a model's ``training_rows``), each
        run's repeats merged (:meth:`merged_repeats`) as the fit merges them. More distinct keys than a
        profile file may hold (:data:`~models.reader_limits.MAX_COLUMNS`, and every field, which a checked
        row carries whether its file named it or not) are refused before the table is built: rows of a key
        each would make it rows x keys."""
        most = MAX_COLUMNS + len(COLUMNS)
        rows_given = list(records)
        columns: set[object] = set()
        for i, record in enumerate(rows_given):
            columns.update(record)
            if len(columns) > most:
                raise InputError(f"training_rows hold more than {most} distinct columns (from row {i} on): a "
                                 f"profile file's {MAX_COLUMNS} and the {len(COLUMNS)} fields", "model")
        rows = pd.DataFrame(rows_given)
        return cls.from_frame(rows).merged_repeats(frame_column(rows, "batch_size"))

    def __len__(self) -> int:
        return len(self.modes)

    def merged_repeats(self, batch_size: np.ndarray) -> ProfileArrays:
        """One row per run repeated on the same mode (same knobs, workers, ``batch_size`` per row and
        samples per epoch: the run a row's repeats share, as ``models.profile_rows.SAME_RUN_FIELDS``), each
        measurement the mean of the repeats that have it: a repeat averages run-to-run noise out, not the
        model's error, so two copies of a row are one mode's evidence, not two (they would narrow the
        intervals)."""
        knobs = np.column_stack([*self.modes.as_dict().values(), self.modes.gpu_share, self.num_workers,
                                 *(np.nan_to_num(v, nan=-1.0) for v in (batch_size, self.samples_per_epoch))])
        _, first, group = np.unique(knobs, axis=0, return_index=True, return_inverse=True)
        if len(first) == len(self):
            return self
        group = group.ravel()
        order = np.sort(first)  # the rows' own order, by each group's first row
        rank = np.empty(len(order), dtype=int)
        rank[group[order]] = np.arange(len(order))
        index = rank[group]  # each row's merged row

        def mean(values: np.ndarray) -> np.ndarray:
            total = np.zeros(len(order))
            count = np.zeros(len(order))
            known = np.isfinite(values)
            np.add.at(total, index[known], values[known])
            np.add.at(count, index[known], 1.0)
            return np.where(count > 0, total / np.maximum(count, 1.0), np.nan)

        return ProfileArrays(self.modes.take(order), self.num_workers[order],
                             *(mean(getattr(self, f)) for f in ("epoch_time_s", *MEASURED_COLUMNS, "flops_train")),
                             self.samples_per_epoch[order])

    @property
    def measured_components(self) -> bool:
        """True when every row measures both stall and compute (then each component gets its own model)."""
        return bool(np.isfinite(self.stall_time_s).all() and np.isfinite(self.compute_time_s).all())

    def component_targets(self) -> dict[str, np.ndarray]:
        """Per-component targets in s: compute, stall and the rest of the epoch (clipped at 0), or the total."""
        if not self.measured_components:
            return {"total": self.epoch_time_s}
        return {"compute": self.compute_time_s, "stall": self.stall_time_s,
                "rest": np.maximum(self.epoch_time_s - self.stall_time_s - self.compute_time_s, 0.0)}

    def power_w(self) -> np.ndarray:
        """Mean training power per row (W): ``avg_power_w``, else energy / time; NaN when neither is known."""
        return np.where(np.isnan(self.avg_power_w), self.epoch_energy_j / self.epoch_time_s, self.avg_power_w)

    def profiled_ranges(self) -> dict[str, tuple[float, float]]:
        """Each knob's (low, high) over the rows, as far as they reach (:meth:`ModeArrays.reach`)."""
        return {k: (float(v.min()), float(v.max())) for k, v in self.modes.reach().items()}

    def distinct_modes(self) -> int:
        return self.modes.distinct_count()


# -- the time fit -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShapePrior:
    """Prior of each component's term coefficients per 1 s of epoch at the anchor mode (mean, SD)."""

    mean: Mapping[str, np.ndarray]
    sd: Mapping[str, np.ndarray]


def split_compute(fits: Mapping[str, TermFit], feats: Mapping[str, np.ndarray]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(compute, stall) time per mode in s: the measured components, or from a total-only fit the GPU
    terms plus the main thread's work as compute and the data pipeline as stall."""
    if "compute" in fits:
        return fits["compute"].mean(feats), fits["stall"].mean(feats)
    fit = fits["total"]
    compute = sum(fit.coef_of(t) * feats[t] for t in ("gpu", "mem", "cpu", "cmem"))
    stall = sum(fit.coef_of(t) * feats[t] for t in ("pipe", "pmem", "emc"))
    return compute, stall


def fit_time(rows: ProfileArrays, kappas: tuple[float, float], noise_rel: float,
             prior: ShapePrior | None = None, gpu_floor: float = 0.0, physics_one: bool = False
             ) -> dict[str, TermFit]:
    """Per-component time fits of profile rows under contention constants ``kappas`` (CPU, pipeline).

    ``prior``: the reference shape (scaled to the rows' level); None fits the rows alone (reference
    sweeps). ``gpu_floor`` (s x GHz): lower bound of the GPU term of the compute (or total) component,
    from the workload's FLOPs (see ``complexity.gpu_floor``); the prior mean is raised to it when below.
    ``physics_one``: the clock-independent ``one`` term gets the physics prior (mean 0, SD
    ``ONE_SHARE_SD`` of the epoch) instead of the reference's share: profiled modes that barely move the
    CPU clock cannot tell CPU work from clock-independent time, and the reference's share then decided it [E6].
    """
    feats = F.time_features(rows.modes, rows.num_workers, *kappas)
    epoch = rows.epoch_time_s
    targets = rows.component_targets()
    if prior is not None and any(name not in prior.mean for name in targets):
        targets = {"total": epoch}  # the reference only knows totals: fit the total on its shape
    scale = None
    if prior is not None:
        pred = F.design(feats, F.TOTAL_TERMS) @ prior.mean["total"]
        scale = float(np.exp(np.mean(np.log(epoch / np.maximum(pred, 1e-12)))))
    fits: dict[str, TermFit] = {}
    for name, y in targets.items():
        terms = F.COMPONENT_TERMS[name]
        x = F.design(feats, terms)
        floor = np.zeros(len(terms))
        if gpu_floor > 0 and name in ("compute", "total"):
            floor[terms.index("gpu")] = gpu_floor
        mean = sd = None
        if prior is not None:
            mean = np.maximum(scale * prior.mean[name], floor)
            sd = scale * prior.sd[name]
            if physics_one and "one" in terms:
                # Clock-independent time: physics says little of a training step runs on no clock.
                k = terms.index("one")
                mean, sd = mean.copy(), sd.copy()
                mean[k], sd[k] = 0.0, scale * ONE_SHARE_SD
        # The floor is a shift of the non-negative coefficient: fit b' = b - floor >= 0.
        fit = fit_terms(x, y - x @ floor, epoch, terms, None if mean is None else mean - floor, sd, noise_rel)
        fits[name] = TermFit(terms, fit.coef + floor, fit.cov, fit.noise_rel)
    return fits
