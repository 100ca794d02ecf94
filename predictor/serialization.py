"""Fitted state as plain JSON data: :class:`WorkloadModel` and :class:`DeviceReference` to and from dicts.

Loading builds the values field by field from numbers, strings and lists, checking every name, shape
and number on the way: nothing in a file is executed or imported, and a malformed document raises
:class:`InputError` naming the field. Schema versions: :data:`MODEL_SCHEMA`, :data:`REFERENCE_SCHEMA`
(a document of another version is refused with a message saying how to refit).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
from jetpredict.models.catalogue import MODE_FIELDS, Device, ModeArrays, load_device
from jetpredict.models.errors import InputError, UnknownDeviceError
from jetpredict.models.jsonsafe import json_safe
from jetpredict.models.numbers import json_finite_float
from jetpredict.models.profile_rows import known_source
from jetpredict.predictor import features as F
from jetpredict.predictor.complexity import gpu_floor
from jetpredict.predictor.constants import REGIME_FACTOR_MAX, SCALE_GRID, IntervalScales
from jetpredict.predictor.model import (
    DEFAULT_CONFIDENCE,
    MODEL_VERSION,
    ContentionVariant,
    WorkloadModel,
    base_log_ratios,
    shrunk_base_ratio,
)
from jetpredict.predictor.provenance import SOURCE_TRUST
from jetpredict.predictor.reference import DeviceReference
from jetpredict.predictor.terms import (
    MAX_EPOCH_TIME_S,
    ProfileArrays,
    ShapePrior,
    TermFit,
)
from jetpredict.predictor.transfer import TRANSFER_METHODS

MODEL_SCHEMA = "jetpredict-model/3"
REFERENCE_SCHEMA = "jetpredict-reference/3"
#: Every term name a fit may use (time and power).
KNOWN_TERMS = frozenset(F.TOTAL_TERMS) | frozenset(F.POWER_TERMS)
#: Profile rows a model file may hold (``training_rows``); :func:`model_to_dict` refuses a model with more,
#: so that no file is written that :func:`model_from_dict` refuses.
MAX_TRAINING_ROWS = 100_000
#: Knob maxima (cores, MHz) a file may hold: every knob is divided by its maximum.
MIN_MAXIMUM, MAX_MAXIMUM = 1e-3, 1e6
#: Interval scales a file may hold: what the calibration can pick (a 0 would drop the model's own SD).
MIN_SCALE, MAX_SCALE = float(SCALE_GRID.min()), float(SCALE_GRID.max())
#: The out-of-regime factor a fit writes (``regime.regime_factor``), in 1..REGIME_FACTOR_MAX.
MIN_EXTRAPOLATION_SCALE = 1.0
#: Model forms a file may record: ``mech-N`` up to this version's :data:`MODEL_VERSION` (it is reported in
#: every answer's provenance, so made-up text would be passed on as the model's form).
_VERSION_PREFIX, _, _VERSION_NUMBER = MODEL_VERSION.rpartition("-")
#: The model form that first reads a row of a preset gating part of the GPU as such (``Preset.gpu_share``).
GATED_PRESETS_SINCE = 16
MODEL_VERSION_RE = re.compile(rf"{re.escape(_VERSION_PREFIX)}-([1-9][0-9]{{0,5}})")
#: Rounding a fitted covariance may carry: asymmetry (share of its largest entry) and correlation beyond 1.
COV_ROUNDING = 1e-9
#: Relative rounding a base-power ratio may carry against the one its training rows give (JSON keeps 17
#: digits; the sum of logs may round differently on another machine).
BASE_RATIO_ROUNDING = 1e-9
#: About this many modes of the device's space are predicted when a model file is loaded.
PROBE_MODES = 256


# -- writing ----------------------------------------------------------------------------------------------
def _fit_doc(fit: TermFit) -> dict[str, Any]:
    return {"terms": list(fit.terms), "coef": json_safe(fit.coef), "cov": json_safe(fit.cov), "noise_rel": fit.noise_rel}


def model_to_dict(model: WorkloadModel) -> dict[str, Any]:
    """The JSON document of a fitted workload model; InputError for a model that :func:`model_from_dict`
    would refuse to read back (so ``save_model`` never writes a file ``load_model`` refuses)."""
    n = len(model.training_rows)
    if n > MAX_TRAINING_ROWS:
        # Checked before any copying: the rows are most of the document (~500 bytes each).
        raise InputError(f"the model holds {n:,} training_rows; a model file holds at most {MAX_TRAINING_ROWS:,} "
                         f"(MAX_TRAINING_ROWS): merge repeated rows of the same mode (the fit averages them anyway) "
                         f"or profile fewer rows, then fit again; no model file was written", "training_rows")
    doc = _model_doc(model)
    try:
        model_from_dict(doc, "model")
    except InputError as exc:
        raise InputError(f"the fitted model cannot be read back: {exc.message}; no model file was written",
                         exc.field) from None
    return doc


def _model_doc(model: WorkloadModel) -> dict[str, Any]:
    return json_safe({
        "schema": MODEL_SCHEMA, "model_version": model.model_version, "device": model.device_id,
        "workload_id": model.workload_id, "reference_source": model.reference_source,
        "profiled_modes": model.profiled_modes, "has_power": model.has_power, "num_workers": model.num_workers,
        "kappa_cpu": model.kappa_cpu, "kappa_pipe": model.kappa_pipe, "contention_measured": model.contention_measured,
        "time_fits": {n: _fit_doc(f) for n, f in model.time_fits.items()},
        "variants": [{"kappa_cpu": v.kappa_cpu, "kappa_pipe": v.kappa_pipe,
                      "fits": {n: _fit_doc(f) for n, f in v.fits.items()}} for v in model.variants],
        "base_coef": model.base_coef, "base_ratio": model.base_ratio, "base_sd_rel": model.base_sd_rel,
        "power_fit": _fit_doc(model.power_fit), "maxima": dict(model.maxima),
        "interval_scales": {"time": model.interval_scales.time, "power": model.interval_scales.power,
                            "energy": model.interval_scales.energy,
                            "extrapolation": model.interval_scales.extrapolation},
        "profiled_ranges": None if model.profiled_ranges is None else
        {k: list(v) for k, v in model.profiled_ranges.items()},
        "cross_device": model.cross_device, "source_device_id": model.source_device_id,
        "cross_device_rel_sd": model.cross_device_rel_sd, "transfer_method": model.transfer_method,
        "complexity": dict(model.complexity), "training_rows": [dict(r) for r in model.training_rows],
    })


def reference_to_dict(ref: DeviceReference) -> dict[str, Any]:
    """The JSON document of a device reference (nested ``transfer`` sweeps included)."""
    return json_safe({
        "schema": REFERENCE_SCHEMA, "device": ref.device_id, "source": ref.source, "workloads": list(ref.workloads),
        "kappa_cpu": ref.kappa_cpu, "kappa_pipe": ref.kappa_pipe,
        "shape": {"mean": dict(ref.shape.mean), "sd": dict(ref.shape.sd)},
        "workload_shapes": {w: dict(c) for w, c in ref.workload_shapes.items()},
        "time_noise_rel": ref.time_noise_rel, "base_coef": ref.base_coef, "base_noise_rel": ref.base_noise_rel,
        "power_mean": ref.power_mean, "power_sd": ref.power_sd, "power_noise_rel": ref.power_noise_rel,
        "maxima": dict(ref.maxima), "anchor": list(ref.anchor), "derived_from": ref.derived_from,
        "training_sha256": ref.training_sha256, "workload_anchor_s": dict(ref.workload_anchor_s),
        "workload_kappas": {w: list(k) for w, k in ref.workload_kappas.items()},
        "transfer": None if ref.transfer is None else reference_to_dict(ref.transfer),
    })


# -- reading ----------------------------------------------------------------------------------------------
def _shape_text(shape: tuple[int, ...] | None) -> str:
    """What an array field must be: ``a list of 2 finite numbers``, ``a 3x4 array of finite numbers``, or
    ``a list of finite numbers`` (any length)."""
    if not shape:
        return "a list of finite numbers"
    return (f"a list of {shape[0]} finite numbers" if len(shape) == 1
            else f"a {'x'.join(map(str, shape))} array of finite numbers")


class _Reader:
    """Typed access to one JSON object; every failure is an InputError naming ``where.key``."""

    def __init__(self, doc: object, where: str) -> None:
        if not isinstance(doc, dict):
            raise InputError(f"{where} must be a JSON object", "model")
        self.doc, self.where = doc, where

    def fail(self, key: str, rule: str) -> InputError:
        return InputError(f"{self.where}.{key} {rule}", "model")

    def get(self, key: str) -> object:
        if key not in self.doc:
            raise self.fail(key, "is missing")
        return self.doc[key]

    def number(self, key: str, minimum: float | None = None) -> float:
        """``key``'s value as a finite float, at least ``minimum`` when given."""
        v = json_finite_float(self.get(key))
        if v is None or (minimum is not None and v < minimum):
            raise self.fail(key, "must be a finite number" + (f" >= {minimum:g}" if minimum is not None else ""))
        return v

    def integer(self, key: str) -> int:
        v = self.number(key, 0)
        if v != int(v):
            raise self.fail(key, "must be a whole number")
        return int(v)

    def boolean(self, key: str, default: bool | None = None) -> bool:
        """``key``'s true or false; ``default`` when given and the key is absent (a field newer files add)."""
        if default is not None and key not in self.doc:
            return default
        v = self.get(key)
        if not isinstance(v, bool):
            raise self.fail(key, "must be true or false")
        return v

    def text(self, key: str, optional: bool = False) -> str | None:
        v = self.get(key) if not optional else self.doc.get(key)
        if v is None and optional:
            return None
        if not isinstance(v, str) or len(v) > 1000:
            raise self.fail(key, "must be a string (at most 1000 characters)")
        return v

    def array(self, key: str, shape: tuple[int, ...] | None = None, value: object = None,
              nonnegative: str | None = None) -> np.ndarray:
        """``nonnegative``: what the numbers are, where each must be >= 0 (as a fit writes them)."""
        raw = self.get(key) if value is None else value
        try:
            a = np.asarray(raw, dtype=float)
        except (TypeError, ValueError):
            raise self.fail(key, "must be a list of numbers") from None
        except OverflowError:  # a JSON integer beyond float range (10**400)
            raise self.fail(key, "must be a list of finite numbers") from None
        if a.ndim == 0 or not np.all(np.isfinite(a)) or (shape is not None and a.shape != shape):
            raise self.fail(key, f"must be {_shape_text(shape)}")
        if nonnegative and np.any(a < 0):
            raise self.fail(key, f"must hold {nonnegative} >= 0")
        return a

    def obj(self, key: str) -> _Reader:
        return _Reader(self.get(key), f"{self.where}.{key}")

    def mapping(self, key: str) -> dict:
        v = self.get(key)
        if not isinstance(v, dict):
            raise self.fail(key, "must be a JSON object")
        return v


