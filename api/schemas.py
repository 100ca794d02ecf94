"""Marshmallow schemas: they validate requests and, through flask-smorest, write ``/openapi.json``.

Request bodies reject unknown fields (a typo is an error, not silently ignored). Profile rows are the
exception: their fields are documented here, but they are checked by
:func:`models.profile_rows.validate_records`, which reports every problem with its row number
(``rows.<i>.<field>``, ``i`` the 0-based index) and lets extra columns pass through. Here each known cell
is checked against its documented JSON type first: a JSON body carries numbers as JSON numbers (the CSV
readers of the CLI parse text cells; a JSON request that sends ``"8"`` breaks the document and is a 422,
which names the rows' other problems too, in the CLI's words).
"""

from __future__ import annotations

import math
import re

from jetpredict.api.config import DEFAULT_INLINE_ROWS_WITHOUT_KEY, HEADER_TOKEN_CHARS, MAX_WORKLOAD_ID_CHARS
from jetpredict.api.list_fields import BoundedList
from jetpredict.api.row_problems import value_problems
from jetpredict.models.catalogue import MODE_FIELDS, device_ids, load_device
from jetpredict.models.profile_rows import (
    FIELDS,
    MAX_TIME_S,
    PASS_THROUGH_COLUMNS,
    PASS_THROUGH_NUMBERS,
    SOURCE_KINDS,
)
from jetpredict.models.reader_limits import MAX_CELL_CHARS
from jetpredict.predictor.constants import LACK_OF_FIT_REL
from jetpredict.predictor.limits import SPLIT_SOURCES
from marshmallow import (
    EXCLUDE,
    RAISE,
    Schema,
    ValidationError,
    fields,
    pre_load,
    validate,
    validates_schema,
)

#: Profile rows one request may carry (an upload, or inline rows of a prediction); a file read by the
#: command line has its own cap, models.reader_limits.MAX_ROWS.
MAX_REQUEST_ROWS = 10_000
MAX_IDEMPOTENCY_KEY_CHARS = 200
#: The header naming an upload, so that a retry is stored once.
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: What an Idempotency-Key header of other characters than HEADER_TOKEN_CHARS (visible ASCII) is told.
IDEMPOTENCY_KEY_RULE = "must be printable ASCII without spaces (e.g. a UUID)"
#: A round deadline longer than this (10 years, s) is a typo; the bound keeps every sum finite.
MAX_DEADLINE_S = 10 * 365 * 86400.0
#: Power and epoch-time caps above these (W, s) constrain nothing; the bound keeps the schema tight.
MAX_POWER_CAP_W = 10_000.0
MAX_TIME_CAP_S = MAX_TIME_S  # the longest epoch a profile row may hold
#: Power modes in one page of ``GET /v1/devices/{id}/power-modes`` (the client's ``iter_power_modes`` asks
#: for this many).
MAX_POWER_MODES_PAGE = 10_000
MAX_OFFSET = 2**31 - 1  # paging offsets go to SQL as 64-bit integers; keep them far inside
#: Items in a page of a listing (power modes, workloads) when the request does not say.
DEFAULT_PAGE_SIZE = 100
#: JSON answer layouts of POST /v1/predictions (api.answers).
LAYOUTS = ("rows", "columns")


def _catalogue_ranges() -> dict[str, tuple[float, float]]:
    """Per knob, the union of the catalogue devices' ranges (each device's own range is checked later)."""
    ranges = [load_device(d).knob_ranges() for d in device_ids()]
    return {k: (min(r[k][0] for r in ranges), max(r[k][1] for r in ranges)) for k in MODE_FIELDS}


