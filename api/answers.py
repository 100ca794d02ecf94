"""Prediction answers on the wire: JSON rows (the default), compact JSON columns, CSV and Apache Arrow.

One :class:`predictor.service.PredictionAnswer` is rendered by :func:`encode` in the form the client
asked for (:func:`answer_format`): ``layout: "columns"`` in the body for columnar JSON, ``Accept:
text/csv`` for CSV, ``Accept: application/vnd.apache.arrow.stream`` for an Arrow IPC stream; gzip when
``Accept-Encoding`` allows it (Arrow too: its zstd buffers still shrink). The compact forms state
per-answer constants once and round predicted values to :data:`COMPACT_DIGITS` significant digits
(Arrow: float32, about 7 digits); the intervals are percent-wide, so the dropped digits are noise. The
shapes are described in ``api/README.md``. With pyarrow installed, the numbers of large CSV and columns
answers are written by Arrow (:func:`arrow_repr_texts`): the same bytes in about half the time, outside
the GIL.
"""

from __future__ import annotations

import gzip
import io
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache

import numpy as np
from flask import Response, request
from jetpredict.api.errors import ApiError
from jetpredict.api.heavy import Encoded
from jetpredict.models.csv_text import csv_text_cell
from jetpredict.models.jsonsafe import json_safe
from jetpredict.predictor.limits import PROVENANCE_FIELDS
from jetpredict.predictor.service import PROVENANCE_COLUMNS, PredictionAnswer
from werkzeug.datastructures import MIMEAccept
from werkzeug.http import parse_accept_header

JSON_MIMETYPE = "application/json"
CSV_MIMETYPE = "text/csv"
ARROW_MIMETYPE = "application/vnd.apache.arrow.stream"
#: Answer forms: JSON rows, JSON columns, CSV, Arrow.
ANSWER_FORMS = ("rows", "columns", "csv", "arrow")
#: Significant digits of predicted values in the compact forms (columns JSON, CSV).
COMPACT_DIGITS = 6
#: Bodies shorter than this (bytes) are sent as they are: gzip would save less than its header costs.
GZIP_MIN_BYTES = 1024
#: zlib level: level 1 compresses the compact forms to about half of what level 9 gets in 1/8 of the time.
GZIP_LEVEL = 1
#: Items converted per slice in the encoders (~0.5 ms of GIL at a time; see _chunks).
GIL_CHUNK = 2048
#: Answers of at most this many modes are encoded row by row (the per-column path pays off beyond).
SMALL_ANSWER_MODES = 256
#: What the client may send in Vary terms: the answer depends on these request headers.
VARY = "Accept, Accept-Encoding"


def arrow_available() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def answer_format(layout: str = "rows") -> str:
    """The form to answer in: ``Accept`` picks CSV or Arrow over JSON; ``layout`` picks JSON rows or
    columns. 406 for Arrow when pyarrow is not installed."""
    best = _best_mimetype(request.headers.get("Accept", ""))
    if best == CSV_MIMETYPE:
        return "csv"
    if best == ARROW_MIMETYPE:
        if not arrow_available():
            raise ApiError(406, f"{ARROW_MIMETYPE} needs pyarrow on the server (pip install "
                           "'jetpredict[arrow]'); ask for application/json or text/csv",
                           {"Accept": [f"{ARROW_MIMETYPE} is not available on this server: pyarrow is not "
                                       "installed"]})
        return "arrow"
    return "columns" if layout == "columns" else "rows"


def accepts_gzip() -> bool:
    return _gzip_quality(request.headers.get("Accept-Encoding", "")) > 0


# Clients send a handful of distinct Accept headers; parsing one costs ~30 us, a request ~250 us.
@lru_cache(maxsize=256)
def _best_mimetype(accept: str) -> str | None:
    return parse_accept_header(accept, MIMEAccept).best_match([JSON_MIMETYPE, CSV_MIMETYPE, ARROW_MIMETYPE])


@lru_cache(maxsize=256)
def _gzip_quality(accept_encoding: str) -> float:
    return parse_accept_header(accept_encoding)["gzip"]