def _check_schema(doc: object, schema: str, what: str) -> _Reader:
    r = _Reader(doc, what)
    found = r.doc.get("schema")
    if found != schema:
        raise InputError(f"{what} has schema {found!r}, this jetpredict reads {schema!r}: refit it with "
                         f"`jetpredict fit --device DEVICE --profiles ROWS.csv --out MODEL.json`", "model")
    return r


def _fit(doc: object, where: str, allowed: tuple[str, ...] | None = None) -> TermFit:
    r = _Reader(doc, where)
    terms = r.get("terms")
    if not isinstance(terms, list) or not terms or not all(isinstance(t, str) and t in KNOWN_TERMS for t in terms) \
            or len(set(terms)) != len(terms) or (allowed is not None and tuple(terms) != allowed):
        raise r.fail("terms", f"must be the term names {list(allowed) if allowed else sorted(KNOWN_TERMS)}")
    p = len(terms)
    # A fit's terms each add time or power (non-negative least squares).
    coef = r.array("coef", (p,), nonnegative="coefficients")
    return TermFit(tuple(terms), coef, _covariance(r, p), r.number("noise_rel", 0))


def _covariance(r: _Reader, p: int) -> np.ndarray:
    """``cov``, a p x p covariance (coefficient units squared) as a fit writes it: symmetric, a variance
    >= 0 on the diagonal and no correlation beyond 1 (each up to :data:`COV_ROUNDING`). ``TermFit.predict``
    clips a negative variance to 0, so a broken matrix would narrow intervals instead of failing."""
    cov = r.array("cov", (p, p))
    scale = float(np.max(np.abs(cov)))
    if np.any(np.diag(cov) < 0):
        raise r.fail("cov", "must have a diagonal of variances >= 0")
    if np.max(np.abs(cov - cov.T)) > COV_ROUNDING * scale:
        raise r.fail("cov", "must be symmetric")
    sd = np.sqrt(np.diag(cov))
    off = ~np.eye(p, dtype=bool)
    if np.any((np.abs(cov) > np.outer(sd, sd) * (1 + COV_ROUNDING) + COV_ROUNDING * scale) & off):
        raise r.fail("cov", "must have |cov[i][j]| <= sqrt(cov[i][i] * cov[j][j]) (a correlation within -1..1)")
    return cov


