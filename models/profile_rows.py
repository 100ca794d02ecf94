"""Profile rows: the one CSV/JSON format that the profiler writes and the predictor and service read.

One row per (device, workload, power mode); field names and units as in FIELDS below. Reading validates
every field of every row and reports *all* problems with their line numbers (CSV line numbers count the
header as line 1; JSON rows from 1, ``item N`` from 0 in a JSON file's errors). Unknown = empty cell / ``null``, never 0.

A Jetson row must also be physical on its device (:func:`implausible`): one minibatch takes at least
:data:`MIN_S_PER_MINIBATCH` s and one sample at most :data:`MAX_S_PER_SAMPLE` s, and its powers (and the
mean power its energy implies) lie in the module's range (:attr:`models.catalogue.Device.power_range_w`).
The error names the likely unit slip (milliseconds, milliwatts, millijoules).

A row the digital twin produced (:func:`from_twin`) is simulated whatever its ``source`` cell says: a blank
one is read as ``simulated``, one claiming measured or published is refused.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, below_any_module, device_ids, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.numbers import REQUIRED_AND_EMPTY, is_blank, unit_hint
from jetpredict.models.profiling_protocol import BATCH_SIZE
from jetpredict.models.reader_limits import MAX_CELL_CHARS, MAX_COLUMNS, MAX_ROWS


@dataclass(frozen=True)
class Field:
    """One column: ``kind`` is ``str``, ``int`` (count) or ``float``; ``minimum`` is exclusive if ``strict``;
    ``maximum`` (inclusive) is a physical bound far above any real value, so that a typo or an attack
    such as 1e308 is an error rather than a number that overflows later."""

    name: str
    kind: type
    required: bool
    unit: str = ""
    minimum: float | None = None
    strict: bool = False
    maximum: float | None = None


# Physical bounds (far above real values, far below overflow).
MAX_CLOCK_MHZ = 100_000.0  # 100 GHz
MAX_CORES = 1024
MAX_COUNT = 10**9  # batch size, minibatches per epoch
MAX_TIME_S = 1e8  # ~3 years for one epoch
MAX_ENERGY_J = 1e12
MAX_POWER_W = 1e5  # a Jetson module draws < 100 W; a whole host < 10 kW
#: Counts, MACs, FLOP and bytes of a network or a training step (a 1e12-parameter model: ~1e16 FLOP a sample).
MAX_QUANTITY = 1e21
MAX_RATIO = 1e6  # a coefficient of variation, a share of a peak

MAX_UNKNOWN_NAMED = 20  # unknown columns :func:`unknown_columns` names (with a close match); the rest counted
#: Same mode knobs measured more than once: times further apart than this ratio contradict each other.
DUPLICATE_TIME_SPREAD = 1.2
#: Plausible time of one minibatch on a Jetson (epoch_time_s / minibatches_per_epoch), at least, s: a
#: training step launches dozens of kernels at ~10 us each, so 0.1 ms is already a tiny network.
MIN_S_PER_MINIBATCH = 1e-4
#: Plausible time of one minibatch of the protocol's BATCH_SIZE (16) on a Jetson, at most, s: the twin's
#: slowest (MobileNetV3 at the Nano's lowest clocks) takes 19 s and the published ResNet-18 rows 0.4 s;
#: two minutes is far more likely an epoch timed in milliseconds (or a wrong minibatch count).
MAX_S_PER_MINIBATCH = 120.0
#: The bound applied, per sample (epoch_time_s / (minibatches_per_epoch x batch_size)), s: a minibatch's
#: time grows with its batch (that twin row: 150 s a minibatch of 128, 1.2 s a sample; 2.3 s at batch 1),
#: so a bound per minibatch refused large batches of slow modes.
MAX_S_PER_SAMPLE = MAX_S_PER_MINIBATCH / BATCH_SIZE
#: Cells starting with one of these are formulas to a spreadsheet (OWASP CSV injection): written with a '.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


#: The profile-row columns, in output order. Extra columns (``power_meter``, ``macs_fwd`` ...) pass through.
FIELDS: tuple[Field, ...] = (
    Field("device", str, True),
    Field("workload", str, True),
    Field("mode", str, True),
    Field("cpu_cores", int, True, "count", 1, maximum=MAX_CORES),
    Field("cpu_mhz", float, True, "MHz", 0, strict=True, maximum=MAX_CLOCK_MHZ),
    Field("gpu_mhz", float, True, "MHz", 0, strict=True, maximum=MAX_CLOCK_MHZ),
    Field("emc_mhz", float, True, "MHz", 0, strict=True, maximum=MAX_CLOCK_MHZ),
    Field("num_workers", int, False, "count", 0, maximum=MAX_CORES),
    Field("batch_size", int, True, "count", 1, maximum=MAX_COUNT),
    Field("minibatches_per_epoch", int, True, "count", 1, maximum=MAX_COUNT),
    Field("epoch_time_s", float, True, "s", 0, strict=True, maximum=MAX_TIME_S),
    Field("stall_time_s", float, False, "s", 0, maximum=MAX_TIME_S),
    Field("compute_time_s", float, False, "s", 0, maximum=MAX_TIME_S),
    Field("epoch_energy_j", float, False, "J", 0, strict=True, maximum=MAX_ENERGY_J),
    Field("avg_power_w", float, False, "W", 0, strict=True, maximum=MAX_POWER_W),
    Field("base_power_w", float, False, "W", 0, strict=True, maximum=MAX_POWER_W),
    Field("source", str, False),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}
COLUMNS: tuple[str, ...] = tuple(f.name for f in FIELDS)

#: Pass-through columns: the extra columns the profiler writes beside FIELDS (see
#: ``profiler/runner.py`` and ``profiler/complexity.py``), with their units. An upload
#: (``POST /v1/profiles``, inline rows) may carry these and they are stored (numbers checked); any other
#: column is rejected (:func:`unknown_columns`), so a misspelt ``epoch_tme_s`` is not stored silently. Each
#: is documented ``UNIT: meaning``; a number column's unit gives its rule (:data:`PASS_THROUGH_NUMBERS`).
PASS_THROUGH_COLUMNS: dict[str, str] = {
    "power_meter": "text: the meter that measured power, e.g. ina3221:VDD_IN, or none: <reason>",
    "power_null_reason": "text: why the power and energy cells are empty",
    "power_samples": "count: power samples inside the measured window",
    "cpu_package_energy_j": "J per epoch: CPU-package energy (RAPL on x86)",
    "cpu_package_null_reason": "text: why the cpu_package_energy_j cell is empty",
    **{f"mb_{part}_s_{stat}": f"s: {stat} time per minibatch of the {part} component"
       for part in ("total", "stall", "compute") for stat in ("mean", "median", "p95")},
    **{f"mb_{part}_cv": f"ratio: coefficient of variation of the minibatch {part} time"
       for part in ("total", "stall", "compute")},
    "macs_fwd": "MAC per sample: multiply-accumulates of one forward pass",
    "params": "count: trainable parameters",
    "flops_train": "FLOP per sample: floating-point operations of one training step",
    "param_bytes": "B: bytes of the parameters",
    "activation_bytes": "B per sample: leaf-module outputs of one forward pass",
    "leaf_modules": "count: leaf modules of the network",
    "kernel_count": "count: kernels launched per training step",
    "cpu_s_per_sample": "s: CPU seconds of the data pipeline per sample",
    "train_flops_per_s": "FLOP/s: flops_train x batch size / mean compute time",
    "utilisation": "ratio: train_flops_per_s / the mode's peak FP32 FLOP/s",
    "accelerator": "text: what trained (GPU name, cpu, or the twin)",
    "warmup": "count: warm-up minibatches per mode",
    "minibatches_measured": "count: measured minibatches per mode",
    "data_source": "text: synthetic, user, or folder:DIR",
    "complexity_null_reason": "text: why the complexity cells are empty",
}
#: Per unit of a number pass-through column: its kind (``count``: whole numbers) and its physical bound.
PASS_THROUGH_UNITS: dict[str, tuple[type, float]] = {
    "count": (int, MAX_QUANTITY), "MAC per sample": (float, MAX_QUANTITY),
    "FLOP per sample": (float, MAX_QUANTITY), "FLOP/s": (float, MAX_QUANTITY), "B": (float, MAX_QUANTITY),
    "B per sample": (float, MAX_QUANTITY), "s": (float, MAX_TIME_S), "J per epoch": (float, MAX_ENERGY_J),
    "ratio": (float, MAX_RATIO)}
#: The rule of each number pass-through column, checked as FIELDS are (when given: a finite number >= 0 of
#: its unit, whole for counts, at most its bound) and stated in the OpenAPI document. A new column's unit
#: must be in PASS_THROUGH_UNITS (a KeyError at import otherwise), so that no number goes unchecked.
PASS_THROUGH_NUMBERS: dict[str, Field] = {
    name: Field(name, PASS_THROUGH_UNITS[unit][0], False, unit, 0, maximum=PASS_THROUGH_UNITS[unit][1])
    for name, doc in PASS_THROUGH_COLUMNS.items() if (unit := doc.split(":")[0]) != "text"}

#: Columns that hold counts (written as whole numbers, not 2.0): the int fields and pass-through columns.
COUNT_COLUMNS: frozenset[str] = frozenset(f.name for f in (*FIELDS, *PASS_THROUGH_NUMBERS.values()) if f.kind is int)

HOST_DEVICE = "host"
DEFAULT_NUM_WORKERS = 4
SOURCE_KINDS = ("published", "measured", "simulated")  # a row's provenance kinds, most trustworthy first
UNSAID_SOURCE_KIND = "measured"  # a blank source, or one that starts with no kind
#: Stall and compute are shares of the epoch; digitised figures round, so allow this much slack.
COMPONENT_SLACK = 1.10
#: (parts, whole) of one row: the sum of the parts given is at most COMPONENT_SLACK x the whole. Stall and
#: compute together, since the rest of the epoch (epoch - stall - compute) is a time and cannot be negative.
ROW_PARTS: tuple[tuple[tuple[str, ...], str], ...] = ((("stall_time_s", "compute_time_s"), "epoch_time_s"),
                                                      (("base_power_w",), "avg_power_w"))
#: A row's energy is its mean power over its epoch: ``epoch_energy_j`` within this factor of
#: ``avg_power_w x epoch_time_s`` either way (digitised figures round; the profiler's agree to 1e-4).
ENERGY_PRODUCT_SLACK = 1.10
#: (field, factors): the field is the product of the factors, within ENERGY_PRODUCT_SLACK, when all are given.
ROW_PRODUCT: tuple[str, tuple[str, ...]] = ("epoch_energy_j", ("avg_power_w", "epoch_time_s"))


@dataclass(frozen=True)
class RowProblem:
    """A problem in one row (``line`` 0 = the file as a whole)."""

    line: int
    field: str
    message: str

    def described(self, names: tuple[str, str, int] | None = None) -> str:
        """The problem as messages give it, its row named as ``names`` (:data:`LINE_NAMES`, default) say."""
        if not self.line and self.field == "file":  # the file as a whole: "file: is empty", said once
            return f"file: {self.message}"
        one, _, shift = names or LINE_NAMES
        where = f"{one} {self.line + shift}" if self.line else "file"
        return f"{where}: {self.field}: {self.message}"

    __str__ = described


class ProfileRowsError(InputError):
    """Every problem found in a set of profile rows."""

    def __init__(self, problems: list[RowProblem], what: str = "profile rows",
                 names: tuple[str, str, int] | None = None) -> None:
        self.problems = problems
        shown = "; ".join(p.described(names) for p in problems[:20])
        more = f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""
        super().__init__(f"{len(problems)} problem(s) in {what}: {shown}{more}",
                         problems[0].field if problems else None)

    def as_errors(self) -> dict[str, list[str]]:
        errors: dict[str, list[str]] = {}
        for p in self.problems:
            key = f"rows.{p.line}.{p.field}" if p.line else p.field
            errors.setdefault(key, []).append(p.message)
        return errors


def source_kind(source: object) -> str:
    """``measured`` / ``simulated`` / ``published`` from a ``source`` cell (``published: POMACS ...``)."""
    text = str(source or "").strip().lower()
    return next((kind for kind in SOURCE_KINDS if text.startswith(kind)), UNSAID_SOURCE_KIND)


def known_source(source: object) -> bool:
    """Whether a ``source`` cell names a provenance kind: null/empty (read as "measured") or text starting
    with one of :data:`SOURCE_KINDS`. :func:`source_kind` reads any other text as "measured", which would
    let a made-up source stand for measured rows."""
    if source is None:
        return True
    text = source.strip().lower() if isinstance(source, str) else None
    return text is not None and (not text or text.startswith(SOURCE_KINDS))


#: What the digital twin (``profiler/sim``) writes in each row it produces: its meter's name starts with
#: TWIN_METER_PREFIX (``sim:DEVICE``) and its accelerator column is TWIN_ACCELERATOR.
TWIN_METER_PREFIX = "sim:"
TWIN_ACCELERATOR = "sim"


def from_twin(row: Mapping[str, object]) -> bool:
    """Whether a row was produced by the digital twin (its ``power_meter`` or ``accelerator`` says so)."""
    meter, accelerator = row.get("power_meter"), row.get("accelerator")
    return (isinstance(meter, str) and meter.strip().lower().startswith(TWIN_METER_PREFIX)) or (
        isinstance(accelerator, str) and accelerator.strip().lower() == TWIN_ACCELERATOR)


def _twin_source(row: dict[str, object], line: int, current: bool) -> RowProblem | None:
    """A twin row's source: blank read as ``simulated``; a claim to be measured or published refused (a
    stored row, kept under older rules, is read as simulated), since the label alone would otherwise
    decide whether simulated figures are fitted and served as measurements."""
    source = row.get("source")
    if source is None or not str(source).strip():
        row["source"] = "simulated"
    elif source_kind(source) != "simulated":
        if not current:
            row["source"] = "simulated"
            return None
        said = ", ".join(f"{k}={row[k]!r}" for k in ("power_meter", "accelerator") if row.get(k) is not None)
        return RowProblem(line, "source", f"is {source!r} but the row comes from the digital twin ({said}): "
                                          "a twin row must be simulated (or its source left empty)")
    return None


def _coerce(field: Field, value: object) -> tuple[object, str | None]:
    """(parsed value, problem or None). Blank -> None."""
    if is_blank(value):
        return None, None
    if field.kind is str:
        return unescape_formula(str(value).strip()), None
    if isinstance(value, bool):
        return None, f"must be a number ({field.unit or 'count'}), got {value!r}"
    try:
        number = float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        return None, f"must be a number ({field.unit or 'count'}), got {value!r}"
    except OverflowError:  # an integer beyond any float; its hundreds of digits are no help in a message
        return None, f"must be a finite number ({field.unit or 'count'}), got one too large for a float"
    if not math.isfinite(number):
        return None, f"must be a finite number, got {value!r}"
    if field.kind is int and number != round(number):
        return None, f"must be a whole number ({field.unit}), got {value!r}"
    if field.minimum is not None:
        if field.strict and number <= field.minimum:
            return None, f"must be > {field.minimum:g} {field.unit}".rstrip() + f", got {value!r}"
        if not field.strict and number < field.minimum:
            return None, f"must be >= {field.minimum:g} {field.unit}".rstrip() + f", got {value!r}"
    if field.maximum is not None and number > field.maximum:
        return None, f"must be <= {field.maximum:g} {field.unit}".rstrip() + f" (a physical bound), got {value!r}"
    return (int(round(number)) if field.kind is int else number), None


def _validate_record(record: Mapping[str, object], line: int, current: bool = True
                     ) -> tuple[dict[str, object], list[RowProblem]]:
    """The row parsed and its problems. ``current`` False: a row stored under the rules of its time, read
    without the rules added since (:func:`part_problems`, the pass-through numbers' rules)."""
    problems: list[RowProblem] = []
    row: dict[str, object] = {}
    for key, value in record.items():
        if key is None:  # csv.DictReader puts surplus cells under None
            problems.append(RowProblem(line, "_row", f"has more cells than the header ({len(value)} extra)"))
            continue
        if isinstance(value, str) and len(value) > MAX_CELL_CHARS:  # any column, JSON rows too
            problems.append(RowProblem(line, key, f"is {len(value)} characters long; at most {MAX_CELL_CHARS}"))
            continue
        field = FIELD_BY_NAME.get(key) or (PASS_THROUGH_NUMBERS.get(key) if current else None)
        if field is None:
            row[key] = None if is_blank(value) else value
            continue
        parsed, problem = _coerce(field, value)
        if problem:
            problems.append(RowProblem(line, key, problem))
        row[key] = parsed

    is_host = (device := row.get("device")) == HOST_DEVICE
    for field in FIELDS:
        required = field.required and not (is_host and field.name in MODE_FIELDS[1:])
        if required and row.get(field.name) is None and not any(p.field == field.name for p in problems):
            problems.append(RowProblem(line, field.name, REQUIRED_AND_EMPTY))

    if device is not None and not is_host and device not in device_ids():
        problems.append(RowProblem(line, "device", f"unknown device {device!r}; valid: "
                                   f"{', '.join([*device_ids(), HOST_DEVICE])}"))

    # Unit slips first: their messages name the likely unit, which a broken product or sum would hide.
    if device is not None and not is_host and device in device_ids():
        problems.extend(RowProblem(line, f, m) for f, m in implausible(row, str(device)).items()
                        if not any(p.field == f for p in problems))
    if current:
        problems.extend(RowProblem(line, f, m) for f, m in part_problems(row).items()
                        if not any(p.field in (f, *_PART_INPUTS[f]) for p in problems))
    source = row.get("source")
    if not known_source(source):
        problems.append(RowProblem(line, "source", f"must start with one of {', '.join(SOURCE_KINDS)}; "
                                   f"got {source!r}"))
    elif from_twin(row) and (problem := _twin_source(row, line, current)):
        problems.append(problem)
    return row, problems


#: Per field that :func:`part_problems` may name, the fields its rule reads: a unit slip already named in
#: one of them (milliwatts, milliseconds) is the row's problem, not a product or sum it throws off.
_PART_INPUTS: dict[str, tuple[str, ...]] = {
    **{p: (*parts, whole) for parts, whole in ROW_PARTS for p in parts},
    ROW_PRODUCT[0]: ROW_PRODUCT[1]}


def part_problems(row: Mapping[str, object]) -> dict[str, str]:
    """``{field: message}`` for parts of a row above their whole (:data:`ROW_PARTS`, naming the largest
    part) and an energy that is not its power x time (:data:`ROW_PRODUCT`)."""
    out: dict[str, str] = {}
    for parts, whole in ROW_PARTS:
        given = {p: v for p in parts if isinstance(v := row.get(p), float)}
        total = row.get(whole)
        if given and isinstance(total, float) and sum(given.values()) > total * COMPONENT_SLACK:
            unit = FIELD_BY_NAME[whole].unit
            named = " + ".join(f"{p}={v:g}" for p, v in given.items())
            out[max(given, key=given.__getitem__)] = (
                f"{named} {unit} exceeds {whole}={total:g} {unit} (at most {COMPONENT_SLACK:g}x"
                + ("; the rest of the epoch cannot be negative)" if len(parts) > 1 else ")"))
    field, factors = ROW_PRODUCT
    value, values = row.get(field), [row.get(f) for f in factors]
    if isinstance(value, float) and all(isinstance(v, float) for v in values):
        product = math.prod(values)  # type: ignore[arg-type]
        if not product / ENERGY_PRODUCT_SLACK <= value <= product * ENERGY_PRODUCT_SLACK:
            named = " x ".join(f"{f}={v:g}" for f, v in zip(factors, values, strict=True))
            out[field] = (f"{field}={value:g} {FIELD_BY_NAME[field].unit} is not {named} = {product:.4g} "
                          f"{FIELD_BY_NAME[field].unit} (within {ENERGY_PRODUCT_SLACK:g}x either way): the epoch's "
                          "energy is its mean power over its time")
    return out


def plausibility_rules(device_id: str) -> list[dict[str, object]]:
    """The ratio rules a Jetson row must meet (also written into the OpenAPI document): ``field / per``
    within ``min..max`` -- the time of one minibatch (s, at least), of one sample (s, at most: ``per_also``
    divides too) and the mean power that the epoch's energy implies (W, the device's
    :attr:`~models.catalogue.Device.power_range_w`)."""
    low_w, high_w = load_device(device_id).power_range_w
    # The per-sample rule keeps "per" one field and names the second divisor apart, so a reader that knows
    # only field / per bounds by minibatch, which is stricter (batch_size >= 1) and never wrong to follow.
    return [{"rule": "ratio-range", "field": "epoch_time_s", "per": "minibatches_per_epoch",
             "min": MIN_S_PER_MINIBATCH, "max": MAX_TIME_S, "unit": "s per minibatch"},
            {"rule": "ratio-range", "field": "epoch_time_s", "per": "minibatches_per_epoch",
             "per_also": "batch_size", "min": 0.0, "max": MAX_S_PER_SAMPLE,
             "unit": "s per sample (divided by batch_size too)"},
            {"rule": "ratio-range", "field": "epoch_energy_j", "per": "epoch_time_s",
             "min": low_w, "max": high_w, "unit": "W"}]


#: The measured powers of a row, checked against the device's power range.
POWER_FIELDS = ("avg_power_w", "base_power_w")


def implausible(row: Mapping[str, object], device_id: str) -> dict[str, str]:
    """``{field: message}`` for values of a Jetson row that cannot be physical on ``device_id``: powers
    outside the module's range, a minibatch under :data:`MIN_S_PER_MINIBATCH` s or a sample over
    :data:`MAX_S_PER_SAMPLE` s, an energy whose implied mean power is outside the range. Each message
    names the likely unit mistake (milliseconds, milliwatts, millijoules) when rescaling would fit."""
    device = load_device(device_id)
    out: dict[str, str] = {}
    for name in POWER_FIELDS:
        if isinstance(value := row.get(name), float) and (problem := device.power_problem(name, value)):
            out[name] = problem
    epoch, minibatches = row.get("epoch_time_s"), row.get("minibatches_per_epoch")
    if isinstance(epoch, float) and isinstance(minibatches, int) and minibatches > 0 and (
            problem := _time_problem(epoch, minibatches, row.get("batch_size"))):
        out["epoch_time_s"] = problem
    energy = row.get("epoch_energy_j")
    if isinstance(energy, float) and isinstance(epoch, float) and "epoch_time_s" not in out:
        implied = energy / epoch
        lo, hi = device.power_range_w
        if implied > hi:
            hint = unit_hint(implied, lo, hi, "W", {"millijoules": 1e-3}, "epoch_energy_j")
            out["epoch_energy_j"] = (
                f"epoch_energy_j={energy:g} J over epoch_time_s={epoch:g} s is a mean power of {implied:.4g} W, "
                f"above the {hi:g} W a {device.name} module can draw"
                + (hint or "; check that epoch_energy_j is joules per epoch"))
        elif implied < lo:
            # A power a thousand times too low: the epoch was timed in milliseconds (energy in joules).
            hint = unit_hint(implied, lo, hi, "W of mean power", {"milliseconds": 1e3}, "epoch_time_s")
            out["epoch_energy_j"] = (
                f"epoch_energy_j={energy:g} J over epoch_time_s={epoch:g} s is a mean power of {implied:.4g} W, "
                + below_any_module(lo)
                + (hint or "; check that epoch_energy_j is joules and epoch_time_s seconds, per epoch"))
    return out


def _time_problem(epoch: float, minibatches: int, batch: object) -> str | None:
    """Why ``epoch`` s over ``minibatches`` of ``batch`` samples is no Jetson's training time (at least
    :data:`MIN_S_PER_MINIBATCH` a minibatch, at most :data:`MAX_S_PER_SAMPLE` a sample), or None."""
    per = epoch / minibatches
    if per < MIN_S_PER_MINIBATCH:
        return (f"epoch_time_s={epoch:g} s over minibatches_per_epoch={minibatches} is {per:.3g} s per "
                f"minibatch, less than the {MIN_S_PER_MINIBATCH:g} s a Jetson minibatch plausibly takes; check "
                "that epoch_time_s is seconds per epoch and minibatches_per_epoch the count of one epoch")
    if not isinstance(batch, int) or batch < 1:
        return None  # the batch size's own problem is reported; no per-sample bound without it
    per_sample = per / batch
    if per_sample <= MAX_S_PER_SAMPLE:
        return None
    hint = unit_hint(per_sample, MIN_S_PER_MINIBATCH / batch, MAX_S_PER_SAMPLE, "s per sample",
                     {"milliseconds": 1e-3}, "epoch_time_s")
    return (f"epoch_time_s={epoch:g} s over minibatches_per_epoch={minibatches} x batch_size={batch} is "
            f"{per_sample:.3g} s per sample, more than the {MAX_S_PER_SAMPLE:g} s a Jetson plausibly takes "
            f"for one sample (more than the {MAX_S_PER_MINIBATCH:g} s for a minibatch of {BATCH_SIZE})"
            + (hint or "; check that epoch_time_s is seconds per epoch and minibatches_per_epoch the count of one epoch"))


def _frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    columns = list(dict.fromkeys([*COLUMNS, *(k for r in rows for k in r)]))  # the fields, then the extras
    df = pd.DataFrame(rows, columns=columns)
    for f in FIELDS:
        if f.kind is not str:
            df[f.name] = pd.to_numeric(df[f.name], errors="coerce").astype(float)
    for name in columns[len(COLUMNS):]:
        # Extras (macs_fwd, power_meter ...) are numbers when every given value parses as one.
        numeric = pd.to_numeric(df[name], errors="coerce")
        if numeric.notna().sum() == df[name].notna().sum() and numeric.notna().any():
            df[name] = numeric.astype(float)
    df["num_workers"] = df["num_workers"].fillna(DEFAULT_NUM_WORKERS)
    df["source"] = df["source"].astype(object).where(df["source"].notna(), "measured")
    return df


#: How conflict messages name rows: (one, several, added to the line number). A file's rows by their
#: lines; a JSON list's by their 0-based index, as its error keys (``rows.I.FIELD``) name them.
LINE_NAMES = ("line", "lines", 0)
INDEX_NAMES = ("row", "rows", -1)


def validate_records(records: Iterable[Mapping[str, object]], first_line: int = 1,
                     what: str = "profile rows", line_numbers: Sequence[int] | None = None,
                     names: tuple[str, str, int] = LINE_NAMES, stored: int = 0, compare: bool = True
                     ) -> pd.DataFrame:
    """Validate row mappings (JSON objects or CSV records); raise :class:`ProfileRowsError` with all problems.

    ``line_numbers`` gives each record's line in its file (CSV readers skip blank lines), else
    ``first_line + index``; ``names``: how messages name rows (problems, :func:`mode_conflicts`).
    ``stored``: the first so many records were stored by a service under its rules of the time; the rules
    inside a row added since (:func:`part_problems`, the pass-through numbers' rules) are not applied to
    them, so an upgrade leaves a stored workload usable as it was. ``compare``: check rows against each other
    (:func:`mode_conflicts`) once no row has a problem; False where the caller found problems of its own.
    """
    rows: list[dict[str, object]] = []
    lines: list[int] = []
    problems: list[RowProblem] = []
    columns: set[object] = {None}  # csv.DictReader's key of surplus cells, which is no column
    for i, record in enumerate(records):
        line = line_numbers[i] if line_numbers is not None else first_line + i
        if i >= MAX_ROWS:
            problems.append(RowProblem(line, "rows", f"more than {MAX_ROWS} rows; split the file"))
            break
        if not isinstance(record, Mapping):
            problems.append(RowProblem(line, "_row", "must be an object of field: value"))
            continue
        columns.update(record.keys())
        if len(columns) > MAX_COLUMNS + 1:
            problems.append(RowProblem(line, "columns", f"more than {MAX_COLUMNS} distinct columns in the rows "
                                       f"up to this one; rows hold at most {MAX_COLUMNS} (give them the same columns)"))
            break
        row, row_problems = _validate_record(record, line, current=i >= stored)
        rows.append(row)
        lines.append(line)
        problems.extend(row_problems)
    problems.extend(_knobs_out_of_range(rows, lines))
    problems.sort(key=lambda p: p.line)
    if not rows and not problems:
        problems.append(RowProblem(0, "rows", "no data rows"))
    if not problems and compare:
        problems = mode_conflicts(rows, lines, names)
    if problems:
        raise ProfileRowsError(problems, what, names)
    return _frame(rows)


def _knobs_out_of_range(rows: Sequence[Mapping[str, object]], lines: Sequence[int]) -> list[RowProblem]:
    """Knobs outside their device's range, checked per device on all rows at once (a row at a time costs
    ~0.3 ms, a minute for a 200,000-row file); rows are looked at one by one only where one is bad."""
    by_device: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        device = row.get("device")
        if device is not None and device != HOST_DEVICE and device in device_ids():
            by_device.setdefault(str(device), []).append(i)
    problems: list[RowProblem] = []
    for device_id, index in by_device.items():
        device = load_device(device_id)
        ranges = device.knob_ranges()
        # A knob that failed to parse is already reported; check the others against the range.
        knobs = np.array([[rows[i].get(k) if rows[i].get(k) is not None else ranges[k][0] for k in MODE_FIELDS]
                          for i in index], dtype=float)
        if not device.out_of_range(*knobs.T):
            continue
        for i, row_knobs in zip(index, knobs, strict=True):
            out = device.out_of_range(*(np.atleast_1d(k) for k in row_knobs))
            problems.extend(RowProblem(lines[i], f, m) for f, m in out.items())
    return problems


#: Columns that make two rows "the same measurement": the mode knobs and what else sets the epoch time.
SAME_RUN_FIELDS = ("device", "workload", *MODE_FIELDS, "num_workers", "batch_size", "minibatches_per_epoch")
#: Columns that name one mode: rows that share them (unless the label is generic) share the knobs.
SAME_LABEL_FIELDS = ("device", "workload", "mode")
#: Labels that name no particular mode, so rows may share them with different knobs.
GENERIC_LABELS = ("custom", "")


def mode_conflicts(rows: Sequence[Mapping[str, object]], lines: Sequence[int],
                   names: tuple[str, str, int] = LINE_NAMES) -> list[RowProblem]:
    """Rows that contradict each other (validated rows, with their lines; ``names``: how messages name
    them, :data:`LINE_NAMES` or :data:`INDEX_NAMES`):

    - one label (other than ``custom``) with different knobs for one device and workload;
    - the same knobs (and workers, batch size, minibatches) measured with epoch times further apart than
      :data:`DUPLICATE_TIME_SPREAD` (max/min): one of them is wrong. Closer repeats are kept (repeated runs).
    """
    one, several, shift = names
    problems: list[RowProblem] = []
    labels: dict[tuple, tuple[tuple, int]] = {}
    runs: dict[tuple, list[tuple[float, int]]] = {}
    for row, line in zip(rows, lines, strict=True):
        knobs = tuple(row.get(k) for k in MODE_FIELDS)
        label = str(row.get("mode") or "")
        if label.lower() not in GENERIC_LABELS:
            seen = labels.setdefault(tuple(row.get(k) for k in SAME_LABEL_FIELDS), (knobs, line))
            if seen[0] != knobs:
                problems.append(RowProblem(line, "mode", f"label {label!r} has knobs {knobs} here but {seen[0]} "
                                           f"on {one} {seen[1] + shift}; give different modes different labels"))
        if isinstance(epoch := row.get("epoch_time_s"), float):
            # Workers left out (null or no column) are the default, as in _frame.
            key = tuple(DEFAULT_NUM_WORKERS if k == "num_workers" and row.get(k) is None else row.get(k)
                        for k in SAME_RUN_FIELDS)
            runs.setdefault(key, []).append((epoch, line))
    for measured in runs.values():
        times = [t for t, _ in measured]
        if len(times) > 1 and max(times) > min(times) * DUPLICATE_TIME_SPREAD:
            where = ", ".join(str(line + shift) for _, line in measured[:10])
            problems.append(RowProblem(measured[-1][1], "epoch_time_s", (
                f"{several} {where} measure the same mode (same knobs, workers, batch size and minibatches) "
                f"with epoch times {min(times):g}..{max(times):g} s, more than {DUPLICATE_TIME_SPREAD:g}x "
                "apart: conflicting rows; remove the wrong one")))
    return problems


def escape_formula(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula (starts with = + - @ TAB CR), or one where only
    quotes stand before such a character (``'=x``, so that it reads back as written), gets a leading ``'``."""
    if isinstance(value, str) and value.lstrip("'").startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def unescape_formula(text: str) -> str:
    """Undo :func:`escape_formula` on a cell read back from one of our CSV files (one quote off ``'=x``)."""
    return text[1:] if text.startswith("'") and text.lstrip("'").startswith(FORMULA_PREFIXES) else text


def unknown_columns(records: Iterable[Mapping[str, object]]) -> dict[str, list[str]]:
    """``{"rows.I.COLUMN": [message]}`` (0-based row index, first row naming it) for the first
    :data:`MAX_UNKNOWN_NAMED` columns that are neither in FIELDS nor pass-through columns, and ``{"rows":
    ["and N more ..."]}`` for the rest; empty when all are known. Linear in the keys, whatever their number."""
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for i, record in enumerate(records):
        for name in map(str, record if isinstance(record, Mapping) else ()):
            if name not in seen and name not in FIELD_BY_NAME and name not in PASS_THROUGH_COLUMNS:
                seen.add(name)
                if len(seen) <= MAX_UNKNOWN_NAMED:  # a close match for those named only
                    close = difflib.get_close_matches(name, [*COLUMNS, *PASS_THROUGH_COLUMNS], n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    out[f"rows.{i}.{name}"] = [f"unknown column {name!r}: not a profile-row field nor a "
                                               f"documented pass-through column (models/profile_rows.py){hint}"]
    if len(seen) > MAX_UNKNOWN_NAMED:
        out["rows"] = [f"and {len(seen) - MAX_UNKNOWN_NAMED} more unknown column(s), not named here"]
    return out
