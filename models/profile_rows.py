"""Profile rows: the one CSV/JSON format that the profiler writes and the predictor and service read.

One row per (device, workload, power mode); field names and units as in DESIGN.md. Reading validates
every field of every row and reports *all* problems with their line numbers (CSV line numbers count the
header as line 1; JSON rows are numbered from 1). Unknown = empty cell / ``null``, never 0.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, device_ids, load_device
from jetpredict.models.errors import InputError


@dataclass(frozen=True)
class Field:
    """One column: ``kind`` is ``str``, ``int`` (count) or ``float``; ``minimum`` is exclusive if ``strict``."""

    name: str
    kind: type
    required: bool
    unit: str = ""
    minimum: float | None = None
    strict: bool = False


#: The DESIGN.md columns, in output order. Extra columns (``power_meter``, ``macs_fwd`` ...) pass through.
FIELDS: tuple[Field, ...] = (
    Field("device", str, True),
    Field("workload", str, True),
    Field("mode", str, True),
    Field("cpu_cores", int, True, "count", 1),
    Field("cpu_mhz", float, True, "MHz", 0, strict=True),
    Field("gpu_mhz", float, True, "MHz", 0, strict=True),
    Field("emc_mhz", float, True, "MHz", 0, strict=True),
    Field("num_workers", int, False, "count", 0),
    Field("batch_size", int, True, "count", 1),
    Field("minibatches_per_epoch", int, True, "count", 1),
    Field("epoch_time_s", float, True, "s", 0, strict=True),
    Field("stall_time_s", float, False, "s", 0),
    Field("compute_time_s", float, False, "s", 0),
    Field("epoch_energy_j", float, False, "J", 0, strict=True),
    Field("avg_power_w", float, False, "W", 0, strict=True),
    Field("base_power_w", float, False, "W", 0, strict=True),
    Field("source", str, False),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}
COLUMNS: tuple[str, ...] = tuple(f.name for f in FIELDS)
HOST_DEVICE = "host"
DEFAULT_NUM_WORKERS = 4
SOURCE_KINDS = ("measured", "simulated", "published")
#: Stall and compute are shares of the epoch; digitised figures round, so allow this much slack.
COMPONENT_SLACK = 1.10


@dataclass(frozen=True)
class RowProblem:
    """A problem in one row (``line`` 0 = the file as a whole)."""

    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "file"
        return f"{where}: {self.field}: {self.message}"


class ProfileRowsError(InputError):
    """Every problem found in a set of profile rows."""

    def __init__(self, problems: list[RowProblem], what: str = "profile rows") -> None:
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:20])
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
    text = str(source or "measured").strip().lower()
    for kind in SOURCE_KINDS:
        if text.startswith(kind):
            return kind
    return "measured"


def _is_blank(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and value.strip() == "")


def _coerce(field: Field, value: object) -> tuple[object, str | None]:
    """(parsed value, problem or None). Blank -> None."""
    if _is_blank(value):
        return None, None
    if field.kind is str:
        return str(value).strip(), None
    if isinstance(value, bool):
        return None, f"must be a number ({field.unit or 'count'}), got {value!r}"
    try:
        number = float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        return None, f"must be a number ({field.unit or 'count'}), got {value!r}"
    if not math.isfinite(number):
        return None, f"must be a finite number, got {value!r}"
    if field.kind is int and number != round(number):
        return None, f"must be a whole number ({field.unit}), got {value!r}"
    if field.minimum is not None:
        if field.strict and number <= field.minimum:
            return None, f"must be > {field.minimum:g} {field.unit}".rstrip() + f", got {value!r}"
        if not field.strict and number < field.minimum:
            return None, f"must be >= {field.minimum:g} {field.unit}".rstrip() + f", got {value!r}"
    return (int(round(number)) if field.kind is int else number), None


def _validate_record(record: Mapping[str, object], line: int) -> tuple[dict[str, object], list[RowProblem]]:
    problems: list[RowProblem] = []
    row: dict[str, object] = {}
    for key, value in record.items():
        if key is None:  # csv.DictReader puts surplus cells under None
            problems.append(RowProblem(line, "_row", f"has more cells than the header ({len(value)} extra)"))
            continue
        field = FIELD_BY_NAME.get(key)
        if field is None:
            row[key] = None if _is_blank(value) else value
            continue
        parsed, problem = _coerce(field, value)
        if problem:
            problems.append(RowProblem(line, key, problem))
        row[key] = parsed

    device = row.get("device")
    is_host = device == HOST_DEVICE
    for field in FIELDS:
        required = field.required and not (is_host and field.name in MODE_FIELDS[1:])
        if required and row.get(field.name) is None and not any(p.field == field.name for p in problems):
            problems.append(RowProblem(line, field.name, "is required and empty"))

    if device is not None and not is_host and device not in device_ids():
        problems.append(RowProblem(line, "device", f"unknown device {device!r}; valid: "
                                   f"{', '.join([*device_ids(), HOST_DEVICE])}"))
    elif device is not None and not is_host:
        catalogue_device = load_device(str(device))
        ranges = catalogue_device.knob_ranges()
        # A knob that failed to parse is already reported; check the others against the range.
        knobs = [row.get(k) if row.get(k) is not None else ranges[k][0] for k in MODE_FIELDS]
        out = catalogue_device.out_of_range(*(np.atleast_1d(k) for k in knobs))
        problems.extend(RowProblem(line, f, m) for f, m in out.items())

    epoch = row.get("epoch_time_s")
    if isinstance(epoch, float):
        for part in ("stall_time_s", "compute_time_s"):
            value = row.get(part)
            if isinstance(value, float) and value > epoch * COMPONENT_SLACK:
                problems.append(RowProblem(line, part, f"{value:g} s exceeds epoch_time_s={epoch:g} s"))
    base, avg = row.get("base_power_w"), row.get("avg_power_w")
    if isinstance(base, float) and isinstance(avg, float) and base > avg * COMPONENT_SLACK:
        problems.append(RowProblem(line, "base_power_w", f"{base:g} W exceeds avg_power_w={avg:g} W"))
    source = row.get("source")
    if source is not None and not str(source).lower().startswith(SOURCE_KINDS):
        problems.append(RowProblem(line, "source", f"must start with one of {', '.join(SOURCE_KINDS)}; "
                                   f"got {source!r}"))
    return row, problems


def _frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    extras = [k for r in rows for k in r if k not in FIELD_BY_NAME]
    columns = list(COLUMNS) + list(dict.fromkeys(extras))
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


def validate_records(records: Iterable[Mapping[str, object]], first_line: int = 1,
                     what: str = "profile rows", line_numbers: Sequence[int] | None = None) -> pd.DataFrame:
    """Validate row mappings (JSON objects or CSV records); raise :class:`ProfileRowsError` with all problems.

    ``line_numbers`` gives each record's line in its file (CSV readers skip blank lines), else
    ``first_line + index``.
    """
    rows: list[dict[str, object]] = []
    problems: list[RowProblem] = []
    for i, record in enumerate(records):
        line = line_numbers[i] if line_numbers is not None else first_line + i
        if not isinstance(record, Mapping):
            problems.append(RowProblem(line, "_row", "must be an object of field: value"))
            continue
        row, row_problems = _validate_record(record, line)
        rows.append(row)
        problems.extend(row_problems)
    if not rows and not problems:
        problems.append(RowProblem(0, "rows", "no data rows"))
    if problems:
        raise ProfileRowsError(problems, what)
    return _frame(rows)


def read_profile_csv(source: str | Path | io.TextIOBase) -> pd.DataFrame:
    """Read and validate a profile-row CSV file (path or open text stream)."""
    what = str(source) if isinstance(source, str | Path) else "profile rows"
    if isinstance(source, str | Path):
        try:
            text = Path(source).read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise InputError(f"profile file {source} does not exist", "profiles") from None
        except UnicodeDecodeError:
            raise InputError(f"profile file {source} is not UTF-8 text", "profiles") from None
    else:
        text = source.read()
    if not text.strip():
        raise ProfileRowsError([RowProblem(0, "file", "is empty: expected a CSV header and rows")], what)
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    reader.fieldnames = header  # " cpu_mhz" is the cpu_mhz column, not an unknown extra one
    duplicates = sorted({h for h in header if header.count(h) > 1})
    if duplicates:
        raise ProfileRowsError([RowProblem(1, "header", f"duplicate column(s): {', '.join(duplicates)}")], what)
    missing = [f.name for f in FIELDS if f.required and f.name not in header
               and f.name not in MODE_FIELDS]
    if missing:
        raise ProfileRowsError([RowProblem(1, "header", f"missing required column(s): {', '.join(missing)}")],
                               what)
    records, lines = [], []
    for record in reader:
        records.append(record)
        lines.append(reader.line_num)  # physical line of the record's last line, blank lines counted
    return validate_records(records, what=what, line_numbers=lines)


def read_profile_json(payload: object) -> pd.DataFrame:
    """Validate rows given as JSON: a list of row objects, or ``{"rows": [...]}``."""
    if isinstance(payload, Mapping):
        payload = payload.get("rows")
    if not isinstance(payload, list):
        raise InputError("profile rows must be a JSON list of row objects", "rows")
    return validate_records(payload)


def read_profile_rows(path: str | Path) -> pd.DataFrame:
    """Read a ``.csv`` or ``.json`` profile-row file."""
    import json

    if str(path).lower().endswith(".json"):
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"profile file {path} does not exist", "profiles") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"profile file {path} is not valid JSON: {exc}", "profiles") from None
        return read_profile_json(payload)
    return read_profile_csv(path)


def rows_to_records(df: pd.DataFrame) -> list[dict[str, object]]:
    """Rows as JSON-ready dicts: NaN becomes ``None``, counts become ints."""
    records = []
    for record in df.to_dict(orient="records"):
        out: dict[str, object] = {}
        for key, value in record.items():
            if _is_blank(value):
                out[key] = None
            elif FIELD_BY_NAME.get(key) is not None and FIELD_BY_NAME[key].kind is int:
                out[key] = int(value)
            elif isinstance(value, np.generic):
                out[key] = value.item()
            else:
                out[key] = value
        records.append(out)
    return records


def write_profile_csv(rows: pd.DataFrame | list[Mapping[str, object]], path: str | Path | io.TextIOBase,
                      append: bool = False) -> None:
    """Write rows as CSV (DESIGN.md columns first, extras after); ``append`` adds to an existing file."""
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    columns = list(COLUMNS) + [c for c in df.columns if c not in FIELD_BY_NAME]
    df = df.reindex(columns=columns)
    if isinstance(path, io.TextIOBase):
        df.to_csv(path, index=False, lineterminator="\n")
        return
    path = Path(path)
    if append and path.exists() and path.stat().st_size > 0:
        with path.open(newline="", encoding="utf-8") as f:
            existing = next(csv.reader(f), [])
        if existing != columns:
            merged = pd.concat([pd.read_csv(path), df], ignore_index=True)
            merged.reindex(columns=list(dict.fromkeys(existing + columns))).to_csv(
                path, index=False, lineterminator="\n")
            return
        df.to_csv(path, mode="a", header=False, index=False, lineterminator="\n")
    else:
        df.to_csv(path, index=False, lineterminator="\n")