def _component_fits(doc: object, where: str) -> dict[str, TermFit]:
    if not isinstance(doc, dict) or not doc:
        raise InputError(f"{where} must be a non-empty JSON object of component fits", "model")
    names = set(doc)
    if names not in ({"total"}, {"compute", "stall", "rest"}):
        raise InputError(f"{where} must hold either 'total' or 'compute', 'stall' and 'rest'", "model")
    return {n: _fit(doc[n], f"{where}.{n}", F.COMPONENT_TERMS[n]) for n in sorted(names)}


def _device(r: _Reader, key: str = "device"):
    device_id = r.text(key)
    try:
        return load_device(device_id)
    except UnknownDeviceError as exc:
        raise InputError(f"{r.where}.{key}: {exc.message}", "model") from None


def _maxima(r: _Reader) -> dict[str, float]:
    # Knobs are divided by their maxima: a zero (or a denormal) maximum would make every time infinite.
    m = r.obj("maxima")
    out = {k: m.number(k, MIN_MAXIMUM) for k in MODE_FIELDS}
    for k, v in out.items():
        if v > MAX_MAXIMUM:
            raise m.fail(k, f"must be at most {MAX_MAXIMUM:g} (cores or MHz)")
    return out


def _scale(r: _Reader, key: str, default: float | None = None, low: float = MIN_SCALE,
           high: float = MAX_SCALE) -> float:
    """An interval scale (a multiplier of an SD), in ``low``..``high``; ``default`` when absent."""
    if default is not None and key not in r.doc:
        return default
    v = json_finite_float(r.get(key))
    if v is None or not low <= v <= high:
        raise r.fail(key, f"must be a number in {low:g}..{high:g} (a scale of the intervals a fit writes)")
    return v