def round_significant(values: object, digits: int = COMPACT_DIGITS) -> np.ndarray:
    """``values`` rounded to ``digits`` significant digits (zeros and non-finite values as they are)."""
    a = np.array(values, dtype=float)
    finite = np.isfinite(a) & (a != 0.0)
    if finite.any():
        v = a[finite]
        scale = 10.0 ** (digits - 1 - np.floor(np.log10(np.abs(v))))
        a[finite] = np.round(v * scale) / scale
    return a


def _compact_list(values: object) -> list:
    """A column as JSON-ready Python values; floats rounded, NaN/inf as None."""
    array = np.asarray(values)
    if array.dtype.kind != "f":
        return array.tolist()
    rounded = round_significant(array)
    if np.isfinite(rounded).all():
        return rounded.tolist()
    out = rounded.astype(object)
    out[~np.isfinite(rounded)] = None
    return out.tolist()


#: Encoded columns of immutable inputs (the cached catalogue tables: mode labels as a tuple, read-only knob
#: arrays), by identity: every answer for every mode of a device repeats them.
_FRAGMENTS: OrderedDict[tuple[int, str], tuple[object, object]] = OrderedDict()
_FRAGMENTS_KEPT = 64
_fragments_lock = threading.Lock()


def _fragment(values: object, form: str, make: Callable[[object], object]) -> object:
    """``make(values)``, remembered while ``values`` is an immutable table column (a tuple, a read-only
    array); the entry holds ``values`` itself, so its id cannot be reused while it is kept."""
    if not (isinstance(values, tuple) or (isinstance(values, np.ndarray) and not values.flags.writeable)):
        return make(values)
    key = (id(values), form)
    with _fragments_lock:
        hit = _FRAGMENTS.get(key)
        if hit is not None and hit[0] is values:
            _FRAGMENTS.move_to_end(key)
            return hit[1]
    out = make(values)
    with _fragments_lock:
        _FRAGMENTS[key] = (values, out)
        while len(_FRAGMENTS) > _FRAGMENTS_KEPT:
            _FRAGMENTS.popitem(last=False)
    return out


