"""Rows a client sends: the checks (errors keyed ``PREFIX.I.FIELD`` by 0-based index), the canonical form
in which two rows that differ only in number formatting or blanks are one row, and the form rows are
stored in. :mod:`api.workloads` uploads and fits them."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from jetpredict.api.errors import FieldErrors
from jetpredict.api.schemas import ID_CHARS_OUT, MAX_WORKLOAD_ID_CHARS, UNPAIRED_SURROGATE, text_problem
from jetpredict.models.profile_rows import (
    FIELD_BY_NAME,
    INDEX_NAMES,
    PASS_THROUGH_COLUMNS,
    ProfileRowsError,
    unknown_columns,
    validate_records,
)

_BAD_ID = re.compile(f"[{ID_CHARS_OUT}]")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def canonical_value(value: object) -> object:
    """A cell in canonical form: text stripped (blank -> None), a number (or text that is one, such as
    ``"4.60"``) as a float, so ``"4.60"``, ``"4.6 "``, ``4.6`` and ``4.600`` are one value."""
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.fullmatch(text):
            return float(text)
        return text or None
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float | np.integer | np.floating):
        number = float(value)
        return None if number != number else number  # NaN is an empty cell
    return value


def canonical_row(record: Mapping[str, object]) -> dict[str, object]:
    """``record`` with canonical cells (:func:`canonical_value`) and no empty ones: two rows that differ
    only in number formatting, surrounding blanks or empty columns are equal."""
    out = {}
    for key, value in record.items():
        cell = canonical_value(value)
        if cell is not None:
            out[str(key).strip()] = cell
    return out


def row_key(record: Mapping[str, object]) -> str:
    """A text that two rows share exactly when their canonical forms are equal."""
    return json.dumps(canonical_row(record), sort_keys=True, default=str)


#: Pass-through text columns: stored as text even when it reads as a number, as uploads take them back.
_TEXT_PASS_THROUGH = frozenset(name for name, unit in PASS_THROUGH_COLUMNS.items() if unit.startswith("text"))


def _text_cell(value: object) -> object:
    """A text cell as stored: stripped; a number (validation made the column numbers) as text: "3090"."""
    cell = canonical_value(value)
    if isinstance(cell, float):
        return str(int(cell)) if cell.is_integer() else repr(cell)
    return cell


def stored_form(record: Mapping[str, object]) -> dict[str, object]:
    """A validated row as it is stored: profile-row fields as validated, the pass-through columns'
    cells in canonical form (the validation keeps those as sent), text columns' cells as text."""
    return {k: v if k in FIELD_BY_NAME else _text_cell(v) if k in _TEXT_PASS_THROUGH else canonical_value(v)
            for k, v in record.items()}


def records_sha256(rows: Sequence[object]) -> str:
    """SHA-256 (hex) of ``rows`` (records) as JSON with sorted keys: the key of an upload or of an inline fit."""
    return hashlib.sha256(json.dumps(list(rows), sort_keys=True, default=str).encode()).hexdigest()


def as_one_workload(records: Sequence[object]) -> list[object]:
    """Inline rows relabelled with the first row's ``workload``: the rows of an inline workload are one
    workload by construction (it has no id), so their ``workload`` cells are labels. Relabelling keeps the
    checks across rows (one label, one set of knobs; repeats that agree) over all of them."""
    label = next((r.get("workload") for r in records if isinstance(r, Mapping) and r.get("workload")), None)
    return [{**r, "workload": label} if isinstance(r, Mapping) and r.get("workload") else r for r in records]


def workload_id_problem(workload_id: str) -> str | None:
    """Why ``workload_id`` can never be a stored workload's id, or None."""
    if not workload_id:
        return "must not be empty"
    if len(workload_id) > MAX_WORKLOAD_ID_CHARS:
        return f"must be at most {MAX_WORKLOAD_ID_CHARS} characters"
    if _BAD_ID.search(workload_id) or UNPAIRED_SURROGATE.search(workload_id):
        return "must not contain '/', '\\', control characters or unpaired surrogates"
    return None


#: What an upload's workload id made only of dots is told: clients remove "." and ".." from URL paths, so
#: /v1/workloads/{id} could never reach such a workload. Uploads only: an id stored before stays readable.
DOTS_ONLY_WHY = "'.' and '..' are removed from URL paths, so /v1/workloads/{id} could not reach it"
DOTS_ONLY_RULE = f"must not be made only of dots: {DOTS_ONLY_WHY}"


def upload_id_problem(workload_id: str) -> str | None:
    """Why an upload may not store ``workload_id`` (stripped): :func:`workload_id_problem`'s rules, and no id
    made only of dots (:data:`DOTS_ONLY_RULE`); None when it may."""
    return workload_id_problem(workload_id) or (DOTS_ONLY_RULE if not workload_id.strip(".") else None)


def validate_client_rows(records: Sequence[object], prefix: str = "rows") -> pd.DataFrame:
    """Validate rows a client sent: unknown columns rejected (pass-through columns of
    :data:`models.profile_rows.PASS_THROUGH_COLUMNS` kept), every problem keyed ``PREFIX.I.FIELD`` with
    ``I`` the 0-based index in the list, as the indexes of ``modes`` and ``clients`` are."""
    unknown = unknown_columns(records)
    if unknown:
        errors = {prefix + key[len("rows"):]: v for key, v in unknown.items()}
        named = [k for k in errors if k != prefix]  # the key ``prefix`` counts the columns not named
        shown = ", ".join(named[:5]) + (", ..." if len(named) > 5 else "")
        more = f"; {errors[prefix][0]}" if prefix in errors else ""
        raise FieldErrors(f"unknown column(s) {shown}{more}", errors)
    try:
        return validate_records(records, names=INDEX_NAMES)  # messages count rows from 0, as the keys do
    except ProfileRowsError as exc:
        errors = {}
        for p in exc.problems:  # JSON rows are numbered from 1 in the problems: key them by index
            key = f"{prefix}.{p.line - 1}.{p.field}" if p.line else (prefix if p.field == "rows" else p.field)
            errors.setdefault(key, []).append(p.message)
        shown = "; ".join(f"{k}: {v[0]}" for k, v in list(errors.items())[:10])
        raise FieldErrors(f"{len(exc.problems)} problem(s) in {prefix}: {shown}", errors) from None


def check_scalar_cells(records: Sequence[object], prefix: str = "rows") -> None:
    """Every cell is a scalar, as in a CSV file (extra columns pass through to storage as they are), and
    every text is storable in SQLite and PostgreSQL alike (no NUL, no unpaired surrogate)."""
    errors: dict[str, list[str]] = {}
    for i, record in enumerate(records):  # 0-based, as every index in an error key (rows, modes, clients)
        if isinstance(record, Mapping):
            for key, value in record.items():
                name = f"{prefix}.{i}.{key!s}".encode("utf-8", "backslashreplace").decode()
                if isinstance(value, Mapping | list | tuple):
                    errors[name] = ["must be a string, number, boolean or null"]
                elif problem := text_problem(str(key)):
                    errors[name] = [f"column name {problem}"]
                elif isinstance(value, str) and (problem := text_problem(value)):
                    errors[name] = [problem]
    if errors:
        raise FieldErrors(f"{len(errors)} cell(s) cannot be stored: {', '.join(list(errors)[:5])}", errors)