CATALOGUE_RANGES = _catalogue_ranges()
#: No database stores NUL. Unpaired surrogates are refused too, but a pattern cannot say so: generators
#: (hypothesis, schemathesis) cannot draw from a class that names them, and UTF-8 cannot carry them.
_TEXT_OUT = r"\x00"
#: What the server strips from a cell (Python's white space, \x1c-\x1f among it): only these = blank.
_BLANK = r"\s\x1c-\x1f"
#: Text that every database stores: no NUL (and, unsaid by the pattern, no unpaired surrogate).
TEXT_PATTERN = rf"^[^{_TEXT_OUT}]*$"
#: Required text: storable, and not blank (the server strips cells; a blank required cell is missing).
REQUIRED_TEXT_PATTERN = rf"^[^{_TEXT_OUT}]*[^{_BLANK}{_TEXT_OUT}][^{_TEXT_OUT}]*$"
#: What a required text field says when it breaks REQUIRED_TEXT_PATTERN.
REQUIRED_TEXT_RULE = "must not be blank or contain a NUL character"
#: A UTF-16 surrogate code point: JSON's ``\\ud800`` escapes decode to one, which neither UTF-8 (CSV and
#: Arrow answers, PostgreSQL) nor SQLite's text can carry.
UNPAIRED_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as text in every database (NUL, unpaired surrogates), or None."""
    if "\x00" in text:
        return "must not contain a NUL character"
    if UNPAIRED_SURROGATE.search(text):
        return "must be valid Unicode (it holds an unpaired surrogate)"
    return None


def storable_text(text: str) -> None:
    """marshmallow validator of a free-text field: :func:`text_problem` as the field's 422 message (text
    that every database stores and every answer format, CSV and Arrow too, can encode)."""
    if problem := text_problem(text):
        raise ValidationError(problem)
#: Characters no workload id holds, as the body of a regex class: '/' and '\\' (an id is one URL path
#: segment) and control characters. Uploads, lookups and searches all use this one definition.
ID_CHARS_OUT = r"/\\\x00-\x1f\x7f"
#: A workload id: what uploads accept (no '/', '\\', control characters; not blank), as a JSON-schema pattern.
WORKLOAD_ID_PATTERN = rf"^[^{ID_CHARS_OUT}]*[^{_BLANK}{ID_CHARS_OUT}][^{ID_CHARS_OUT}]*$"
#: What a workload id field says when it breaks WORKLOAD_ID_PATTERN.
WORKLOAD_ID_RULE = "must not be blank or contain '/', '\\' or control characters"
#: A row's ``source``: blank, or text that starts with one of SOURCE_KINDS (any case) after white space.
_ANY_CASE_KINDS = "|".join("".join(f"[{c.upper()}{c}]" for c in kind) for kind in SOURCE_KINDS)
SOURCE_PATTERN = rf"^[{_BLANK}]*(?:(?:{_ANY_CASE_KINDS})[^{_TEXT_OUT}]*)?$"


class _JsonNumbersOnly:
    """Mixin of a marshmallow number field: text and booleans are refused with the field's ``invalid``
    message (marshmallow loads numeric text, and ``True`` is an int to Python)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str | bool):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class JsonNumber(_JsonNumbersOnly, fields.Float):
    """A number field of a JSON body: a JSON number only. marshmallow's Float also loads numeric text
    (``"1e5"``) and the document says ``type: number``, so text is refused as the document says."""

    default_error_messages = {"invalid": "must be a number (a JSON number, not text or a boolean)"}


class JsonInteger(_JsonNumbersOnly, fields.Integer):
    """A whole-number field of a JSON body: a JSON number with no fraction (``3`` or ``3.0``, as JSON
    Schema's ``integer``; not ``"3"``, ``3.5`` or ``true``), refused in the words :class:`JsonNumber` uses
    rather than marshmallow's "Not a valid integer."."""

    default_error_messages = {"invalid": "must be a whole number (a JSON number, not text or a boolean)"}

    def __init__(self, **kwargs) -> None:
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # a client that builds bodies from float columns sends 4.0 for 4
        return super()._deserialize(value, attr, data, **kwargs)


def positive_float(maximum: float, description: str, **kwargs) -> JsonNumber:
    """A number in (0, maximum]; the document says "exclusive" too (apispec leaves that out of Range)."""
    return JsonNumber(validate=validate.Range(0, maximum, min_inclusive=False),
                      metadata={"description": description, "exclusiveMinimum": True}, **kwargs)


class RequestSchema(Schema):
    # A body or nested object of another JSON type (a list, a string): say what was expected, where
    # marshmallow's own message ("Invalid input type.") names no rule.
    error_messages = {"type": "must be a JSON object"}

    class Meta:
        unknown = RAISE


