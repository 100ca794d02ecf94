"""An upload's rows split by workload: one group per workload id, each id checked, in order of first appearance.

An upload may hold the rows of several workloads (a sweep of two models, say); :mod:`api.workloads` fits and
stores each group with the rows already stored for its workload.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from jetpredict.api.client_rows import stored_form, upload_id_problem
from jetpredict.api.errors import FieldErrors
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import rows_to_records

#: Workloads in one upload: each is fitted in the request (~5 ms each), and each has an idempotency key.
MAX_UPLOAD_WORKLOADS = 256


def one_value(df: pd.DataFrame, column: str, rows_field: str) -> str:
    """The one value of ``column`` in the rows sent as ``rows_field``; else an InputError naming the first row
    that differs from row 0 (``rows.I.device``: in a 10,000-row upload, which row)."""
    values = [str(v) for v in df[column]]
    other = next((i for i, v in enumerate(values) if v != values[0]), None)
    if other is not None:
        seen = list(dict.fromkeys(values))
        raise InputError(f"rows must all have the same {column}: row {other} has {values[other]!r}, row 0 "
                         f"{values[0]!r} (all: {', '.join(map(repr, seen[:5]))})", f"{rows_field}.{other}.{column}")
    return values[0]


@dataclass(frozen=True, eq=False)
class UploadGroup:
    """The rows of one workload in an upload: validated, as stored, and where they were in the upload."""

    workload_id: str
    indexes: list[int]  # 0-based, in the upload's rows
    frame: pd.DataFrame
    records: list[dict]


def group_upload(new: pd.DataFrame) -> list[UploadGroup]:
    """Validated upload rows grouped by workload, in order of first appearance; every id checked."""
    records = [stored_form(r) for r in rows_to_records(new)]
    where: dict[str, list[int]] = {}
    for i, workload_id in enumerate(new["workload"].astype(str)):
        where.setdefault(workload_id, []).append(i)
    if len(where) > MAX_UPLOAD_WORKLOADS:
        index = list(where.values())[MAX_UPLOAD_WORKLOADS][0]
        raise InputError(f"an upload holds at most {MAX_UPLOAD_WORKLOADS} workloads (each is fitted); this "
                         f"row starts workload {MAX_UPLOAD_WORKLOADS + 1}: split the upload",
                         f"rows.{index}.workload")
    errors: dict[str, list[str]] = {}
    for workload_id, indexes in where.items():
        problem = upload_id_problem(workload_id)
        if problem:
            errors[f"rows.{indexes[0]}.workload"] = [f"workload id {problem}"]
    if errors:
        shown = "; ".join(f"{k}: {v[0]}" for k, v in list(errors.items())[:5])
        raise FieldErrors(f"{len(errors)} bad workload id(s): {shown}", errors)
    return [UploadGroup(workload_id, indexes, new.iloc[indexes].reset_index(drop=True),
                        [records[i] for i in indexes]) for workload_id, indexes in where.items()]
