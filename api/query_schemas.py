"""Marshmallow schemas of the query routes: predictions, recommendations and fleet plans (requests and
answers). Shared fields, devices, profile rows and workloads are in :mod:`jetpredict.api.schemas`; both
modules give the OpenAPI document through flask-smorest."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import NamedTuple

from jetpredict.api.config import LISTED_MODE_FIELDS, MAX_CLIENT_ID_CHARS, MAX_MODE_LABEL_CHARS
from jetpredict.api.errors import release
from jetpredict.api.list_fields import BoundedList, capped_item_errors, count_problem
from jetpredict.api.schemas import (
    CATALOGUE_RANGES,
    LAYOUTS,
    MAX_DEADLINE_S,
    MAX_POWER_CAP_W,
    MAX_TIME_CAP_S,
    REQUIRED_TEXT_PATTERN,
    REQUIRED_TEXT_RULE,
    JsonInteger,
    JsonNumber,
    ModelProvenanceSchema,
    ModeSchema,
    RequestSchema,
    WorkloadRefSchema,
    aliased_knobs_field,
    device_field,
    positive_float,
    rows_scatter_field,
    split_source_field,
    storable_text,
    text_problem,
)
from jetpredict.models.catalogue import (
    MIN_MODULE_POWER_W,
    MODE_FIELDS,
    POWER_MODE_SPACES,
    device_ids,
    knob_tolerance,
    knob_unit,
    list_devices,
    load_device,
    power_out_of_range,
)
from jetpredict.models.numbers import json_finite_float
from jetpredict.predictor.limits import (
    DEFAULT_CONFIDENCE,
    MAX_CLIENTS,
    MAX_CONFIDENCE,
    MAX_EPOCHS,
    MAX_MODES,
    MIN_CONFIDENCE,
    OBJECTIVES,
)
from jetpredict.predictor.service import mode_row_label, mode_row_problems
from marshmallow import INCLUDE, Schema, ValidationError, fields, validate


# -- predictions -----------------------------------------------------------------------------------
class _Bounds(NamedTuple):
    """Where a number of a mode object may lie (the field's unit): [low, high], or (low, high] when
    ``low_inclusive`` is false; no upper bound when ``high`` is None."""

    low: float
    high: float | None
    low_inclusive: bool = True


#: The one statement of every mode object's number bounds: the document states them as they are, the schema
#: and the fast path (:func:`_plain_mode`) take them through :data:`TAKEN_BOUNDS`. Knobs over the whole
#: catalogue (cores; MHz), then the power-modes listing's fields (its preset id; W; a share of the GPU).
MODE_BOUNDS: dict[str, _Bounds] = {
    **{k: _Bounds(*CATALOGUE_RANGES[k]) for k in MODE_FIELDS},
    "nvpmodel_id": _Bounds(0, None),
    "power_budget_w": _Bounds(0, MAX_POWER_CAP_W, low_inclusive=False),
    "gpu_share": _Bounds(0, 1, low_inclusive=False),
}
#: The bounds the schema and the fast path take: MODE_BOUNDS with the device check's tolerance past either
#: end of each knob (``Device.out_of_range`` takes a clock that close to its device's range, whose ends are
#: the catalogue's for some devices); the document states the stricter MODE_BOUNDS.
TAKEN_BOUNDS: dict[str, _Bounds] = {
    k: b._replace(low=b.low - knob_tolerance(k), high=b.high + knob_tolerance(k)) if k in MODE_FIELDS else b
    for k, b in MODE_BOUNDS.items()}


def _doc_bounds(name: str) -> dict[str, float | bool]:
    """The OpenAPI keywords of ``name``'s bounds."""
    b = MODE_BOUNDS[name]
    return {"minimum": b.low, **({} if b.low_inclusive else {"exclusiveMinimum": True}),
            **({} if b.high is None else {"maximum": b.high})}


#: What a knob past the catalogue's range is told when the request names no device and its rows do not
#: either (a stored workload: its device is known only to the route), so that one answer is not followed
#: by another with the device's narrower range.
CATALOGUE_RANGE_NOTE = "(the workload's device may allow less: name device to have its range checked here)"


def _range(name: str) -> validate.Range:
    """The schema's check of ``name``'s taken bounds; a knob's message states the catalogue's range without
    the tolerance, as the device check states a device's (a request naming its device is told that
    device's range instead, :func:`_device_problems`)."""
    b, stated = TAKEN_BOUNDS[name], MODE_BOUNDS[name]
    if name not in MODE_FIELDS:
        return validate.Range(b.low, b.high, min_inclusive=b.low_inclusive)
    return _KnobRange(b.low, b.high, min_inclusive=b.low_inclusive, error=f"{name}={{input}} is outside every "
                      f"catalogue device: must be in {stated.low:g}..{stated.high:g}{knob_unit(name)} "
                      f"{CATALOGUE_RANGE_NOTE}")


class _KnobRange(validate.Range):
    """A range whose message shows the value as the device check does (``%g``), an integer past a float's
    reach as its leading digits (formatting it as a float would raise)."""

    def _format_error(self, value, message: str) -> str:
        try:
            shown = f"{value:g}"
        except OverflowError:
            shown = f"{str(value)[:12]}..."
        return self.error.format(input=shown, min=self.min, max=self.max)


def _within(name: str, value: float) -> bool:
    """``value`` (a number) inside ``name``'s taken bounds."""
    b = TAKEN_BOUNDS[name]
    return (b.low <= value if b.low_inclusive else b.low < value) and (b.high is None or value <= b.high)


MODE_IN_DOC = {
    "type": "object",
    "description": "knob ranges are those of the whole catalogue; each device's own range is checked too",
    "properties": {
        "mode": {"type": "string", "maxLength": MAX_MODE_LABEL_CHARS},
        "cpu_cores": {"type": "integer", **_doc_bounds("cpu_cores")},
        **{k: {"type": "number", "description": "MHz", **_doc_bounds(k)} for k in MODE_FIELDS[1:]},
        # The power-modes listing's own fields, so that a listed preset can be sent back as it came.
        "nvpmodel_id": {"type": "integer", "nullable": True, **_doc_bounds("nvpmodel_id"),
                        "description": "as GET /v1/devices/{device}/power-modes lists it; not used"},
        "power_budget_w": {"type": "number", "nullable": True, **_doc_bounds("power_budget_w"),
                           "description": "W, as GET /v1/devices/{device}/power-modes lists it; not used"},
        "gpu_share": {"type": "number", **_doc_bounds("gpu_share"),
                      "description": "as GET /v1/devices/{device}/power-modes lists it; not used: the device's "
                                     "preset at this label and these knobs decides the powered share"},
    },
    "required": list(MODE_FIELDS),
    "additionalProperties": False,
}


class ModeInSchema(RequestSchema):
    mode = fields.String(validate=[validate.Length(0, MAX_MODE_LABEL_CHARS), storable_text])
    cpu_cores = JsonInteger(required=True, validate=_range("cpu_cores"))
    cpu_mhz = JsonNumber(required=True, validate=_range("cpu_mhz"))
    gpu_mhz = JsonNumber(required=True, validate=_range("gpu_mhz"))
    emc_mhz = JsonNumber(required=True, validate=_range("emc_mhz"))
    # The listing's fields (MODE_IN_DOC says what they mean), typed and not used.
    nvpmodel_id = JsonInteger(allow_none=True, validate=_range("nvpmodel_id"))
    power_budget_w = JsonNumber(allow_none=True, validate=_range("power_budget_w"))
    gpu_share = JsonNumber(validate=_range("gpu_share"))


_MODES_SCHEMA = ModeInSchema(many=True)  # built once: schema construction costs more than loading 10 modes


_MODE_KEYS = frozenset(("mode", *MODE_FIELDS, *LISTED_MODE_FIELDS))
#: The listing's number fields the schema loads as floats, each with whether the schema takes null.
_LISTED_NUMBERS = {k: _MODES_SCHEMA.fields[k].allow_none for k in ("power_budget_w", "gpu_share")}
#: The type the schema gives each number field of a mode object, what the fast path converts to: ints for its
#: whole-number fields (8.0 included), floats for the clocks and the listing's numbers.
_LOADED_TYPES = {**{k: int for k, f in _MODES_SCHEMA.fields.items() if isinstance(f, JsonInteger)},
                 **dict.fromkeys((*MODE_FIELDS[1:], *_LISTED_NUMBERS), float)}


def _whole(x: object) -> bool:
    """``x`` a whole number as :class:`JsonInteger` takes it: an int, or a float with no fraction (not a bool)."""
    return type(x) is int or type(x) is float and x.is_integer()


def _plain_listed(m: dict) -> bool:
    """The power-modes listing's fields of ``m``, where present, as :class:`ModeInSchema` takes them."""
    nv = m.get("nvpmodel_id")
    if nv is not None and not (_whole(nv) and _within("nvpmodel_id", nv)):
        return False
    return all(m[k] is None and nullable or type(m[k]) in (float, int) and _within(k, m[k])
               for k, nullable in _LISTED_NUMBERS.items() if k in m)


def _label_taken(label: object) -> bool:
    """A mode label the schema takes: a storable string within its length."""
    return isinstance(label, str) and len(label) <= MAX_MODE_LABEL_CHARS and text_problem(label) is None


def _plain_mode(m: object) -> bool:
    """A mode object that :class:`ModeInSchema` would load unchanged but for number types (the usual case,
    checked cheaply; listed modes sent back included)."""
    if not isinstance(m, dict) or not m.keys() <= _MODE_KEYS or not all(k in m for k in MODE_FIELDS):
        return False
    if not _plain_listed(m):
        return False
    # The schema's label is an optional string: absent is fine, null is not.
    if "mode" in m and not _label_taken(m["mode"]):
        return False
    if not _whole(m["cpu_cores"]):
        return False
    return all(type(m[k]) in (float, int) and _within(k, m[k]) for k in MODE_FIELDS)


#: What a ``modes`` that is neither a word of POWER_MODE_SPACES nor a list is told.
_MODES_RULE = f"must be {', '.join(map(json.dumps, POWER_MODE_SPACES))} or a list of mode objects"


class ModesField(fields.Field):
    """A word of :data:`models.catalogue.POWER_MODE_SPACES` (``"presets"``, ``"all"``) or a list of mode
    objects."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            if value in POWER_MODE_SPACES:
                return value
            raise ValidationError(_MODES_RULE)
        if not isinstance(value, list):
            raise ValidationError(_MODES_RULE)
        if problem := count_problem(len(value), 1, MAX_MODES, "modes"):
            raise ValidationError(problem)
        if all(_plain_mode(m) for m in value):
            # What the schema would return (_LOADED_TYPES).
            return [{**m, **{k: kind(m[k]) for k, kind in _LOADED_TYPES.items() if m.get(k) is not None}}
                    for m in value]
        try:
            return _MODES_SCHEMA.load(value)  # reports every problem in marshmallow's words
        except ValidationError as exc:
            messages = exc.messages
            release(exc)
        said = _device_problems(messages, value, _checked_device(data))
        raise ValidationError(capped_item_errors(said, len(said), "modes"))


def _checked_device(data: object) -> object:
    """The device a request's modes are checked against on the schema's error path: ``device`` where the
    request names it, else the one device the inline rows' device cells name (stripped, as the row checks
    strip text cells); None where neither says (a stored workload, rows of several devices or none)."""
    if not isinstance(data, Mapping):
        return None
    if "device" in data:
        return data["device"]
    workload = data.get("workload")
    rows = workload.get("rows") if isinstance(workload, Mapping) and workload.get("id") is None else None
    if not isinstance(rows, list) or not rows:
        return None
    cells = {r.get("device").strip() if isinstance(r, Mapping) and isinstance(r.get("device"), str) else None
             for r in rows}
    return next(iter(cells)) if len(cells) == 1 else None


def _device_problems(messages: dict, modes: list, device_id: object) -> dict:
    """``messages`` (per mode index, per field) with each knob outside the range of the device the request
    names (or its inline rows name, :func:`_checked_device`) stated as that device's rule, in the words of the
    later check (``modes[i] (label): ...``), for every mode, also those inside the catalogue's bounds; as they
    are when no catalogue device is named.
    Only on the error path: the fast path's modes are checked against the device by the route."""
    # _MODES_SCHEMA is many=True and is only given lists: its messages are always {index: {field: [...]}}.
    if not isinstance(device_id, str) or device_id not in device_ids():
        return messages
    device = load_device(device_id)
    ranges = device.knob_ranges()
    out = {i: dict(said) for i, said in messages.items()}
    for i, m in enumerate(modes):
        if not isinstance(m, dict):
            continue
        # A knob that is not a finite JSON number keeps the schema's message (text, NaN, too large): the
        # range check gets an in-range stand-in for it and so says nothing about it.
        knobs = [json_finite_float(m.get(k)) for k in MODE_FIELDS]
        knobs = [ranges[k][0] if v is None else v for k, v in zip(MODE_FIELDS, knobs, strict=True)]
        label = m.get("mode")  # named as the route names it, where the schema takes it
        shown = mode_row_label(label) if _label_taken(label) else ""  # a blank one: mode_row_label says ""
        for name, problem in mode_row_problems(device, i, shown, knobs).items():
            out.setdefault(i, {})[name] = [problem.message]
    return out


