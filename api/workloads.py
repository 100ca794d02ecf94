"""Workloads: upload (validate, fit, store) and an in-memory cache of fitted models.

A fitted :class:`predictor.model.WorkloadModel` is only ever built here by fitting rows: the stored rows
of a workload (cached per revision, so a refit by another worker process is picked up on the next
request) or the inline rows of one request (cached by the SHA-256 of the rows). Nothing a client sends
is unpickled.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from jetpredict.api.errors import ApiError, FieldErrors
from jetpredict.api.storage import RevisionConflict, Storage, WorkloadRecord
from jetpredict.models.errors import InputError, UnknownWorkloadError
from jetpredict.models.profile_rows import ProfileRowsError, rows_to_records, validate_records

log = logging.getLogger("jetpredict.api")

MAX_WORKLOAD_ID_CHARS = 200
_BAD_ID = re.compile(r"[/\\\x00-\x1f\x7f]")
_OPTIMISTIC_TRIES = 3  # then uploads to the workload queue on the write lock
_LOCKED_TRIES = 2


@dataclass(frozen=True)
class Resolved:
    """A fitted model and, for a stored workload, its id and revision."""

    model: Any  # predictor.model.WorkloadModel
    workload_id: str | None
    revision: int | None


def fit_summary(model: Any) -> dict[str, object]:
    """The provenance of a fitted model that is stored with its workload and shown by the API."""
    return {"device": model.device_id, "model_version": str(model.model_version),
            "reference_source": str(model.reference_source), "profiled_modes": int(model.profiled_modes),
            "has_power": bool(model.has_power)}


def _fit(rows: pd.DataFrame, field: str) -> Any:
    from jetpredict.predictor.model import fit_workload

    try:
        return fit_workload(rows)
    except InputError as exc:
        if type(exc).as_errors is InputError.as_errors and exc.field and not exc.field.startswith(field):
            exc.field = f"{field}.{exc.field}"  # "device" -> "rows.device": name it where the client sent it
        raise
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
        # Numerically hopeless rows are bad input, not a server fault; keep the cause in the log.
        log.warning("fit failed on client rows", exc_info=True)
        raise InputError(f"the rows could not be fitted: {exc}", field) from None


def _one(df: pd.DataFrame, column: str, field: str) -> str:
    values = list(dict.fromkeys(str(v) for v in df[column]))
    if len(values) != 1:
        raise InputError(f"rows must all have the same {column}; got {', '.join(map(repr, values[:5]))}",
                         field)
    return values[0]


def check_workload_id(workload_id: str, field: str = "rows") -> str:
    if len(workload_id) > MAX_WORKLOAD_ID_CHARS:
        raise InputError(f"workload id is longer than {MAX_WORKLOAD_ID_CHARS} characters", field)
    if _BAD_ID.search(workload_id):
        raise InputError("workload id must not contain '/', '\\' or control characters", field)
    return workload_id


def check_scalar_cells(records: Sequence[object], prefix: str = "rows") -> None:
    """Every cell is a scalar, as in a CSV file (extra columns pass through to storage as they are)."""
    errors: dict[str, list[str]] = {}
    for i, record in enumerate(records, start=1):
        if isinstance(record, Mapping):
            for key, value in record.items():
                if isinstance(value, Mapping | list | tuple):
                    errors[f"{prefix}.{i}.{key}"] = ["must be a string, number, boolean or null"]
    if errors:
        raise FieldErrors(f"{len(errors)} cell(s) are not scalars: {', '.join(list(errors)[:5])}", errors)


class WorkloadService:
    """Upload, look up and cache fitted workload models (thread-safe)."""

    def __init__(self, storage: Storage, cache_size: int = 64) -> None:
        self.storage = storage
        self.cache_size = cache_size
        self._stored: OrderedDict[str, tuple[int, Any]] = OrderedDict()
        self._inline: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def _remember(self, cache: OrderedDict, key: str, value: Any) -> None:
        with self._lock:
            cache[key] = value
            cache.move_to_end(key)
            while len(cache) > self.cache_size:
                cache.popitem(last=False)

    # -- uploads ---------------------------------------------------------------------------------
    def upload(self, records: Sequence[Mapping[str, object]]) -> tuple[WorkloadRecord, int]:
        """Validate, fit and store one upload; returns (workload record, rows stored by this upload).

        Nothing is stored unless the workload (old rows + these) fits.
        """
        check_scalar_cells(records)
        new = validate_records(records)
        workload_id = check_workload_id(_one(new, "workload", "rows.workload"), "rows.workload")
        device = _one(new, "device", "rows.device")
        new_records = rows_to_records(new)
        for attempt in range(_OPTIMISTIC_TRIES + _LOCKED_TRIES):
            if attempt >= _OPTIMISTIC_TRIES:
                record, model = self._upload_locked(workload_id, device, new, new_records)
                if record is None:
                    continue
                break
            revision, stored = self.storage.load_rows(workload_id)
            self._check_device(workload_id, device, stored)
            model = _fit(validate_records([*stored, *new_records]) if stored else new, "rows")
            try:
                record = self.storage.add_upload(workload_id, device, new_records, revision or 0,
                                                 fit_summary(model))
                break
            except RevisionConflict:
                # Another upload to this workload committed first: refit on its rows after a short pause.
                time.sleep(random.uniform(0.0, 0.02 * (attempt + 1)))
        else:
            raise ApiError(409, f"workload {workload_id!r} is being changed by other uploads; retry",
                           {"rows.workload": ["concurrent uploads to this workload; retry"]})
        self._remember(self._stored, workload_id, (record.revision, model))
        return record, len(new_records)

    @staticmethod
    def _check_device(workload_id: str, device: str, stored: list[dict]) -> None:
        if stored and str(stored[0].get("device")) != device:
            raise InputError(f"workload {workload_id!r} is stored for device {stored[0]['device']!r}; "
                             f"rows for {device!r} need another workload id", "rows.device")

    def _upload_locked(self, workload_id: str, device: str, new: pd.DataFrame, new_records: list[dict]):
        fitted: dict[str, Any] = {}

        def refit(stored: list[dict]) -> dict[str, object]:
            self._check_device(workload_id, device, stored)
            fitted["model"] = _fit(validate_records([*stored, *new_records]) if stored else new, "rows")
            return fit_summary(fitted["model"])

        try:
            return self.storage.add_upload_locked(workload_id, device, new_records, refit), fitted["model"]
        except RevisionConflict:
            return None, None

    def delete(self, workload_id: str) -> bool:
        with self._lock:
            self._stored.pop(workload_id, None)
        return self.storage.delete_workload(workload_id)

    # -- lookups ---------------------------------------------------------------------------------
    def stored(self, workload_id: str, field: str = "workload.id") -> Resolved:
        """The fitted model of a stored workload; :class:`UnknownWorkloadError` (404) if not stored."""
        revision = self.storage.revision(workload_id)
        if revision is None:
            raise UnknownWorkloadError(f"workload {workload_id!r} is not stored; upload its rows with "
                                       "POST /v1/profiles", field)
        cached = self._stored.get(workload_id)
        if cached is not None and cached[0] == revision:
            return Resolved(cached[1], workload_id, revision)
        revision, rows = self.storage.load_rows(workload_id)
        if revision is None:
            raise UnknownWorkloadError(f"workload {workload_id!r} is not stored", field)
        model = _fit(validate_records(rows, what=f"stored rows of {workload_id}"), field)
        self._remember(self._stored, workload_id, (revision, model))
        return Resolved(model, workload_id, revision)

    def inline(self, records: Sequence[Mapping[str, object]], field: str = "workload.rows") -> Resolved:
        """A model fitted from rows sent with the request (not stored)."""
        check_scalar_cells(records, field)
        try:
            rows = validate_records(records)
        except ProfileRowsError as exc:
            prefix = field.rsplit(".", 1)[0]  # "workload.rows" -> errors under "workload.rows.N.field"
            raise FieldErrors(exc.message, {f"{prefix}.{k}": v for k, v in exc.as_errors().items()}) from None
        _one(rows, "workload", f"{field}.workload")
        key = hashlib.sha256(json.dumps(rows_to_records(rows), sort_keys=True, default=str).encode()
                             ).hexdigest()
        model = self._inline.get(key)
        if model is None:
            model = _fit(rows, field)
            self._remember(self._inline, key, model)
        return Resolved(model, None, None)

    def resolve(self, workload: Mapping[str, object], field: str = "workload") -> Resolved:
        """``{"id": ...}`` (stored) or ``{"rows": [...]}`` (inline)."""
        if workload.get("id") is not None:
            return self.stored(str(workload["id"]), f"{field}.id")
        return self.inline(workload.get("rows") or [], f"{field}.rows")