def _dumps(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def _top(answer: PredictionAnswer) -> dict[str, object]:
    return json_safe(answer.header())


def _memo(make: Callable[[object], str]) -> Callable[[object], str]:
    """``make`` remembered per distinct value within one column (labels and knob lists repeat)."""
    memo: dict[object, str] = {}

    def cell(value: object) -> str:
        out = memo.get(value)
        if out is None:
            out = memo[value] = make(value)
        return out

    return cell


def _json_cells(values: object) -> list[str]:
    """A column as JSON texts at full precision (what json.dumps writes; NaN/inf as null)."""
    if isinstance(values, list | tuple):
        return list(map(_memo(json.dumps), values))
    array = np.asarray(values)
    if array.dtype.kind == "f":
        return _float_cells(array, "null")  # float.__repr__ is json.dumps's float text
    if array.dtype.kind == "b":
        return np.where(array, "true", "false").tolist()
    if array.dtype.kind in "iu":
        return list(map(str, array.tolist()))
    return list(map(_memo(lambda v: json.dumps(json_safe(v))), array.tolist()))


def rows_json(answer: PredictionAnswer) -> bytes:
    """The default answer: provenance at the top, one object per mode (full precision), the same text as
    ``json.dumps`` of :meth:`PredictionAnswer.records` but built per column (a 29k-mode answer in a
    fraction of the time)."""
    if answer.count <= SMALL_ANSWER_MODES:
        return _dumps({**_top(answer), "predictions": answer.records()})
    top = _dumps(_top(answer))[:-1].decode()
    constants = "".join(f",{json.dumps(k)}:{json.dumps(json_safe(v), allow_nan=False)}"
                        for k, v in answer.constants.items())
    # One str.format template per answer: keys and constants literal, the per-mode cells as fields.
    template = ("{{" + ",".join(f"{json.dumps(name)}:{{}}" for name in answer.columns)
                + constants.replace("{", "{{").replace("}", "}}") + "}}")
    cells = [_fragment(values, "json-cells", _json_cells) for values in answer.columns.values()]
    body = ",".join(template.format(*row) for row in zip(*cells, strict=True))
    return f'{top},"predictions":[{body}]}}'.encode()


def _chunks(items: list, size: int = GIL_CHUNK) -> Iterator[list]:
    """``items`` in slices: C-level conversions of whole 29k-item columns (json.dumps, map(repr)) hold the
    GIL for milliseconds; between slices other threads (light requests) get it."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _json_column(values: object) -> str:
    items = _compact_list(values)
    return "[" + ",".join(json.dumps(part, separators=(",", ":"), allow_nan=False)[1:-1]
                          for part in _chunks(items) if part) + "]"


def _float_cells(array: np.ndarray, missing: str) -> list[str]:
    """``repr`` of every float, a slice at a time (see :func:`_chunks`); ``missing`` for NaN and inf."""
    cells: list[str] = []
    for part in _chunks(array.tolist()):
        cells.extend(map(repr, part))
    for i in np.flatnonzero(~np.isfinite(array)):
        cells[i] = missing
    return cells


def _json_floats_arrow(values: object) -> str:
    """A float column as :func:`_json_column` writes it, the texts made and joined by Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = pc.fill_null(_float_texts(round_significant(values)), "null")
    one = pa.ListArray.from_arrays(pa.array([0, len(texts)], pa.int32()), texts)
    return "[" + pc.binary_join(one, ",")[0].as_py() + "]"


def columns_json(answer: PredictionAnswer) -> bytes:
    """Compact JSON: provenance and per-answer constants at the top, ``columns``: name -> list of values."""
    top = _dumps({**_top(answer), **json_safe(dict(answer.constants)), "layout": "columns"})[:-1].decode()
    by_arrow = answer.count > SMALL_ANSWER_MODES and arrow_repr_texts()

    def column(values: object) -> str:
        if by_arrow and isinstance(values, np.ndarray) and values.dtype.kind == "f":
            return _fragment(values, "json-arrow", _json_floats_arrow)
        return _fragment(values, "json", _json_column)

    columns = ",".join(f"{json.dumps(name)}:{column(values)}" for name, values in answer.columns.items())
    return f'{top},"columns":{{{columns}}}}}'.encode()


def _csv_cells(values: object) -> list[str]:
    """A column as CSV cells: floats to COMPACT_DIGITS (unknown = empty), booleans as True/False."""
    if isinstance(values, list | tuple):
        return list(map(_memo(csv_text_cell), values))
    array = np.asarray(values)
    if array.dtype.kind == "f":
        return _float_cells(round_significant(array), "")
    if array.dtype.kind == "b":
        return np.where(array, "True", "False").tolist()
    if array.dtype.kind in "iu":
        return list(map(str, array.tolist()))
    return list(map(_memo(csv_text_cell), array.tolist()))


#: Magnitudes where Arrow's float-to-text cast writes the digits and notation of Python's ``repr`` (whole
#: numbers aside: Arrow leaves out the ".0"); the few values outside get ``repr`` itself. Arrow switches to
#: exponent notation from about 1e10 (and to positional below 1e-4) where repr does at 1e16 (and below 1e-4).
ARROW_REPR_RANGE = (1e-4, 1e9)
#: Values whose text the Arrow path must write as repr does, checked once before that path is used.
_REPR_PROBE = (0.0, -0.0, 1.0, -2.5, 0.1, 1e-4, 9.99999e-5, 123456.0, 668.312, 999999999.9, 1e9, 1.5e-5, 1e16,
               12345.678901234567, 1234567.0)


@lru_cache(maxsize=1)
def arrow_repr_texts() -> bool:
    """Whether pyarrow is installed and its float texts (:func:`_float_texts`) equal ``repr`` on the probe
    values: then the CSV answer is written by Arrow, else in Python (the same bytes, slower)."""
    if not arrow_available():
        return False
    probe = np.array(_REPR_PROBE)
    return _float_texts(probe).to_pylist() == [repr(v) for v in probe.tolist()]


def _float_texts(array: np.ndarray):  # -> pyarrow.StringArray
    """``repr`` of every float as an Arrow string array, vectorised (~4x faster than repr); NaN/inf null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    finite = np.isfinite(array)
    texts = pc.cast(pa.array(array, mask=~finite), pa.string())
    texts = pc.if_else(pa.array(finite & (np.floor(array) == array)),
                       pc.binary_join_element_wise(texts, ".0", ""), texts)
    magnitude = np.abs(array)
    low, high = ARROW_REPR_RANGE
    other = finite & (array != 0.0) & ((magnitude < low) | (magnitude >= high))
    if other.any():
        texts = pc.replace_with_mask(texts, pa.array(other),
                                     pa.array([repr(v) for v in array[other].tolist()], pa.string()))
    return texts


def _csv_array(values: object):  # -> pyarrow.StringArray
    """A column as CSV cells in an Arrow string array, the texts of :func:`_csv_cells` (unknown = null)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, list | tuple):
        return pa.array(list(map(_memo(csv_text_cell), values)), pa.string())
    array = np.asarray(values)
    if array.dtype.kind == "f":
        return _float_texts(round_significant(array))
    if array.dtype.kind == "b":
        return pc.if_else(pa.array(array), "True", "False")
    if array.dtype.kind in "iu":
        return pc.cast(pa.array(array), pa.string())
    return pa.array(list(map(_memo(csv_text_cell), array.tolist())), pa.string())