def _modes_field() -> ModesField:
    presets, every = map(json.dumps, POWER_MODE_SPACES)
    return ModesField(load_default=POWER_MODE_SPACES[0], metadata={
        "description": f"the modes to predict: {presets}, {every} (every custom mode) or a list",
        "oneOf": [{"type": "string", "enum": list(POWER_MODE_SPACES)},
                  {"type": "array", "items": MODE_IN_DOC, "minItems": 1, "maxItems": MAX_MODES}]})


def _confidence_field(description: str) -> JsonNumber:
    return JsonNumber(load_default=DEFAULT_CONFIDENCE, validate=validate.Range(MIN_CONFIDENCE, MAX_CONFIDENCE),
                      metadata={"description": description, "example": DEFAULT_CONFIDENCE})


class PredictionRequestSchema(RequestSchema):
    device = device_field("device to predict for (default: the workload's)")
    workload = fields.Nested(WorkloadRefSchema, required=True)
    modes = _modes_field()
    epochs = JsonInteger(validate=validate.Range(1, MAX_EPOCHS),
                            metadata={"description": "adds time/energy to train this many epochs"})
    confidence = _confidence_field("coverage of the intervals (a share, e.g. 0.9)")
    layout = fields.String(load_default="rows", validate=validate.OneOf(LAYOUTS), metadata={
        "description": "JSON answers: rows (one object per mode, the default) or columns (compact: values per "
                       "column, constants once, predicted values to 6 significant digits). Accept: text/csv "
                       "or application/vnd.apache.arrow.stream ask for CSV or Arrow instead"})