def _model_version(r: _Reader) -> tuple[str, int]:
    """``model_version`` and its number: a form this jetpredict knows (``mech-1`` .. :data:`MODEL_VERSION`)."""
    v = r.text("model_version")
    match = MODEL_VERSION_RE.fullmatch(v)
    if match is None or int(match.group(1)) > int(_VERSION_NUMBER):
        raise r.fail("model_version", f"must be {_VERSION_PREFIX}-N with N from 1 to {_VERSION_NUMBER} "
                                      f"(the model form a fit records), not {v!r}")
    return v, int(match.group(1))


def _cross_device(r: _Reader) -> tuple[bool, str | None, str | None]:
    """``cross_device`` with ``source_device_id`` and ``transfer_method``: given exactly when it is true
    (``transfer.transfer_model`` sets all three; a lone flag would widen and label answers as moved)."""
    cross = r.boolean("cross_device")
    named = {k: r.text(k, optional=True) for k in ("source_device_id", "transfer_method")}
    for key, value in named.items():
        if (value is not None) != cross:
            raise r.fail(key, f"must be {'a string' if cross else 'null'} when cross_device is {str(cross).lower()}")
    if cross and named["transfer_method"] not in TRANSFER_METHODS:
        raise r.fail("transfer_method", f"must be one of {list(TRANSFER_METHODS)}")
    return cross, named["source_device_id"], named["transfer_method"]