class QuerySchema(RequestSchema):
    """A route's query parameters (``location="query"`` on :class:`api.routes.common.Blueprint`, whose parser
    keeps this schema's RAISE): an unknown parameter and a
    repeated one (``?limit=1&limit=2``, of which webargs would keep the first) are refused, each by name."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        known = ", ".join(sorted(f.data_key or name for name, f in self.load_fields.items()))
        self.error_messages = {**self.error_messages, "unknown": f"unknown parameter; this route takes {known}"}

    @pre_load
    def _each_once(self, data, **kwargs):
        getlist = getattr(data, "getlist", None)  # the query string's MultiDict (behind webargs' proxy)
        if getlist is not None:
            repeated = {key: ["given more than once; give it once"] for key in data if len(getlist(key)) > 1}
            if repeated:
                raise ValidationError(repeated)
        return data


def device_field(description: str = "catalogue device id", **kwargs) -> fields.String:
    return fields.String(validate=validate.OneOf(device_ids()),
                         metadata={"description": description, "example": "agx-xavier"}, **kwargs)


# -- errors ----------------------------------------------------------------------------------------
class ErrorSchema(Schema):
    code = fields.Integer(required=True, metadata={"description": "HTTP status code"})
    status = fields.String(required=True, metadata={"description": "HTTP status name"})
    message = fields.String(required=True, metadata={"description": "what went wrong, naming the field"})
    errors = fields.Dict(keys=fields.String(), values=fields.List(fields.String()), required=True,
                         metadata={"description": "messages per field path, e.g. rows.2.gpu_mhz"})


# -- service ---------------------------------------------------------------------------------------
class HealthSchema(Schema):
    status = fields.String(required=True, metadata={"example": "ok"})
    version = fields.String(required=True)
    database = fields.String(required=True, metadata={"description": "ok, or the reason it is not"})
    store = fields.String(metadata={"description": "ok, cannot write: disk full|read-only (uploads fail), or "
                                                   "unknown while the database is unreachable"})
    devices = fields.Integer(required=True, metadata={"description": "devices in the catalogue"})


# -- devices and power modes -----------------------------------------------------------------------
class DeviceSpecsSchema(Schema):
    name = fields.String()
    soc = fields.String()
    cpu_type = fields.String()
    cpu_cores = fields.Integer()
    gpu_arch = fields.String()
    gpu_sms = fields.Integer()
    cuda_cores = fields.Integer()
    tensor_cores = fields.Integer()
    memory_gb = fields.Float()
    memory_type = fields.String()
    memory_bus_bits = fields.Integer()
    peak_bandwidth_gbs = fields.Float()
    module_power_w = fields.Float()
    jetpack = fields.String()


class RangeSchema(Schema):
    min = fields.Float(required=True)
    max = fields.Float(required=True)


class DeviceSchema(Schema):
    id = fields.String(required=True)
    name = fields.String(required=True)
    specs = fields.Nested(DeviceSpecsSchema, required=True)
    default_preset = fields.String(required=True)
    presets = fields.Integer(required=True, metadata={"description": "number of nvpmodel presets"})
    power_modes = fields.Integer(required=True, metadata={"description": "size of the custom-mode space"})
    knob_ranges = fields.Dict(keys=fields.String(), values=fields.Nested(RangeSchema), required=True,
                              metadata={"description": "inclusive range of cpu_cores and CPU/GPU/EMC MHz"})
    sources = fields.Dict(keys=fields.String(), values=fields.String(), required=True, metadata={
        "description": "where the catalogue's facts come from: specs, steps (the frequency steps), presets "
                       "(the nvpmodel file); {} for a device whose file names none"})


class DeviceListSchema(Schema):
    devices = fields.List(fields.Nested(DeviceSchema), required=True)


class ModeSchema(Schema):
    """A power mode's label and knobs (cores; MHz), as in every table of modes."""

    mode = fields.String(required=True)
    cpu_cores = fields.Integer(required=True)
    cpu_mhz = fields.Float(required=True)
    gpu_mhz = fields.Float(required=True)
    emc_mhz = fields.Float(required=True)


#: Where an answer's fit caveats come from in a plan over several fits (``predictor.fit_check.merged_caveats``).
_MERGED_CAVEATS = ("; the fit the answer rests on (its `rows_device`'s rows, for inline rows the rows sent); a "
                   "fleet plan's top level takes every client's fit together (each client states its own)")