def _num(required: bool = False, **metadata) -> fields.Float:
    return fields.Float(required=required, allow_none=not required, metadata=metadata)


class PredictionSchema(ModeSchema):
    epoch_time_s = _num(True, description="s")
    epoch_time_s_low = _num(description="s, lower bound of the interval")
    epoch_time_s_high = _num(description="s, upper bound of the interval")
    avg_power_w = _num(True, description="W, mean module power while training")
    epoch_energy_j = _num(True, description="J per epoch")
    epoch_energy_j_low = _num(description="J")
    epoch_energy_j_high = _num(description="J")
    avg_power_w_low = _num(description="W, lower bound of the interval")
    avg_power_w_high = _num(description="W, upper bound of the interval (what power caps are checked against)")
    time_to_accuracy_s = _num(description="s for `epochs` epochs")
    time_to_accuracy_s_low = _num()
    time_to_accuracy_s_high = _num()
    energy_to_accuracy_j = _num(description="J for `epochs` epochs")
    energy_to_accuracy_j_low = _num()
    energy_to_accuracy_j_high = _num()
    extrapolated = fields.Boolean(metadata={"description": "a knob lies outside the profiled range"})
    extrapolated_knobs = fields.String(metadata={"description": "those knobs, ';'-separated ('' if none)"})
    cross_device = fields.Boolean(required=True)
    power_source = fields.String(required=True, metadata={"description": "workload | reference"})
    confidence = fields.Float(metadata={"description": "coverage of the intervals"})