def _rows_device(r: _Reader, rows: tuple[dict, ...], data: ProfileArrays, source_device_id: str | None) -> Device:
    """The device the training rows ran on: the model's ``device``, or its ``source_device_id`` when it was
    moved across (``transfer.transfer_model`` keeps the source's rows). Every row must name it (a fit takes
    one device's rows; a workload of several devices has a model per device, ``workload_devices``) and hold
    knobs inside its ranges (as the fit's ``check_rows``): a relabelled model would predict another device
    from these rows as its own. The rows' workload may differ from ``workload_id``, which a caller may rename."""
    key = "device" if source_device_id is None else "source_device_id"
    device = _device(r, key)
    for i, row in enumerate(rows):
        if row.get("device") != device.id:
            raise _Reader(row, f"{r.where}.training_rows[{i}]").fail(
                "device", f"must be {device.id!r} (the model's {key}, where its rows ran), not {row.get('device')!r}")
    problems = data.modes.out_of_range(device)
    if problems:
        field, message = next(iter(problems.items()))
        raise r.fail(f"training_rows.{field}", f"must lie in the knob ranges of {device.id!r}, where the rows ran "
                                               f"(a fit there refuses others): {message}")
    return device


def _power_flags(r: _Reader, data: ProfileArrays, base_coef: np.ndarray, maxima: dict[str, float],
                 cross_device: bool) -> tuple[bool, float]:
    """``has_power`` and ``base_ratio`` as the fit sets them from the training rows (``data``, read as the fit
    reads them): power is the workload's own when a row measured ``avg_power_w`` or ``epoch_energy_j``; the
    base-power ratio (> 0) stays 1 unless a row measured ``base_power_w``, and on the device the rows ran on
    it is the one those readings and ``base_coef`` give (a moved model keeps its source's ratio beside the
    target's ``base_coef``). An edited flag would report reference power as measured (or drop the unmeasured
    level's SD), and an edited ratio scales the base power of every prediction."""
    has_power = r.boolean("has_power")
    if has_power != bool((np.isfinite(data.avg_power_w) | np.isfinite(data.epoch_energy_j)).any()):
        raise r.fail("has_power", f"must be {str(not has_power).lower()}: it says whether a training row "
                                  f"measured avg_power_w or epoch_energy_j")
    ratio = json_finite_float(r.get("base_ratio"))
    if ratio is None or ratio <= 0:
        raise r.fail("base_ratio", "must be a finite number > 0 (the workload's base power / the reference's)")
    if ratio != 1.0 and not np.isfinite(data.base_power_w).any():
        raise r.fail("base_ratio", "must be 1 when no training row measured base_power_w")
    if not cross_device:
        with np.errstate(all="ignore"):
            fitted = shrunk_base_ratio(base_log_ratios(data, base_coef, maxima))
        if not abs(ratio - fitted) <= BASE_RATIO_ROUNDING * fitted:
            raise r.fail("base_ratio", f"must be {fitted!r}, the ratio the training rows' base_power_w and "
                                       f"base_coef give")
    return has_power, ratio


def _training_rows(r: _Reader) -> tuple[dict, ...]:
    """The profile rows the model was fitted on: 1..MAX_TRAINING_ROWS flat objects of finite numbers and
    strings, each with the knobs of its mode and a ``source`` that names a provenance kind (or none)."""
    rows = r.get("training_rows")
    if not isinstance(rows, list) or not 0 < len(rows) <= MAX_TRAINING_ROWS \
            or not all(isinstance(x, dict) for x in rows):
        # Empty rows would make the workload's provenance "measured" with nothing measured.
        raise r.fail("training_rows", f"must be a list of 1 to {MAX_TRAINING_ROWS} JSON objects")
    for i, row in enumerate(rows):
        problem = _row_problem(row)
        if problem is not None:  # a reader made only to word the failure: 100,000 rows load in ~1 s
            raise _Reader(row, f"{r.where}.training_rows[{i}]").fail(*problem)
    return tuple(rows)