def aliased_knobs_field(more: str = "") -> fields.Dict:
    """The knobs whose effects the fit's profiled modes do not separate (``WorkloadModel.aliased_knobs``;
    ``predictor.fit_check.fit_caveats``); ``more``: words closing the description."""
    return fields.Dict(keys=fields.String(), values=fields.String(), allow_none=True, metadata={
        "description": "knob -> why ('not varied', 'moves with <knob>'): the profiled modes do not separate "
                       "its effect, so predictions along it rest on the reference (`jetpredict plan --after` "
                       "proposes a mode that does), as `jetpredict fit` says (aliased knobs); {} when none; "
                       "null for fits stored before it was kept. In CSV and Arrow answers one text, "
                       "'knob (why)' ';'-separated" + more})


def split_source_field(whose: str = "the answer's", more: str = "", **kw: object) -> fields.String:
    """``split_source`` (``predictor.provenance.split_source``) of an answer, a fit or a fleet plan's client."""
    return fields.String(**kw, metadata={
        "description": f"{'|'.join(SPLIT_SOURCES)}: whether {whose} fitted split of the epoch into stall "
                       "(CPU side) and compute, which sets how the predicted epoch follows each knob, rests on the "
                       "workload rows' own stall and compute columns, or on their epoch totals only (then the "
                       "split is the fitted terms' attribution, shaped by the reference workloads, and may be "
                       f"several times off){more}"})


def rows_scatter_field(more: str = "") -> fields.Float:
    """How far the fit's own profiled epoch times scatter about it (``predictor.fit_check.time_scatter``);
    ``more``: words closing the description."""
    return fields.Float(allow_none=True, metadata={
        # For tools (the page among them): the level as a number, not only inside the words.
        "x-jetpredict-warn-above": LACK_OF_FIT_REL,
        "description": "RMS of ln(predicted / measured epoch time) over the fitted rows; above "
                       f"{LACK_OF_FIT_REL:g} the model's form misses the workload there (more than run-to-run "
                       "noise explains: its intervals carry the scatter as noise, and modes far from the profiled "
                       "ones may be off by more), as `jetpredict fit` warns; null for fits stored before it was "
                       "kept" + more})


class ModelProvenanceSchema(Schema):
    """Where a fitted workload model's predictions come from."""

    reference_source = fields.String(required=True, metadata={
        "description": "published|measured|simulated: the least trusted reference sweeps the answer rests on "
                       "(across devices, those of the target device too)"})
    workload_source = fields.String(metadata={
        "description": "published|measured|simulated: where the workload's own profile rows came from "
                       "(simulated = the digital twin)"})
    split_source = split_source_field(required=True)
    profiled_modes = fields.Integer(required=True)
    model_version = fields.String(required=True)
    aliased_knobs = aliased_knobs_field(_MERGED_CAVEATS)
    rows_scatter_rel = rows_scatter_field(_MERGED_CAVEATS + " (the largest scatter)")


class PowerModeSchema(ModeSchema):
    nvpmodel_id = fields.Integer(allow_none=True, metadata={"description": "presets only"})
    power_budget_w = fields.Float(allow_none=True, metadata={"description": "presets only; null = uncapped"})
    gpu_share = fields.Float(metadata={
        "description": "presets only: share of the GPU's SMs the preset keeps powered (its nvpmodel TPC_PG_MASK "
                       "gates the rest; predictions run its kernels at that share of the clock); 1 = all"})


# -- profile rows and workloads --------------------------------------------------------------------
def _row_property(f) -> dict:
    kind = {str: "string", int: "integer", float: "number"}[f.kind]
    prop: dict = {"type": kind, "nullable": not f.required}
    if f.minimum is not None:
        prop["minimum"] = f.minimum
        if f.strict:
            prop["exclusiveMinimum"] = True
    if getattr(f, "maximum", None) is not None:
        prop["maximum"] = f.maximum
    if f.kind is str:
        # What the server enforces: required text is not empty; no cell is longer than the readers' limit.
        prop["maxLength"] = MAX_CELL_CHARS
        if f.required:
            prop["minLength"] = 1
    if f.kind is str:
        prop["pattern"] = REQUIRED_TEXT_PATTERN if f.required else TEXT_PATTERN
    if f.name == "workload":
        prop.update(pattern=WORKLOAD_ID_PATTERN, maxLength=MAX_WORKLOAD_ID_CHARS)
    if f.name == "source":
        prop.update(pattern=SOURCE_PATTERN, description=f"one of {', '.join(SOURCE_KINDS)}, then any text")
    if f.name == "device":
        prop["enum"] = list(device_ids())  # "host" rows are profiles, but cannot be fitted by the service
    if f.name in MODE_FIELDS:
        lo, hi = CATALOGUE_RANGES[f.name]
        prop.update(minimum=lo, maximum=hi)
        prop.pop("exclusiveMinimum", None)
    if f.unit:
        prop["description"] = f.unit
    return prop