class ProvenanceSchema(ModelProvenanceSchema):
    device = fields.String(required=True)
    workload_id = fields.String(allow_none=True, metadata={"description": "null for inline rows"})
    workload_devices = fields.List(fields.String(), metadata={
        "description": "the devices the workload holds rows of"})
    rows_device = fields.String(allow_none=True, metadata={
        "description": "the device whose rows this answer rests on: `device` itself when the workload holds "
                       "rows of it, else the device they are transferred from (cross_device)"})
    revision = fields.Integer(allow_none=True, metadata={
        "description": "the stored workload's revision whose fit this answer rests on (it grows with every "
                       "upload to the workload): answers of different revisions come from different fits; null "
                       "for inline rows"})


class PredictionResponseSchema(ProvenanceSchema):
    epochs = fields.Integer(allow_none=True)
    count = fields.Integer(required=True)
    predictions = fields.List(fields.Nested(PredictionSchema), metadata={
        "description": "one object per mode (layout rows, the default)"})
    layout = fields.String(metadata={"description": "columns, in a compact answer (absent in rows answers)"})
    cross_device = fields.Boolean(metadata={"description": "layout columns: the same for every mode"})
    power_source = fields.String(metadata={"description": "layout columns: the same for every mode"})
    confidence = fields.Float(metadata={"description": "layout columns: coverage of the intervals"})
    columns = fields.Dict(keys=fields.String(), values=fields.List(fields.Raw(allow_none=True)), metadata={
        "description": "layout columns: per-mode values by column name (the fields of a prediction row "
                       "without cross_device, power_source and confidence), all of length count"})