def _row_problem(row: dict) -> tuple[str, str] | None:
    """The first (field, rule) a training row breaks, or None."""
    for k, v in row.items():
        if v is None or isinstance(v, str | bool):
            continue
        if not isinstance(v, int | float):
            return k, "must be a string, number, boolean or null"
        if json_finite_float(v) is None:  # fitted on and summed over: 10**400 or inf measures nothing
            return k, "must be a finite number"
    for k in MODE_FIELDS:
        if not (json_finite_float(row.get(k)) or 0.0) > 0:
            return k, "must be a positive number (a knob of the profiled mode)"
    if not known_source(row.get("source")):
        return "source", f"must start with one of {', '.join(SOURCE_TRUST)} (or be null)"
    return None


def _profiled_modes(r: _Reader, data: ProfileArrays) -> int:
    """``profiled_modes``, which must be what the fit counted: the distinct modes of the training rows
    (``data``; clocks equal within ``SAME_CLOCK_REL``, as :meth:`ProfileArrays.distinct_modes`)."""
    claimed = r.integer("profiled_modes")
    distinct = data.distinct_modes()
    if claimed != distinct:
        raise r.fail("profiled_modes", f"must be the number of distinct modes in training_rows ({distinct}), "
                                       f"not {claimed}")
    return claimed


def _source(r: _Reader, key: str) -> str:
    """A provenance kind (one of :data:`SOURCE_TRUST`): what the answers report the predictions rest on."""
    v = r.text(key)
    if v not in SOURCE_TRUST:
        raise r.fail(key, f"must be one of {', '.join(SOURCE_TRUST)}")
    return v