def _pass_through_property(name: str, unit: str) -> dict:
    # Text columns are documented as "text: ..."; the others are numbers (CSV cells: scalars only).
    if unit.startswith("text"):
        return {"type": "string", "nullable": True, "pattern": TEXT_PATTERN, "maxLength": MAX_CELL_CHARS,
                "description": unit}
    return {**_row_property(PASS_THROUGH_NUMBERS[name]), "description": unit}


PROFILE_ROW_DOC = {
    "type": "object",
    "description": "one profile row (fields: models/profile_rows.py); null = unknown; numbers are JSON numbers "
                   "(text such as \"8\" is refused: only CSV files hold numbers as text); pass-through columns "
                   "kept, other columns rejected; text holds no NUL and no unpaired surrogate",
    "properties": {**{f.name: _row_property(f) for f in FIELDS},
                   **{name: _pass_through_property(name, unit) for name, unit in PASS_THROUGH_COLUMNS.items()}},
    "required": [f.name for f in FIELDS if f.required],
    # Only the documented pass-through columns may come along (uploads reject any other column).
    "additionalProperties": False,
}


#: The JSON type of each profile-row column a request may send ("number" for counts too), as the document
#: types them: FIELDS by kind, pass-through columns by their documented unit ("text: ..." or a number).
ROW_CELL_TYPES: dict[str, str] = {
    **{f.name: "string" if f.kind is str else "number" for f in FIELDS},
    **{name: "string" if unit.startswith("text") else "number" for name, unit in PASS_THROUGH_COLUMNS.items()}}
#: Cells of the wrong type named in one answer (then the rows after are not looked at, for any problem).
MAX_CELL_TYPE_ERRORS = 100
_ROW_UNITS = {**{f.name: f.unit for f in FIELDS}, **PASS_THROUGH_COLUMNS}


#: Non-finite floats as a JSON body spells them (Python's reader accepts these literals).
_JSON_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _cell_type_problem(name: str, value: object) -> str | None:
    """Why ``value`` is not of column ``name``'s JSON type (null is always allowed: unknown), or None."""
    if value is None:
        return None
    if ROW_CELL_TYPES[name] == "number":
        if isinstance(value, float) and not math.isfinite(value):
            # Python's JSON reader takes the non-JSON literals NaN and Infinity; null is the unknown value.
            return f"must be a finite number, got {_JSON_NON_FINITE[str(value)]}"
        if isinstance(value, int | float) and not isinstance(value, bool):
            return None
        unit = _ROW_UNITS[name].split(":")[0] or "count"
        # JSON rows carry numbers as numbers; text such as "8" is a CSV cell's form (CLI files only).
        what = "text" if isinstance(value, str) else type(value).__name__
        return f"must be a number ({unit}) or null, got {what} {value!r:.40}"
    if isinstance(value, str):
        return None
    return f"must be text or null, got {type(value).__name__} {value!r:.40}"


def _json_cell_types(rows: list) -> None:
    """Every known cell of a JSON row has the type the document gives it (or is null): a number given as
    text (``"1e5"``), a boolean, or NaN/Infinity is refused, naming ``rows.I.FIELD``. The same answer names
    the other problems of the rows looked at (:func:`api.row_problems.value_problems`), by row, so that one
    resend can mend them all. Without a cell of the wrong type, the rows are left to the row checks
    (:func:`api.client_rows.validate_client_rows`)."""
    errors: dict[int, dict[str, list[str]]] = {}
    found = looked_at = 0
    for looked_at, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            continue
        for name, value in row.items():
            problem = _cell_type_problem(name, value) if name in ROW_CELL_TYPES else None
            if problem:
                errors.setdefault(looked_at - 1, {})[name] = [problem]
                found += 1
        if found >= MAX_CELL_TYPE_ERRORS:  # a whole file of text cells: enough to show the rule, not 10**5
            break
    if not errors:
        return
    whole: list[str] = []  # problems of the rows as a whole (unknown columns not named one by one)
    for (index, name), messages in value_problems(rows[:looked_at]).items():
        if index is None:
            whole.extend(messages)
        elif name not in errors.get(index, {}):  # a cell of the wrong type is named by its type rule alone
            errors.setdefault(index, {})[name] = messages
    by_row = {index: errors[index] for index in sorted(errors)}
    # A list's strings are the rows field's own messages (``rows``), its dict the cells' (``rows.I.FIELD``).
    raise ValidationError([*whole, by_row] if whole else by_row)