def _csv_lines_arrow(columns: Mapping[str, object], tail: str) -> bytes:
    """The data lines of the CSV answer, each the row's cells then ``tail``, joined by Arrow (GIL released)."""
    import pyarrow.compute as pc

    cells = [_fragment(values, "csv-arrow", _csv_array) for values in columns.values()]
    lines = pc.binary_join_element_wise(*cells, tail, ",", null_handling="replace", null_replacement="")
    offsets, data = lines.buffers()[1:]
    ends = np.frombuffer(offsets, np.int32)[lines.offset:lines.offset + len(lines) + 1]
    return memoryview(data)[ends[0]:ends[-1]].tobytes()


def _one_text(value: object) -> object:
    """A list or mapping as one ';'-separated text (``key (value)`` per entry, as ``jetpredict fit`` names
    aliased knobs); any other value as it is."""
    if isinstance(value, Mapping):
        return ";".join(f"{k} ({v})" for k, v in value.items())
    return ";".join(map(str, value)) if isinstance(value, list | tuple) else value


def answer_wide(answer: PredictionAnswer) -> dict[str, object]:
    """The answer's one-value fields that the CSV and Arrow forms repeat on every row, in column order: those
    of ``predict --format csv`` (:data:`predictor.service.PROVENANCE_COLUMNS`, the service's further
    provenance after :data:`~predictor.limits.PROVENANCE_FIELDS`), then the device the answer is
    for and the workload id (the JSON form carries them at the top: a saved table says them too). A list
    (workload_devices) is one text, ';'-separated; so is a mapping (aliased_knobs), as ``key (value)``."""
    # The service's provenance fields stand where the predictor's table has them, the API's own (the
    # workload's devices, revision) right after them.
    at = PROVENANCE_COLUMNS.index(PROVENANCE_FIELDS[-1]) + 1
    more = tuple(k for k in answer.provenance if k not in PROVENANCE_COLUMNS)
    one_value = answer.one_value_fields()
    wide = {c: _one_text(one_value[c]) for c in (*PROVENANCE_COLUMNS[:at], *more, *PROVENANCE_COLUMNS[at:])}
    return json_safe({**wide, "device": answer.device, "workload_id": answer.workload_id})


def csv_text(answer: PredictionAnswer) -> bytes:
    """The per-mode columns, then :func:`answer_wide`'s, text cells made safe for spreadsheets by the CLI's
    rule (:func:`models.csv_text.csv_text_cell`)."""
    constants = answer_wide(answer)
    names = [*answer.columns, *constants]
    # The constant columns close every line: one text, repeated.
    tail = ",".join(map(csv_text_cell, constants.values())) + "\n"
    header = ",".join(map(csv_text_cell, names)) + "\n"
    if answer.count > SMALL_ANSWER_MODES and arrow_repr_texts():
        return header.encode() + _csv_lines_arrow(answer.columns, tail)
    cells = [_fragment(values, "csv", _csv_cells) for values in answer.columns.values()]
    lines = [header]
    lines.extend(f"{row},{tail}" for row in map(",".join, zip(*cells, strict=True)))
    return "".join(lines).encode()