#: Where a refused cap read in another unit must land for the unit hint (W): the catalogue's span of
#: ``Device.cap_hint_range_w`` (the device check, with the request's device, uses that device's own).
_CAP_HINT_RANGE_W = (min(d.cap_hint_range_w[0] for d in list_devices()),
                     max(d.cap_hint_range_w[1] for d in list_devices()))


class _CapRange(validate.Range):
    """The catalogue-wide range of a power cap, refused as the device check refuses one: naming the field,
    the rule and a likely unit slip (15000 looks like milliwatts), with the advice to leave it out."""

    def _format_error(self, value, message: str) -> str:
        said = power_out_of_range("max_power_w", value, (self.min, self.max), f"{self.max:g} W", _CAP_HINT_RANGE_W)
        return f"{said}; leave the cap out for no cap" if value > self.max else said


class ConstraintsSchema(RequestSchema):
    # Below what any module draws no mode can meet the cap: a unit slip, refused as the CLI refuses it.
    max_power_w = JsonNumber(allow_none=True, validate=_CapRange(MIN_MODULE_POWER_W, MAX_POWER_CAP_W),
                             metadata={"description": "W"})
    max_epoch_time_s = positive_float(MAX_TIME_CAP_S, "s", allow_none=True)


class RecommendationRequestSchema(RequestSchema):
    device = device_field("device to recommend for (default: the workload's)")
    workload = fields.Nested(WorkloadRefSchema, required=True)
    objective = fields.String(required=True, validate=validate.OneOf(OBJECTIVES))  # its keys
    constraints = fields.Nested(ConstraintsSchema, load_default=dict)
    epochs = JsonInteger(validate=validate.Range(1, MAX_EPOCHS))
    confidence = _confidence_field("the caps must hold for the upper ends of intervals of this coverage")