def _rows_field(**kwargs) -> fields.List:
    # Raw items: the row checks (with row numbers) are validate_records'; the doc still shows the fields.
    return BoundedList(fields.Raw(metadata=PROFILE_ROW_DOC), noun="rows",
                       validate=[validate.Length(1, MAX_REQUEST_ROWS), _json_cell_types], **kwargs)


class WorkloadIdField(fields.String):
    """A stored workload's id as its upload stored it: the rows' workload cell, which is stripped like every
    text cell (``models.profile_rows``), so ``" x "`` finds the workload an upload of ``" x "`` stored."""

    def _deserialize(self, value, attr, data, **kwargs):
        text = super()._deserialize(value, attr, data, **kwargs)
        return text.strip() or text  # a blank id stays blank, for the rule's own message


class WorkloadRefSchema(RequestSchema):
    """Exactly one of ``id`` or ``rows`` (the OpenAPI document says so with min/maxProperties 1)."""

    id = WorkloadIdField(validate=[validate.Length(1, MAX_WORKLOAD_ID_CHARS),
                                 validate.Regexp(WORKLOAD_ID_PATTERN, error=WORKLOAD_ID_RULE), storable_text],
                       metadata={"description": "a stored workload"})
    rows = _rows_field(metadata={"description": "inline profile rows of one workload on one device; the rows "
                                 "are the workload, so their workload cells are labels and are fitted together. "
                                 f"Without X-API-Key at most {DEFAULT_INLINE_ROWS_WITHOUT_KEY} rows (the "
                                 "server's JETPREDICT_INLINE_ROWS_WITHOUT_KEY; 413 beyond), with a key up to "
                                 f"{MAX_REQUEST_ROWS}"})

    @validates_schema
    def _exactly_one(self, data, **kwargs) -> None:
        if ("id" in data) == ("rows" in data):
            raise ValidationError("give exactly one of id (stored workload) or rows (inline)", "_schema")


class ProfileUploadSchema(RequestSchema):
    rows = _rows_field(required=True)


class UploadHeadersSchema(Schema):
    """Headers of ``POST /v1/profiles`` (others, such as X-API-Key, are left alone)."""

    class Meta:
        unknown = EXCLUDE

    idempotency_key = fields.String(
        data_key=IDEMPOTENCY_HEADER, validate=[validate.Length(1, MAX_IDEMPOTENCY_KEY_CHARS),
                                              validate.Regexp(f"^[{HEADER_TOKEN_CHARS}]+$", error=IDEMPOTENCY_KEY_RULE)],
        metadata={"description": "any printable ASCII token (e.g. a UUID) naming this upload: a retry with "
                  "the same key and body is stored once and answered with the original result"})


class UploadedWorkloadSchema(ModelProvenanceSchema):
    """What an upload did to one workload."""

    workload_id = fields.String(required=True)
    rows_stored = fields.Integer(required=True, metadata={
        "description": "rows stored in this workload by this upload (0 in a retry for a workload that "
                       "still holds them)"})
    rows_total = fields.Integer(required=True, metadata={"description": "rows of the workload in all"})
    revision = fields.Integer(required=True, metadata={
        "description": "uploads that stored rows in this workload so far; an id uploaded again after a delete "
                       "counts on from the deleted workload's revision, so one revision never names two states"})
    device = fields.String(required=True, metadata={"description": "the device of the uploaded rows"})
    has_power = fields.Boolean(required=True)
    devices = fields.List(fields.String(), metadata={
        "description": "every device the workload holds rows of (each is fitted on its own rows)"})