#: Arrow types of the one-value fields that may be unknown (null): an inline workload's revision, a count,
#: or the scatter of a fit that has none; every other such field is text, typed as known text is so that
#: answers' tables concatenate.
_ARROW_NULL_TYPES = {"revision": "int64", "profiled_modes": "int64", "rows_scatter_rel": "float64"}


def _constant_array(name: str, value: object, n: int):  # -> pyarrow.Array
    """``value`` repeated ``n`` times: text dictionary-encoded (one entry, int32 indices), null typed by
    :data:`_ARROW_NULL_TYPES` or else as text."""
    import pyarrow as pa

    text = pa.dictionary(pa.int32(), pa.string())
    if value is None:
        return pa.nulls(n, pa.type_for_alias(_ARROW_NULL_TYPES[name]) if name in _ARROW_NULL_TYPES else text)
    if isinstance(value, str):
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))
    return pa.repeat(pa.scalar(value), n)


def arrow_stream(answer: PredictionAnswer) -> bytes:
    """An Arrow IPC stream: one record batch of the columns (float32 values, text labels) and of
    :func:`answer_wide`'s (the CSV form's columns), the answer's top-level fields also as JSON in the schema
    metadata key ``jetpredict``; zstd buffers when available."""
    import pyarrow as pa

    arrays = {}
    for name, values in answer.columns.items():
        array = np.asarray(values)
        if array.dtype.kind == "f":
            arrays[name] = pa.array(array.astype(np.float32), type=pa.float32(),
                                    mask=~np.isfinite(array))
        elif name == "extrapolated_knobs":
            arrays[name] = pa.array(array.tolist(), type=pa.string()).dictionary_encode()
        elif array.dtype.kind in "OUS":
            arrays[name] = pa.array(array.tolist(), type=pa.string())
        else:
            arrays[name] = pa.array(array)
    arrays.update({k: _constant_array(k, v, answer.count) for k, v in answer_wide(answer).items()})
    meta = {**_top(answer), **json_safe(dict(answer.constants))}
    table = pa.table(arrays).replace_schema_metadata({"jetpredict": json.dumps(meta)})
    codec = "zstd" if pa.Codec.is_available("zstd") else None
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as writer:
        writer.write_table(table)
    return sink.getvalue()


_ENCODERS = {"rows": (rows_json, JSON_MIMETYPE), "columns": (columns_json, JSON_MIMETYPE),
             "csv": (csv_text, CSV_MIMETYPE), "arrow": (arrow_stream, ARROW_MIMETYPE)}


def encode(answer: PredictionAnswer, fmt: str, gzip_ok: bool) -> Encoded:
    """``answer`` in form ``fmt`` (one of :data:`ANSWER_FORMS`), gzip-compressed when ``gzip_ok`` and worth it."""
    encoder, mimetype = _ENCODERS[fmt]
    body = encoder(answer)
    if gzip_ok and len(body) >= GZIP_MIN_BYTES:
        return Encoded(gzip.compress(body, GZIP_LEVEL, mtime=0), mimetype, "gzip", answer.count)
    return Encoded(body, mimetype, "", answer.count)


def encode_json(document: object, gzip_ok: bool) -> Encoded:
    """A JSON-ready document as an answer (compact separators), gzip-compressed when accepted and worth it."""
    body = _dumps(document)
    if gzip_ok and len(body) >= GZIP_MIN_BYTES:
        return Encoded(gzip.compress(body, GZIP_LEVEL, mtime=0), JSON_MIMETYPE, "gzip")
    return Encoded(body, JSON_MIMETYPE)


def response(encoded: Encoded, headers: Mapping[str, str] | None = None) -> Response:
    out = Response(encoded.body, mimetype=encoded.mimetype)
    if encoded.encoding:
        out.headers["Content-Encoding"] = encoded.encoding
    out.headers["Vary"] = VARY
    out.headers.update(dict(headers or {}))
    return out