class PresetComparisonSchema(Schema):
    """``best`` against the best preset meeting the same caps (``predictor.recommend.preset_comparison``)."""

    objective = fields.String(required=True)
    preset = fields.String(allow_none=True, metadata={"description": "its name; null when no preset meets them"})
    chosen_is_preset = fields.Boolean(required=True)
    epoch_time_s = _num(description="s, the preset's")
    epoch_time_s_high = _num(description="s, upper bound")
    epoch_energy_j = _num(description="J per epoch, the preset's")
    epoch_energy_j_high = _num(description="J, upper bound")
    avg_power_w = _num(description="W, the preset's")
    avg_power_w_high = _num(description="W, upper bound")
    time_saving_s = _num(description="s per epoch saved by `best` (negative: it is slower)")
    time_saving_share = _num(description="that as a share of the preset's epoch time")
    energy_saving_j = _num(description="J per epoch saved by `best` (negative: it uses more)")
    energy_saving_share = _num(description="that as a share of the preset's energy")
    reason = fields.String(allow_none=True)


class RecommendationSchema(ProvenanceSchema):
    objective = fields.String(required=True)
    constraints = fields.Nested(ConstraintsSchema, required=True)
    confidence = fields.Float(required=True, metadata={"description": "coverage of the intervals"})
    modes_considered = fields.Integer(metadata={
        "description": "power modes of the device searched: all of them, as `GET /v1/devices` counts them "
                       "(`power_modes`); its nvpmodel presets are searched besides them"})
    feasible = fields.Boolean(required=True)
    reason = fields.String(allow_none=True)
    preferred_in_range = fields.Boolean(metadata={
        "description": "a mode outside the profiled knob ranges looked better but not beyond its interval, so "
                       "the best mode inside the ranges, or better than all of them beyond its interval, was "
                       "chosen"})
    best = fields.Nested(PredictionSchema, allow_none=True, required=True)
    pareto = fields.List(fields.Nested(PredictionSchema), required=True,
                         metadata={"description": "time vs energy front, fastest first, of the modes meeting the "
                                                 "constraints that the out-of-range rule lets count: `best` is "
                                                 "on it and none of it beats `best` on both"})
    preferred_preset = fields.Boolean(metadata={
        "description": "a better-looking mode outside the profiled ranges gave way to the best nvpmodel preset "
                       "meeting the constraints, itself outside them but better than every mode inside them "
                       "beyond its interval: it is `best`"})
    preset_comparison = fields.Nested(PresetComparisonSchema, allow_none=True, metadata={
        "description": "the best nvpmodel preset meeting the same constraints at the same confidence, and "
                       "what `best` saves against it"})


class FleetClientSchema(RequestSchema):
    id = fields.String(required=True, validate=[validate.Length(1, MAX_CLIENT_ID_CHARS),
                                                validate.Regexp(REQUIRED_TEXT_PATTERN, error=REQUIRED_TEXT_RULE),
                                                storable_text])
    device = device_field(required=True)


class FleetPlanRequestSchema(RequestSchema):
    workload = fields.Nested(WorkloadRefSchema, required=True)
    deadline_s = positive_float(MAX_DEADLINE_S, "s, deadline of the round (at most 10 years)", required=True)
    epochs = JsonInteger(load_default=1, validate=validate.Range(1, MAX_EPOCHS),
                            metadata={"description": "local epochs per client in the round"})
    # Ids unique: the answer names clients by id (infeasible_clients); JSON Schema cannot say "unique by
    # id", so the description does and the planner answers 422 naming the repeated id.
    clients = BoundedList(fields.Nested(FleetClientSchema), noun="clients", required=True,
                          validate=validate.Length(1, MAX_CLIENTS),
                          metadata={"description": "the clients; each id at most once (a repeated id is a 422)"})
    confidence = _confidence_field("the deadline must hold for the upper end of each client's time "
                                   "interval of this coverage")