def probe_modes(device) -> ModeArrays:
    """Modes a loaded model is tried on: the presets, every corner of the knob ranges and an even sample
    of the device's space (about :data:`PROBE_MODES` modes)."""
    space = device.modes().arrays().as_dict()
    step = max(1, len(space["cpu_cores"]) // PROBE_MODES)
    ranges = device.knob_ranges()
    corners = np.array(list(itertools.product(*(ranges[k] for k in MODE_FIELDS))), dtype=float)
    presets = ModeArrays.from_modes(device.presets)
    sample = np.column_stack([np.asarray(space[k], dtype=float)[::step] for k in MODE_FIELDS])
    knobs = np.vstack([np.column_stack(presets.arrays()), corners, sample])
    shares = np.concatenate([presets.gpu_share, np.ones(len(corners) + len(sample))])
    return ModeArrays(*knobs.T, gpu_share=shares)


def prediction_problem(model: WorkloadModel) -> str | None:
    """What is wrong with ``model``'s predictions on :func:`probe_modes`, or None when every time, power
    and energy is finite and positive with low <= point <= high."""
    try:
        with np.errstate(all="ignore"):
            pred = model.predict(probe_modes(model.device), DEFAULT_CONFIDENCE)
    except (ArithmeticError, ValueError, TypeError, IndexError, KeyError, np.linalg.LinAlgError) as exc:
        return f"it cannot predict ({type(exc).__name__}: {exc})"
    # Far beyond anything a fit of accepted rows predicts (bounds are clipped, so a forged number can stay
    # finite): epochs 1000x the longest accepted, power 10x the module's rated power.
    power_cap = 10.0 * model.device.specs.module_power_w
    ceiling = {"epoch_time_s": 1e3 * MAX_EPOCH_TIME_S, "avg_power_w": power_cap,
               "epoch_energy_j": 1e3 * MAX_EPOCH_TIME_S * power_cap}
    for point in ("epoch_time_s", "avg_power_w", "epoch_energy_j"):
        low, mid, high = (np.asarray(getattr(pred, f"{point}{end}"), dtype=float) for end in ("_low", "", "_high"))
        bad = ~(np.isfinite(low) & np.isfinite(mid) & np.isfinite(high) & (low >= 0) & (mid > 0)
                & (low <= mid * (1 + 1e-9)) & (mid <= high * (1 + 1e-9)) & (mid <= ceiling[point]))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return (f"it predicts {point} = {mid[i]:.6g} with interval {low[i]:.6g}..{high[i]:.6g} at a mode of "
                    f"{model.device_id}: not a finite, positive value inside a finite interval")
    return None


def check_predictions(model: WorkloadModel, what: str = "model") -> None:
    """InputError unless :func:`prediction_problem` finds nothing: a file whose numbers were edited (and
    its manifest recomputed) must fail here, not in ``predict`` with a traceback or infinite times."""
    problem = prediction_problem(model)
    if problem is not None:
        raise InputError(f"{what}: {problem}; the file is damaged: refit it", "model")


def model_from_dict(doc: object, what: str = "model") -> WorkloadModel:
    """A :class:`WorkloadModel` from its JSON document; InputError for any malformed part."""
    r = _check_schema(doc, MODEL_SCHEMA, what)
    variants = []
    raw_variants = r.get("variants")
    if not isinstance(raw_variants, list) or len(raw_variants) > 8:
        raise r.fail("variants", "must be a list of at most 8 contention variants")
    for i, v in enumerate(raw_variants):
        vr = _Reader(v, f"{what}.variants[{i}]")
        variants.append(ContentionVariant(vr.number("kappa_cpu", 0), vr.number("kappa_pipe", 0),
                                          _component_fits(vr.get("fits"), f"{vr.where}.fits")))
    ranges = r.get("profiled_ranges")
    profiled = None
    if ranges is not None:
        rr = r.obj("profiled_ranges")
        profiled = {}
        for k in MODE_FIELDS:
            lo, hi = rr.array(k, (2,))
            if not 0 < lo <= hi:
                raise rr.fail(k, "must be [low, high] with 0 < low <= high")
            profiled[k] = (float(lo), float(hi))
    s = r.obj("interval_scales")
    rows = _training_rows(r)
    data = ProfileArrays.from_records(rows)  # as the fit reads them
    version, number = _model_version(r)
    if number < GATED_PRESETS_SINCE and data.modes.gated.any():
        # Its checks and fitted terms read those rows as the whole GPU: refit, do not mix the two forms.
        raise r.fail("model_version", f"is {version}, fitted before presets that power part of the GPU were "
                                      f"read as such (mech-{GATED_PRESETS_SINCE}), and its training rows hold "
                                      "such a preset: refit it with `jetpredict fit` on its training rows")
    cross_device, source_device_id, transfer_method = _cross_device(r)
    rows_device = _rows_device(r, rows, data, source_device_id)  # source_device_id: None unless cross_device
    base_coef, maxima = r.array("base_coef", (len(F.BASE_TERMS),)), _maxima(r)
    has_power, base_ratio = _power_flags(r, data, base_coef,
                                         maxima, cross_device)
    complexity = r.obj("complexity")
    model = WorkloadModel(
        device=_device(r) if cross_device else rows_device, workload_id=r.text("workload_id"),
        reference_source=_source(r, "reference_source"),
        profiled_modes=_profiled_modes(r, data), has_power=has_power,
        num_workers=r.number("num_workers", 0), kappa_cpu=r.number("kappa_cpu", 0),
        kappa_pipe=r.number("kappa_pipe", 0), time_fits=_component_fits(r.get("time_fits"), f"{what}.time_fits"),
        base_coef=base_coef, base_ratio=base_ratio, base_sd_rel=r.number("base_sd_rel", 0),
        power_fit=_fit(r.get("power_fit"), f"{what}.power_fit", F.POWER_TERMS), maxima=maxima,
        variants=tuple(variants),
        # absent in models written before mech-14, which averaged over the variants
        contention_measured=r.boolean("contention_measured", default=False),
        interval_scales=IntervalScales(_scale(s, "time"), _scale(s, "power"), _scale(s, "energy"),
                                       # absent in models written before the out-of-regime factor (mech-6)
                                       _scale(s, "extrapolation", MIN_EXTRAPOLATION_SCALE,
                                              MIN_EXTRAPOLATION_SCALE, REGIME_FACTOR_MAX)),
        profiled_ranges=profiled, cross_device=cross_device, source_device_id=source_device_id,
        cross_device_rel_sd=r.number("cross_device_rel_sd", 0), transfer_method=transfer_method,
        # Numbers only (the fit writes medians of numeric columns); anything else was never read.
        complexity={str(k): complexity.number(k) for k, v in complexity.doc.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)},
        training_rows=rows, model_version=version,
        # Derived, not stored: the fit's FLOPs floor on the device its rows ran on.
        rows_gpu_floor=gpu_floor(data, rows_device),
    )
    check_predictions(model, what)
    return model