class UploadResultSchema(UploadedWorkloadSchema):
    """The first workload of the upload (as a single-workload upload always answered), and all of them."""

    workloads = fields.List(
        fields.Nested(UploadedWorkloadSchema), required=True, validate=validate.Length(min=1),
        metadata={"description": "every workload of the upload, in the order of their first row; the first "
                  "is the one described beside this list"})


class StoredFitSchema(Schema):
    """A fit's summary (``api.storage.FIT_FIELDS``) as the running model makes it: one stored by another
    model version is refitted (a listing starts no refit after ``api.workloads.LISTING_REFIT_S`` and shows the
    rest as stored, ``model_version`` the older one); null where the running model's checks refuse the stored
    rows (predictions then answer 422 naming why)."""

    reference_source = fields.String(allow_none=True)
    workload_source = fields.String(allow_none=True, metadata={
        "description": "published|measured|simulated: where the fitted rows came from"})
    split_source = split_source_field(allow_none=True, more="; null where today's checks refuse the stored rows, "
                                      "or in a listing's stale fit from before fits kept it (model_version tells)")
    profiled_modes = fields.Integer(allow_none=True)
    model_version = fields.String(allow_none=True, metadata={
        "description": "the model version that fitted it; in a listing right after an upgrade, maybe an older one "
                       "(refitted by a later listing, the workload's own page or a prediction)"})
    has_power = fields.Boolean(allow_none=True)
    aliased_knobs = aliased_knobs_field()
    rows_scatter_rel = rows_scatter_field()


class DeviceFitSchema(StoredFitSchema):
    """The fit of a workload's rows of one device."""

    device = fields.String(required=True)
    rows = fields.Integer(allow_none=True, metadata={"description": "rows of this device"})


class WorkloadSchema(StoredFitSchema):
    id = fields.String(required=True)
    device = fields.String(required=True, metadata={
        "description": "the device of its first rows (the default device of requests)"})
    devices = fields.List(fields.String(), metadata={
        "description": "every device it holds rows of; a request for another device transfers from one"})
    fits = fields.List(fields.Nested(DeviceFitSchema), metadata={"description": "the fit of each device's rows"})
    revision = fields.Integer(required=True)
    rows_stored = fields.Integer(required=True)
    created_at = fields.String(required=True, metadata={"format": "date-time"})
    updated_at = fields.String(required=True, metadata={"format": "date-time"})


class WorkloadDetailSchema(WorkloadSchema):
    rows = fields.List(fields.Dict(), required=True, metadata={"description": "the stored profile rows"})


class PageQuerySchema(QuerySchema):
    limit = fields.Integer(load_default=DEFAULT_PAGE_SIZE, validate=validate.Range(1, 1000))
    offset = fields.Integer(load_default=0, validate=validate.Range(0, MAX_OFFSET))


class WorkloadListSchema(Schema):
    total = fields.Integer(required=True)
    limit = fields.Integer(required=True)
    offset = fields.Integer(required=True)
    workloads = fields.List(fields.Nested(WorkloadSchema), required=True)


EXAMPLE_ROWS = [
    {"device": "agx-xavier", "workload": "my-resnet", "mode": m, "cpu_cores": c, "cpu_mhz": 1200,
     "gpu_mhz": g, "emc_mhz": e, "num_workers": 4, "batch_size": 16, "minibatches_per_epoch": 3125,
     "epoch_time_s": t, "avg_power_w": None, "epoch_energy_j": None, "source": "measured"}
    for m, c, g, e, t in (("a", 4, 670, 1333, 668.3), ("b", 8, 670, 1333, 660.2), ("c", 8, 900, 1333, 518.6),
                          ("d", 8, 900, 1600, 509.8))]
EXAMPLE_WORKLOAD = {"id": "my-resnet"}
PREDICTION_EXAMPLE = {"device": "agx-xavier", "workload": EXAMPLE_WORKLOAD, "modes": "presets"}
RECOMMENDATION_EXAMPLE = {"workload": EXAMPLE_WORKLOAD, "objective": "min-energy",
                          "constraints": {"max_power_w": 15}}
FLEET_EXAMPLE = {"workload": EXAMPLE_WORKLOAD, "deadline_s": 3600, "epochs": 1,
                 "clients": [{"id": "c1", "device": "agx-xavier"}, {"id": "c2", "device": "agx-xavier"}]}
UPLOAD_EXAMPLE = {"rows": EXAMPLE_ROWS}