class FleetClientPlanSchema(Schema):
    class Meta:
        unknown = INCLUDE

    id = fields.String(required=True)
    device = fields.String(required=True)
    mode = fields.String(allow_none=True, metadata={"description": "an nvpmodel preset's name (e.g. MODE_10W) "
                                                                   "where that preset beats the best mode of the "
                                                                   "space, as recommend prefers it; else the "
                                                                   "mode's knob label"})
    cpu_cores = fields.Integer(allow_none=True)
    cpu_mhz = fields.Float(allow_none=True)
    gpu_mhz = fields.Float(allow_none=True)
    emc_mhz = fields.Float(allow_none=True)
    epoch_time_s = _num(description="s")
    round_time_s = _num(description="s for the round's epochs")
    round_time_s_low = _num(description="s, lower bound of the interval")
    round_time_s_high = _num(description="s, upper bound (the per-epoch bound times the epochs, widened by the "
                                         "device's run-to-run spread, as `time_to_accuracy_s_high`); the deadline "
                                         "is met when it is at most `deadline_s`")
    avg_power_w = _num(description="W, mean module power while training")
    avg_power_w_low = _num(description="W, lower bound of the interval")
    avg_power_w_high = _num(description="W, upper bound of the interval")
    train_energy_j = _num(description="J training the round's epochs")
    train_energy_j_low = _num(description="J, lower bound of the training energy's interval")
    train_energy_j_high = _num(description="J, upper bound of the training energy's interval")
    energy_j = _num(description="J for the round's epochs: training + idle until the deadline")
    idle_energy_j = _num(description="J idle until the deadline")
    meets_deadline = fields.Boolean(required=True)
    cross_device = fields.Boolean(allow_none=True)
    power_source = fields.String(allow_none=True, metadata={
        "description": "workload | reference: whose rows the power figures rest on"})
    rows_device = fields.String(allow_none=True, metadata={
        "description": "the device whose rows serve this client: its own device, or the one transferred from"})
    own_rows = fields.Boolean(allow_none=True, metadata={
        "description": "true when the workload holds rows of this client's device"})
    # Each client's own provenance: the plan's top level is the least trusted over all its devices.
    reference_source = fields.String(metadata={
        "description": "published|measured|simulated: the reference sweeps this client's figures rest on"})
    workload_source = fields.String(metadata={
        "description": "published|measured|simulated: the workload rows that serve this client's device"})
    split_source = split_source_field("this client's")
    profiled_modes = fields.Integer(metadata={"description": "profiled modes of the rows that serve this client"})
    model_version = fields.String()
    extrapolated_knobs = fields.String(metadata={"description": "knobs outside the profiled range ('' if none)"})
    aliased_knobs = aliased_knobs_field("; of the fit that serves this client")
    rows_scatter_rel = rows_scatter_field("; of the fit that serves this client")
    reason = fields.String(allow_none=True)


class FleetPlanSchema(ModelProvenanceSchema):
    workload_id = fields.String(allow_none=True)
    # One plan rests on the rows of every client device (predictor.service.fleet_provenance).
    workload_source = fields.String(metadata={
        "description": "published|measured|simulated: the least trusted of the rows that serve the clients' "
                       "devices"})
    split_source = split_source_field("any client's", required=True)
    profiled_modes = fields.Integer(required=True, metadata={
        "description": "the fewest profiled modes among the rows that serve the clients' devices"})
    workload_devices = fields.List(fields.String(), metadata={
        "description": "the devices the workload holds rows of"})
    feasible = fields.Boolean(required=True)
    total_energy_j = _num(description="J, the clients that meet the deadline; null when none does")
    deadline_s = fields.Float(required=True)
    epochs = fields.Integer(required=True)
    confidence = fields.Float(required=True, metadata={"description": "coverage of the intervals"})
    clients = fields.List(fields.Nested(FleetClientPlanSchema), required=True)
    infeasible_clients = fields.List(fields.String(), required=True)
    confidence_note = fields.String(allow_none=True, metadata={
        "description": "why the real measurements the intervals are calibrated on do not back the confidence "
                       "for this plan (simulated rows, devices crossed above the default level); null when they do"})