def _sds(r: _Reader, key: str, n: int) -> np.ndarray:
    """``key``, ``n`` prior SDs (coefficient units): each >= 0, as a reference writes them."""
    return r.array(key, (n,), nonnegative="standard deviations")


def reference_from_dict(doc: object, what: str = "reference") -> DeviceReference:
    """A :class:`DeviceReference` from its JSON document; InputError for any malformed part."""
    r = _check_schema(doc, REFERENCE_SCHEMA, what)
    shape = r.obj("shape")
    # The document's order, not a set's: sums over components run in it, and a set's order changes with
    # PYTHONHASHSEED (a cross-device energy bound moved 0.06% between runs through a count of draws).
    components = list(shape.mapping("mean"))
    if set(components) not in ({"total"}, {"compute", "stall", "rest", "total"}):
        raise shape.fail("mean", "must hold 'total' (and 'compute', 'stall', 'rest' when measured)")
    mean = {n: shape.obj("mean").array(n, (len(F.COMPONENT_TERMS[n]),)) for n in components}
    sd = {n: _sds(shape.obj("sd"), n, len(F.COMPONENT_TERMS[n])) for n in components}
    shapes = {}
    for w in r.mapping("workload_shapes"):
        wr = r.obj("workload_shapes").obj(w)
        names = list(wr.doc)
        if set(names) not in ({"total"}, {"compute", "stall", "rest"}):
            raise wr.fail("", "must hold 'total' or 'compute', 'stall' and 'rest'")
        shapes[str(w)] = {n: wr.array(n, (len(F.COMPONENT_TERMS[n]),)) for n in names}
    anchors = {str(w): r.obj("workload_anchor_s").number(w, 0) for w in r.mapping("workload_anchor_s")}
    # Per-workload contention constants (mech-8); documents without them pool every workload.
    kappas = {} if r.get("workload_kappas") is None else {
        str(w): tuple(float(v) for v in r.obj("workload_kappas").array(w, (2,))) for w in r.mapping("workload_kappas")}
    anchor = r.array("anchor", (4,))
    workloads = r.get("workloads")
    if not isinstance(workloads, list) or not all(isinstance(w, str) for w in workloads):
        raise r.fail("workloads", "must be a list of strings")
    nested = r.get("transfer")
    device = _device(r)
    return DeviceReference(
        device_id=device.id, source=_source(r, "source"), workloads=tuple(workloads),
        kappa_cpu=r.number("kappa_cpu", 0), kappa_pipe=r.number("kappa_pipe", 0), shape=ShapePrior(mean, sd),
        workload_shapes=shapes, time_noise_rel=r.number("time_noise_rel", 0),
        base_coef=r.array("base_coef", (len(F.BASE_TERMS),)), base_noise_rel=r.number("base_noise_rel", 0),
        power_mean=r.array("power_mean", (len(F.POWER_TERMS),)),
        power_sd=_sds(r, "power_sd", len(F.POWER_TERMS)), power_noise_rel=r.number("power_noise_rel", 0),
        maxima=_maxima(r), anchor=tuple(float(v) for v in anchor),
        derived_from=r.text("derived_from", optional=True), training_sha256=r.text("training_sha256"),
        workload_anchor_s=anchors, workload_kappas=kappas,
        transfer=None if nested is None else reference_from_dict(nested, f"{what}.transfer"),
    )
