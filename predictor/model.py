"""The workload model: a mechanistic few-shot fit of epoch time and power, with a prior from reference sweeps.

Time per epoch is a sum of non-negative terms (:mod:`jetpredict.predictor.features`): GPU work / f_gpu,
memory traffic / f_emc, CPU work / f_cpu x contention, data-pipeline work / f_cpu x contention, CPU-side
work bound by the slower of core and memory (main thread and pipeline, each under its contention), and a
constant, fitted per component (compute, stall, rest) when the rows measure them. Each term's coefficient
has a Gaussian prior centred on the *shape* (term shares, scaled to the new workload's level) of the
reference workloads whose stall and compute split resembles the rows' own (:mod:`jetpredict.predictor.regime`; all of
them when none does), with their contention constants, and wide enough that a workload's own rows move
the shares; the maximum a-posteriori fit is constrained to be non-negative. The workload's own complexity
(``flops_train`` per sample, when the rows carry it) bounds its GPU term from below: no mode runs its
FLOPs faster than the GPU's FP32 peak.

Power = base(mode) + dynamic terms (GPU busy x f V^2, memory, active cores x f V^2, constant); energy =
power x time. The GPU term's busy share excludes the time the GPU waits on a main thread slower than at the
top CPU clock, so a CPU-bound workload's GPU power falls with the CPU clock as its kernels thin out.

The workload's own rows decide what they vary: they are weighted by their measurement noise (not by how
well the model fits the reference's sweeps) [E1], measured rows keep real hardware's core contention even
under a simulated reference (:func:`jetpredict.predictor.reference.contention_for`) [E5], a pipeline
heavier than the references' measures its own contention and its main thread's (``regime.own_contention``),
and the fit at constants so measured is the estimate, not the average over the variants [E5], and the split
between CPU work and clock-independent time, which profiled modes that barely move the CPU clock cannot
make, follows physics rather than the reference (``constants.ONE_SHARE_SD``) [E6].

Intervals (at a ``confidence``, default 0.9) come from the posterior covariance, the spread of the
core-contention variants, the run-to-run noise and, outside the profiled knob ranges, an extrapolation
term [E9], wider for a workload outside the references' regime (``regime.regime_factor``) [E10], with the
model's own SD scaled as calibrated on real data [E11]; cross-device predictions add the transfer's own SD
(see :mod:`jetpredict.predictor.transfer`) [E12]. Every tuned number lives in
:mod:`jetpredict.predictor.constants`; its tag ``[E#]`` names the evidence in ``docs/model-evidence.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, Device, ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import frame_records
from jetpredict.predictor import features as F
from jetpredict.predictor.complexity import complexity_of, gpu_floor
from jetpredict.predictor.constants import (
    BASE_NOISE_PRIOR_ROWS,
    BASE_RATIO_PRIOR_ROWS,
    CROSS_DEVICE_REL_SD,
    EXTRAPOLATION_REL_SD,
    INTERVAL_NOISE_FLOOR,
    INTERVAL_SCALES,
    KAPPA_FACTORS,
    KAPPA_FACTORS_COVERAGE,
    MAX_LOG_HALF_WIDTH,
    OUTSIDE_TOLERANCE_LN,
    POOLED_FROM_MODES,
    POWER_LEVEL_RANGE,
    POWER_NOISE_FLOOR,
    POWER_NOISE_FLOOR_W,
    POWER_NOISE_REL,
    POWER_SD_SHARE,
    TIME_NOISE_REL,
    UNMEASURED_POWER_LEVEL_SD,
    UNMEASURED_POWER_SD_FACTOR,
    IntervalScales,
)
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE
from jetpredict.predictor.provenance import source_of
from jetpredict.predictor.reference import DeviceReference, build_reference, contention_for, without_own_sweep
from jetpredict.predictor.regime import (
    own_contention,
    reference_span,
    regime_evidence,
    regime_factor,
    regime_kappas,
    regime_prior,
    regime_weights,
)
from jetpredict.predictor.terms import (
    ProfileArrays,
    TermFit,
    check_rows,
    fit_terms,
    fit_time,
    frame_column,
    split_compute,
)
from scipy.special import ndtri

#: The model's form and calibration (not the package's version): ``mech-N`` changes whenever a fitted
#: model of the previous form would predict differently; a saved model records the form it was fitted in.
MODEL_VERSION = "mech-18"


def interval_scales_for(profiled_modes: int) -> IntervalScales:
    """The calibrated scales of a model fitted on ``profiled_modes`` distinct modes."""
    return INTERVAL_SCALES[min(max(int(profiled_modes), 1), max(INTERVAL_SCALES))]


@dataclass(frozen=True)
class ContentionVariant:
    """Time fits under other plausible contention constants: their spread is the model-form uncertainty
    of attributing the core-count effect to CPU work."""

    kappa_cpu: float
    kappa_pipe: float
    fits: Mapping[str, TermFit]


#: Knob names per 4-bit "outside the profiled range" code (bit i = ``MODE_FIELDS[i]``).
_OUTSIDE_NAMES = np.array([";".join(k for b, k in enumerate(MODE_FIELDS) if code >> b & 1)
                           for code in range(1 << len(MODE_FIELDS))], dtype=object)
_OUTSIDE_BITS = 1 << np.arange(len(MODE_FIELDS))


@dataclass(frozen=True, eq=False)
class Prediction:
    """Predictions for ``n`` modes (arrays of length n): s, W, J; intervals at ``confidence``.

    ``outside[i, k]``: mode i lies outside the profiled range of knob ``MODE_FIELDS[k]`` (across devices,
    outside the source's ranges moved to the target by ``transfer.ranges_on``).
    """

    epoch_time_s: np.ndarray
    epoch_time_s_low: np.ndarray
    epoch_time_s_high: np.ndarray
    stall_time_s: np.ndarray
    compute_time_s: np.ndarray
    avg_power_w: np.ndarray
    avg_power_w_low: np.ndarray
    avg_power_w_high: np.ndarray
    base_power_w: np.ndarray
    epoch_energy_j: np.ndarray
    epoch_energy_j_low: np.ndarray
    epoch_energy_j_high: np.ndarray
    outside: np.ndarray
    confidence: float
    cross_device: bool
    power_source: str

    ARRAYS = ("epoch_time_s", "epoch_time_s_low", "epoch_time_s_high", "stall_time_s", "compute_time_s",
              "avg_power_w", "avg_power_w_low", "avg_power_w_high", "base_power_w", "epoch_energy_j",
              "epoch_energy_j_low", "epoch_energy_j_high")

    def __len__(self) -> int:
        return int(self.epoch_time_s.shape[0])

    @property
    def extrapolated(self) -> np.ndarray:
        """True for modes with any knob outside its profiled range."""
        return self.outside.any(axis=1)

    def extrapolated_knobs(self) -> list[str]:
        """Per mode, the knobs outside their profiled range joined by ``;`` ("" when none)."""
        return self._knob_names().tolist()

    def _knob_names(self) -> np.ndarray:
        # One table lookup per mode (4-bit code -> names), not a string join: 29,232 modes stay vectorised.
        return _OUTSIDE_NAMES[np.asarray(self.outside, dtype=np.int64) @ _OUTSIDE_BITS]

    def take(self, index: np.ndarray | slice) -> Prediction:
        """The predictions of the modes at ``index``."""
        arrays = {k: getattr(self, k)[index] for k in self.ARRAYS}
        return replace(self, **arrays, outside=self.outside[index])

    def columns(self) -> dict[str, object]:
        """Every field as a column: arrays, ``extrapolated`` (bool) and ``extrapolated_knobs`` (strings),
        scalars as they are."""
        out: dict[str, object] = {k: getattr(self, k) for k in self.ARRAYS}
        out["extrapolated"] = self.extrapolated
        out["extrapolated_knobs"] = self._knob_names()
        out.update(confidence=self.confidence, cross_device=self.cross_device, power_source=self.power_source)
        return out


def z_of(confidence: float) -> float:
    """Two-sided normal quantile of a central interval holding ``confidence``; InputError outside (0, 1)."""
    if isinstance(confidence, bool) or not isinstance(confidence, int | float | np.floating) \
            or not 0.0 < float(confidence) < 1.0:
        raise InputError(f"confidence must be a number between 0 and 1 (exclusive), got {confidence!r}",
                         "confidence")
    return float(ndtri(0.5 + float(confidence) / 2.0))


#: The SDs the contention factors' range spans (its two-sided normal quantile) [E5].
KAPPA_FACTORS_Z = z_of(KAPPA_FACTORS_COVERAGE)


@dataclass(frozen=True)
class _TimeParts:
    """An epoch's time per mode and its parts, in seconds."""

    epoch_s: np.ndarray
    compute_s: np.ndarray
    stall_s: np.ndarray
    gpu_wait_s: np.ndarray
    rel_sd_model: np.ndarray
    rel_sd_noise: float
    extrapolation: np.ndarray


@dataclass(frozen=True)
class _PowerParts:
    """Average power per mode: all of it and its idle part (``base_w``), in watts."""

    power_w: np.ndarray
    base_w: np.ndarray
    rel_sd_model: np.ndarray
    rel_sd_noise: np.ndarray
    extrapolation: np.ndarray
    #: Share of the power drawn in proportion to the epoch's progress rate (fixed work per minibatch):
    #: it carries the time prediction's relative error.
    rate_share: np.ndarray


@dataclass(frozen=True, eq=False)
class WorkloadModel:
    """The fitted state of one workload on one device: an immutable value (no torch, no code)."""

    device: Device
    workload_id: str
    reference_source: str
    profiled_modes: int
    has_power: bool
    num_workers: float
    kappa_cpu: float
    kappa_pipe: float
    time_fits: Mapping[str, TermFit]
    base_coef: np.ndarray
    base_ratio: float
    base_sd_rel: float
    power_fit: TermFit
    maxima: Mapping[str, float]
    variants: tuple[ContentionVariant, ...] = ()
    #: The rows measured their own contention constants (``regime.own_contention`` moved them off the
    #: reference's): the fit at them is the estimate, not the average over ``variants`` [E5].
    contention_measured: bool = False
    interval_scales: IntervalScales = INTERVAL_SCALES[POOLED_FROM_MODES]
    #: Knob ranges of the profiled modes, ``{knob: (low, high)}``; outside them predictions are flagged
    #: ``extrapolated`` and intervals widen by ``EXTRAPOLATION_REL_SD[output] x sqrt(sum((share_of_knob x
    #: ln-distance)^2))``. A cross-device model holds the source's ranges at the same share of each knob's
    #: top, ends snapped inward to the target's steps (``transfer.ranges_on``), and widens by the same rule on top
    #: of ``cross_device_rel_sd``.
    profiled_ranges: Mapping[str, tuple[float, float]] | None = None
    cross_device: bool = False
    source_device_id: str | None = None
    #: Extra relative SD of a cross-device prediction, and how the transfer was made
    #: (``reference-workloads`` or ``physics``); see :mod:`jetpredict.predictor.transfer`.
    cross_device_rel_sd: float = CROSS_DEVICE_REL_SD
    transfer_method: str | None = None
    #: The workload's complexity read from its rows (``flops_train`` per sample ...), for the record.
    complexity: Mapping[str, float] = field(default_factory=dict)
    #: :func:`gpu_floor` of the training rows on the device that ran them (s x GHz; 0: no bound).
    rows_gpu_floor: float = 0.0
    training_rows: tuple[Mapping[str, object], ...] = field(default=(), repr=False)
    model_version: str = MODEL_VERSION

    @property
    def device_id(self) -> str:
        return self.device.id

    # -- prediction -----------------------------------------------------------------------------------
    def predict(self, modes: ModeArrays, confidence: float = DEFAULT_CONFIDENCE) -> Prediction:
        """Predict every mode of ``modes`` (this model's device); InputError for knobs outside it."""
        z = z_of(confidence)
        if bad := modes.out_of_range(self.device):
            fld, message = next(iter(bad.items()))
            raise InputError(f"model of device {self.device_id!r}: {message}", fld)
        t, p, distances = self.parts(modes)
        # No module draws above its range: a fit extrapolated past it says only that the mode runs at the limit.
        most_w = self.device.power_range_w[1]
        energy = (power := np.minimum(p.power_w, most_w)) * t.epoch_s
        sds = self.relative_sds(t, p)
        t_rel, p_rel, e_rel = (self._total_rel_sd(sds[o], o) for o in ("time", "power", "energy"))
        outside = (np.zeros((len(modes), len(MODE_FIELDS)), dtype=bool) if distances is None
                   else np.column_stack([distances[k] > OUTSIDE_TOLERANCE_LN for k in MODE_FIELDS]))
        t_half, p_half, e_half = (np.minimum(z * r, MAX_LOG_HALF_WIDTH) for r in (t_rel, p_rel, e_rel))
        # No mode beats its FLOPs at FP32 peak or idles below its base power's bound.
        gpu_s = self.flops_floor * 1000.0 / modes.gpu_throughput_mhz  # the "gpu" time feature
        time_low = np.maximum(t.epoch_s * np.exp(-t_half), np.minimum(gpu_s, t.epoch_s))
        time_low, time_high = self._within_physics(modes, z, time_low, t.epoch_s * np.exp(t_half), t.epoch_s)
        idle_w = np.minimum(p.base_w * np.exp(-z * self.base_sd_rel), power)
        return Prediction(
            epoch_time_s=t.epoch_s, epoch_time_s_low=time_low, epoch_time_s_high=time_high, stall_time_s=t.stall_s,
            compute_time_s=t.compute_s, avg_power_w=power, avg_power_w_low=np.maximum(power * np.exp(-p_half), idle_w),
            avg_power_w_high=np.minimum(power * np.exp(p_half), most_w), base_power_w=np.minimum(p.base_w, power),
            epoch_energy_j=energy, epoch_energy_j_low=np.maximum(energy * np.exp(-e_half), idle_w * time_low),
            epoch_energy_j_high=np.maximum(np.minimum(energy * np.exp(e_half), most_w * time_high), energy),
            outside=outside, confidence=float(confidence), cross_device=self.cross_device,
            power_source="workload" if self.has_power else "reference")

    def _total_rel_sd(self, sd: tuple[np.ndarray, np.ndarray], output: str) -> np.ndarray:
        """An output's relative SD from :meth:`relative_sds`' pair: the model's own part times its calibrated
        scale, the rest, and a cross-device model's transfer SD (energy carries time's and power's)."""
        s = getattr(self.interval_scales.in_regime(), output)
        cross = self.cross_device_rel_sd if self.cross_device else 0.0
        return np.sqrt((s * sd[0]) ** 2 + sd[1] ** 2 + (2 if output == "energy" else 1) * cross ** 2)

    def _within_physics(self, modes: ModeArrays, z: float, low: np.ndarray, high: np.ndarray,
                        epoch_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Epoch-time bounds (s) that keep physics outside the profiled ranges: more cores and faster clocks
        never slow an epoch, so a mode's lower bound is at least that of the mode with each knob below the
        profiled ranges raised into them, and its upper bound at most that of the mode with each knob above
        them lowered into them (a symmetric extrapolation SD alone would let the slowest GPU clock beat the
        fastest). The point stays inside. ``low`` and ``high`` are changed in place."""
        if not self.profiled_ranges:
            return low, high
        for raise_low in (True, False):
            projected, moved = F.projected_into(modes, self.profiled_ranges, raise_low)
            if not moved.any():
                continue
            projected = projected.take(moved)
            t = self._time(projected, self._knob_distances(projected))
            half = np.minimum(z * self._total_rel_sd(self._time_sds(t), "time"), MAX_LOG_HALF_WIDTH)
            if raise_low:
                low[moved] = np.minimum(np.maximum(low[moved], t.epoch_s * np.exp(-half)), epoch_s[moved])
            else:
                high[moved] = np.maximum(np.minimum(high[moved], t.epoch_s * np.exp(half)), epoch_s[moved])
        return low, high

    def _time_sds(self, t: _TimeParts) -> tuple[np.ndarray, np.ndarray]:
        """Time's pair of :meth:`relative_sds`: (the model's own, run-to-run noise and extrapolation)."""
        ex = EXTRAPOLATION_REL_SD["time"] * self.interval_scales.extrapolation
        return t.rel_sd_model, np.hypot(t.rel_sd_noise, ex * t.extrapolation)

    @property
    def flops_floor(self) -> float:
        """:attr:`rows_gpu_floor` (s x GHz) at this device's FP32 peak."""
        src = load_device(self.source_device_id) if self.source_device_id else self.device
        return self.rows_gpu_floor * float(src.peak_fp32_flops(1.0) / self.device.peak_fp32_flops(1.0))

    def parts(self, modes: ModeArrays) -> tuple[_TimeParts, _PowerParts, dict[str, np.ndarray] | None]:
        """The time and power of ``modes`` (in this model's device range) before intervals, and each mode's
        distances (ln) outside the profiled knob ranges (None without profiled ranges)."""
        distances = self._knob_distances(modes)
        t = self._time(modes, distances)
        busy = t.compute_s / np.maximum(t.epoch_s, 1e-12)
        return t, self._power(modes, busy, t.epoch_s, self._gpu_active(t), distances), distances

    def relative_sds(self, t: _TimeParts, p: _PowerParts) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per output (time, power, energy), the relative SD per mode (ln units) as (the model's own, which
        the calibrated interval scales multiply; the rest: run-to-run noise and extrapolation)."""
        ex = {k: v * self.interval_scales.extrapolation for k, v in EXTRAPOLATION_REL_SD.items()}
        # Without its own readings a workload's level of dynamic power is unknown (ln SD, first order); the
        # interval scales were calibrated on rows that measured power, so they do not shrink it.
        level = 0.0 if self.has_power else UNMEASURED_POWER_LEVEL_SD * (p.power_w - p.base_w) / p.power_w
        # Power drawn per minibatch follows the progress rate, so it extrapolates as badly as the time does.
        p_rest = np.sqrt(p.rel_sd_noise ** 2 + (ex["power"] * p.extrapolation) ** 2
                         + (ex["time"] * p.rate_share * t.extrapolation) ** 2 + level ** 2)
        # A run slower by chance draws its per-minibatch power at a lower rate: that share of the time noise
        # cancels in energy.
        e_rest = np.sqrt((t.rel_sd_noise * (1.0 - p.rate_share)) ** 2 + p.rel_sd_noise ** 2
                         + ex["energy"] ** 2 * (t.extrapolation ** 2 + p.extrapolation ** 2) + level ** 2)
        # The time error moves the rate-driven power the other way: added to power, it cancels in energy.
        return {"time": self._time_sds(t),
                "power": (np.hypot(p.rel_sd_model, p.rate_share * t.rel_sd_model), p_rest),
                "energy": (np.hypot(t.rel_sd_model * (1.0 - p.rate_share), p.rel_sd_model), e_rest)}

    def _knob_distances(self, modes: ModeArrays) -> dict[str, np.ndarray] | None:
        return None if not self.profiled_ranges else F.extrapolation_distances(modes, self.profiled_ranges)

    def _time(self, modes: ModeArrays, distances: Mapping[str, np.ndarray] | None = None) -> _TimeParts:
        """Per-component and epoch time (s) over the contention variants (see ``contention_measured``), with
        relative SDs."""
        central = F.time_features(modes, self.num_workers, self.kappa_cpu, self.kappa_pipe)
        top_cpu = 1000.0 / self.maxima["cpu_mhz"]
        gpu_side = "compute" if "compute" in self.time_fits else "total"
        var = 0.0
        total = 0.0
        for fit in self.time_fits.values():
            mean, sd = fit.predict(central)
            total = total + mean
            var = var + sd ** 2
        compute, stall = split_compute(self.time_fits, central)
        # GPU idle time: the main thread's work beyond its length at the top CPU clock.
        waits = [self.time_fits[gpu_side].coef_of("cpu") * np.maximum(central["cpu"] - top_cpu, 0.0)]
        totals, computes, stalls = [total], [compute], [stall]
        # Constants borrowed from the reference: model averaging over their plausible range (flat weights).
        # Constants the rows measured: the fit at them is the estimate. Either way the variants' spread
        # about their mean is a 90% range of the model form [E5].
        for v in self.variants:
            feats = F.with_contention(central, modes, self.num_workers, v.kappa_cpu, v.kappa_pipe)
            totals.append(sum(fit.mean(feats) for fit in v.fits.values()))
            if not self.contention_measured:
                c, s = split_compute(v.fits, feats)
                computes.append(c)
                stalls.append(s)
                waits.append(v.fits[gpu_side].coef_of("cpu") * np.maximum(feats["cpu"] - top_cpu, 0.0))
        by_variant = np.array(totals)
        mean_of_variants = by_variant.mean(axis=0)
        epoch_s = total if self.contention_measured else mean_of_variants
        compute, stall, gpu_wait = (np.mean(parts, axis=0) for parts in (computes, stalls, waits))
        spread = np.max(np.abs(by_variant - mean_of_variants), axis=0) / KAPPA_FACTORS_Z
        rel_sd_model = np.sqrt(var + spread ** 2) / np.maximum(epoch_s, 1e-12)
        noise = max(INTERVAL_NOISE_FLOOR, *(f.noise_rel for f in self.time_fits.values()))
        return _TimeParts(
            epoch_s=epoch_s, compute_s=compute, stall_s=stall, gpu_wait_s=gpu_wait, rel_sd_model=rel_sd_model,
            rel_sd_noise=noise,
            extrapolation=self._extrapolation(central, distances, epoch_s))

    def _extrapolation(self, feats: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray] | None,
                       epoch_s: np.ndarray) -> np.ndarray:
        """Extrapolation units of epoch time per mode (0 inside the profiled ranges): see
        :func:`features.extrapolation_units`."""
        if d is None:
            return np.zeros_like(epoch_s)
        coef = F.total_coefs({n: f.coef for n, f in self.time_fits.items()})
        return F.extrapolation_units(dict(zip(F.TOTAL_TERMS, coef, strict=True)), feats, d, epoch_s)

    def aliased_knobs(self) -> dict[str, str]:
        """Knobs whose effect the profiled modes do not separate: ``{knob: why}`` for a knob with one
        profiled value ("not varied") or one whose values always moved with another knob's across the
        profiled modes (the fit cannot tell their effects apart; their split is the prior's)."""
        return {k: "not varied" if other is None else f"moves with {other}"
                for k, other in self._alias_partners().items()}

    def aliased_pairs(self) -> list[tuple[str, str]]:
        """Each knob of :meth:`aliased_knobs` that moves with another, with that knob, once per pair."""
        pairs: list[tuple[str, str]] = []
        for knob, other in self._alias_partners().items():
            if other is not None and (other, knob) not in pairs:
                pairs.append((knob, other))
        return pairs

    def _alias_partners(self) -> dict[str, str | None]:
        """``{knob: the first knob it moves with, or None when it was not varied}`` over the profiled modes."""
        # One tuple per row into a set: a 100,000-row workload is fitted on every upload.
        settings = {tuple(map(r.get, MODE_FIELDS)) for r in self.training_rows}
        settings = [s for s in settings if None not in s]
        if not settings:
            return {}
        knobs = np.unique(np.log(np.array(settings, dtype=float)), axis=0)
        varied = [i for i, k in enumerate(MODE_FIELDS) if np.ptp(knobs[:, i]) > OUTSIDE_TOLERANCE_LN]
        out: dict[str, str | None] = {k: None for i, k in enumerate(MODE_FIELDS) if i not in varied}
        for a, i in enumerate(varied):
            for j in varied[a + 1:]:
                if abs(np.corrcoef(knobs[:, i], knobs[:, j])[0, 1]) > 0.999:
                    out.setdefault(MODE_FIELDS[i], MODE_FIELDS[j])
                    out.setdefault(MODE_FIELDS[j], MODE_FIELDS[i])
        return out

    def extrapolation_widening(self, modes: ModeArrays, confidence: float = DEFAULT_CONFIDENCE) -> np.ndarray:
        """Per mode, how many times wider (in ln units) the time interval is than it would be inside the
        profiled ranges: 1 inside them, mostly > 1 where a knob lies outside (``EXTRAPOLATION_REL_SD``), and
        below 1 where :meth:`_within_physics` bounds the interval tighter than the profiled ranges' own."""
        inside = replace(self, profiled_ranges=None).predict(modes, confidence)
        p = self.predict(modes, confidence)
        return np.log(p.epoch_time_s_high / p.epoch_time_s_low) / np.log(inside.epoch_time_s_high
                                                                           / inside.epoch_time_s_low)

    @cached_property
    def anchor_time_s(self) -> float:
        """Predicted epoch time (s) at the device's fastest preset: the reference for progress rates."""
        return float(self._time(ModeArrays(*self.device.maxn.knobs())).epoch_s[0])

    @staticmethod
    def _gpu_active(t: _TimeParts) -> np.ndarray:
        """Share of the epoch the GPU runs kernels: the compute time less the GPU's wait on a main thread
        slower (or more contended) than at the top CPU clock."""
        return np.maximum(t.compute_s - t.gpu_wait_s, 0.0) / np.maximum(t.epoch_s, 1e-12)

    def _power(self, modes: ModeArrays, gpu_busy: np.ndarray, epoch_s: np.ndarray, gpu_active: np.ndarray,
               distances: Mapping[str, np.ndarray] | None) -> _PowerParts:
        bfeats = F.base_features(modes, self.maxima)
        base_parts = {t: self.base_ratio * c * bfeats[t] for t, c in zip(F.BASE_TERMS, self.base_coef, strict=True)}
        base = sum(base_parts.values())
        rate = self.anchor_time_s / np.maximum(epoch_s, 1e-12)
        pfeats = F.power_features(modes, self.num_workers, gpu_busy, self.maxima, rate, gpu_active)
        dyn, dyn_sd = self.power_fit.predict(pfeats)
        dyn = np.maximum(dyn, 0.0)
        power = base + dyn
        model_sd = np.sqrt(dyn_sd ** 2 + (self.base_sd_rel * base) ** 2) / power
        # Extrapolated power: each domain's share (dynamic and idle) times its knob's distance (cores go
        # with the CPU).
        extrapolation = np.zeros_like(power)
        if distances is not None:
            share = {t: (np.maximum(c * pfeats[t], 0.0)
                         + sum(np.abs(b) for u, b in base_parts.items() if F.BASE_DOMAINS[u] == t)) / power
                     for t, c in zip(self.power_fit.terms, self.power_fit.coef, strict=True)}
            extrapolation = np.sqrt((share["gpu"] * distances["gpu_mhz"]) ** 2
                                    + (share["emc"] * distances["emc_mhz"]) ** 2
                                    + (share["cpu"] * np.maximum(distances["cpu_mhz"], distances["cpu_cores"])) ** 2)
        rated = sum(np.maximum(c * pfeats[t], 0.0) for t, c in zip(self.power_fit.terms, self.power_fit.coef,
                                                                  strict=True) if t in F.RATE_POWER_TERMS)
        return _PowerParts(power_w=power, base_w=base, rel_sd_model=model_sd,
                           rel_sd_noise=np.maximum(max(POWER_NOISE_FLOOR, self.power_fit.noise_rel),
                                                   POWER_NOISE_FLOOR_W / power),
                           extrapolation=extrapolation, rate_share=rated / power)


# -- fitting ----------------------------------------------------------------------------------------------
def fit_with_reference(rows: pd.DataFrame, reference: DeviceReference | pd.DataFrame,
                       device: Device | None = None, power_from: DeviceReference | None = None) -> WorkloadModel:
    """Fit one workload's profile rows (one device) with ``reference`` as prior.

    ``reference``: a fitted :class:`DeviceReference` of the rows' device, or reference sweeps (profile
    rows of other workloads on that device). The bundled default is resolved by
    :func:`jetpredict.predictor.bundled.fit_workload`; ``power_from`` lends sweeps without power readings
    its power model (:func:`~.reference.build_reference`). Raises InputError for mixed devices/workloads,
    ``host`` rows, unknown devices or unusable rows.
    """
    dev, workload = check_rows(rows, device)
    given = ProfileArrays.from_frame(rows)
    data = given.merged_repeats(frame_column(rows, "batch_size"))
    # Sweeps given as rows never lend the rows' own workload's sweep as a look-alike [E8].
    ref = (build_reference(without_own_sweep(reference, workload, source_of(rows)), dev.id, power_from)
           if isinstance(reference, pd.DataFrame) else reference)
    if ref.device_id != dev.id:
        raise InputError(f"reference sweeps are of device {ref.device_id!r}, rows of {dev.id!r}", "reference")
    floor = gpu_floor(data, dev)
    # A row's weight is its measurement noise, not how well the model fits the reference's own sweeps,
    # with which the prior outweighed the rows [E1].
    time_noise = min(ref.time_noise_rel, TIME_NOISE_REL)
    weights = regime_weights(data, ref)
    kappa = contention_for(ref, source_of(rows))
    if kappa == ref.kappas:
        kappa = regime_kappas(weights, ref)
    span = reference_span(data, ref)
    borrowed, kappa = kappa, own_contention(data, kappa, span)
    physics_one = data.distinct_modes() >= 2
    prior = regime_prior(data, ref, weights)
    time_fits = fit_time(data, kappa, time_noise, prior, floor, physics_one)
    variants = []
    if len(np.unique(data.modes.cpu_cores)) > 1:
        # The core-count contrast measures CPU work x (contention - 1): a contention constant off by a
        # factor rescales the CPU share. Refit under the ends of the plausible range of the constants [E5].
        for factor in KAPPA_FACTORS:
            kappas = (kappa[0] * factor, kappa[1] * factor)
            variants.append(ContentionVariant(*kappas, fit_time(data, kappas, time_noise, prior, floor,
                                                                physics_one)))
    model = WorkloadModel(
        device=dev, workload_id=workload, reference_source=ref.source, profiled_modes=data.distinct_modes(),
        interval_scales=interval_scales_for(data.distinct_modes()), has_power=False,
        num_workers=float(np.median(data.num_workers)), kappa_cpu=kappa[0], kappa_pipe=kappa[1],
        time_fits=time_fits, base_coef=np.asarray(ref.base_coef, dtype=float),
        base_ratio=1.0, base_sd_rel=ref.base_noise_rel * UNMEASURED_POWER_SD_FACTOR,
        power_fit=TermFit(F.POWER_TERMS, np.asarray(ref.power_mean, dtype=float), np.diag(ref.power_sd ** 2),
                          POWER_NOISE_REL * UNMEASURED_POWER_SD_FACTOR),
        maxima=dict(ref.maxima), variants=tuple(variants), contention_measured=kappa != borrowed,
        profiled_ranges=data.profiled_ranges(),
        complexity=complexity_of(rows), rows_gpu_floor=floor,
        training_rows=tuple(frame_records(rows.assign(num_workers=given.num_workers))),
    )
    coefs = {n: f.coef for n, f in model.time_fits.items()}
    factor = regime_factor(*regime_evidence(coefs, (model.kappa_cpu, model.kappa_pipe), data, span))
    model = replace(model, interval_scales=replace(model.interval_scales, extrapolation=factor))
    return _with_power(model, data, ref)


def base_log_ratios(rows: ProfileArrays, base_coef: np.ndarray, maxima: Mapping[str, float]) -> np.ndarray:
    """ln(measured base power / the base model's) for the rows that measured ``base_power_w``."""
    ok = ~np.isnan(rows.base_power_w)
    base_model = F.design(F.base_features(rows.modes.take(ok), maxima), F.BASE_TERMS) @ base_coef
    return np.log(rows.base_power_w[ok] / base_model)


def shrunk_base_ratio(log_ratios: np.ndarray) -> float:
    """The workload's base-power ratio: the mean log ratio shrunk toward 1 as if
    :data:`BASE_RATIO_PRIOR_ROWS` more rows read the base model exactly (the base is mostly a device
    property); 1 when no row measured base power."""
    return float(np.exp(log_ratios.sum() / (len(log_ratios) + BASE_RATIO_PRIOR_ROWS)))


def _with_power(model: WorkloadModel, rows: ProfileArrays, ref: DeviceReference) -> WorkloadModel:
    """``model`` with its base ratio and dynamic power fitted from rows that measured power."""
    power = rows.power_w()
    base_ref = F.design(F.base_features(rows.modes, model.maxima), F.BASE_TERMS) @ model.base_coef
    log_ratio = base_log_ratios(rows, model.base_coef, model.maxima)
    if len(log_ratio):
        ratio = shrunk_base_ratio(log_ratio)
        sd = float(np.sqrt((ref.base_noise_rel ** 2 * BASE_NOISE_PRIOR_ROWS + np.sum((log_ratio - np.log(ratio)) ** 2))
                           / (len(log_ratio) + BASE_NOISE_PRIOR_ROWS)))
        model = replace(model, base_ratio=ratio, base_sd_rel=sd)
    has = ~np.isnan(power)
    if not has.any():
        return model
    sub = rows.modes.take(has)
    t = model._time(sub)
    busy = t.compute_s / t.epoch_s
    base = model.base_ratio * base_ref[has]
    rate = model.anchor_time_s / t.epoch_s
    x = F.design(F.power_features(sub, rows.num_workers[has], busy, model.maxima, rate, model._gpu_active(t)),
                 F.POWER_TERMS)
    dyn = power[has] - base
    # The reference's power split is a prior at the rows' level of dynamic power (as the time prior is
    # scaled to the rows' epoch), as wide as real workloads differ, so measured rows can move the split [E7].
    level = float(np.sum(np.maximum(dyn, 0.0)) / max(float(np.sum(x @ ref.power_mean)), 1e-12))
    level = float(np.clip(level, POWER_LEVEL_RANGE[0], POWER_LEVEL_RANGE[1]))
    sd = np.maximum(level * ref.power_sd, POWER_SD_SHARE * max(float(np.mean(dyn)), 0.0))
    power_fit = fit_terms(x, dyn, power[has], F.POWER_TERMS, level * ref.power_mean, sd,
                          noise_rel=ref.power_noise_rel)
    return replace(model, has_power=True, power_fit=power_fit)
