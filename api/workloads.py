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
from jetpredict.api.storage import IdempotencyKey, RevisionConflict, Storage, upload_result
from jetpredict.models.errors import InputError, UnknownWorkloadError
from jetpredict.models.profile_rows import (
    ProfileRowsError,
    rows_to_records,
    unknown_columns,
    validate_records,
)

log = logging.getLogger("jetpredict.api")

MAX_WORKLOAD_ID_CHARS = 200
IDEMPOTENCY_HEADER = "Idempotency-Key"
_BAD_ID = re.compile(r"[/\\\x00-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
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
    from jetpredict.predictor.bundled import fit_workload

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


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as text in every database (NUL, unpaired surrogates), or None."""
    if "\x00" in text:
        return "must not contain a NUL character"
    if _SURROGATE.search(text):
        return "must be valid Unicode (it holds an unpaired surrogate)"
    return None


def workload_id_problem(workload_id: str) -> str | None:
    """Why ``workload_id`` can never be a stored workload's id, or None."""
    if not workload_id:
        return "must not be empty"
    if len(workload_id) > MAX_WORKLOAD_ID_CHARS:
        return f"must be at most {MAX_WORKLOAD_ID_CHARS} characters"
    if _BAD_ID.search(workload_id) or _SURROGATE.search(workload_id):
        return "must not contain '/', '\\', control characters or unpaired surrogates"
    return None


def check_workload_id(workload_id: str, field: str = "rows") -> str:
    problem = workload_id_problem(workload_id)
    if problem:
        raise InputError(f"workload id {problem}", field)
    return workload_id


def validate_client_rows(records: Sequence[object], prefix: str = "rows") -> pd.DataFrame:
    """Validate rows a client sent: unknown columns rejected (pass-through columns of
    :data:`models.profile_rows.PASS_THROUGH_COLUMNS` kept), every problem keyed ``PREFIX.I.FIELD`` with
    ``I`` the 0-based index in the list, as the indexes of ``modes`` and ``clients`` are."""
    unknown = unknown_columns(records)
    if unknown:
        errors = {prefix + key[len("rows"):]: v for key, v in unknown.items()}
        raise FieldErrors(f"{len(errors)} unknown column(s): {', '.join(list(errors)[:5])}", errors)
    try:
        return validate_records(records)
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
    def _replay(self, idem: IdempotencyKey) -> dict[str, object] | None:
        found = self.storage.find_idempotent(idem.key)
        if found is None:
            return None
        request_sha256, response = found
        if request_sha256 != idem.request_sha256:
            raise ApiError(422, f"{IDEMPOTENCY_HEADER} was already used for a different request body",
                           {f"headers.{IDEMPOTENCY_HEADER}": ["was already used for a different request body; use a new "
                                                 "key for a new upload"]})
        return response

    def upload(self, records: Sequence[Mapping[str, object]], idempotency_key: str | None = None
               ) -> tuple[dict[str, object], bool]:
        """Validate, fit and store one upload; returns (the answer, replayed?).

        Nothing is stored unless the workload (old rows + these) fits. An upload is made under
        ``idempotency_key`` (the client's ``Idempotency-Key``) or, without one, under the SHA-256 of its
        rows: a retry of an upload that was stored is answered with the original answer and stores
        nothing; the same key with another body is a 422.
        """
        check_scalar_cells(records)
        body_sha256 = hashlib.sha256(json.dumps(list(records), sort_keys=True, default=str).encode()).hexdigest()
        idem = IdempotencyKey(f"key:{idempotency_key}" if idempotency_key else f"sha256:{body_sha256}",
                              body_sha256)
        replay = self._replay(idem)
        if replay is not None:
            return replay, True
        new = validate_client_rows(records)
        workload_id = check_workload_id(_one(new, "workload", "rows.workload"), "rows.workload")
        device = _one(new, "device", "rows.device")
        new_records = rows_to_records(new)
        for attempt in range(_OPTIMISTIC_TRIES + _LOCKED_TRIES):
            if attempt and (replay := self._replay(idem)) is not None:
                return replay, True  # the conflict was a twin of this request that committed first
            if attempt >= _OPTIMISTIC_TRIES:
                record, model = self._upload_locked(workload_id, device, new, new_records, idem)
                if record is None:
                    continue
                break
            revision, stored = self.storage.load_rows(workload_id)
            self._check_device(workload_id, device, stored)
            model = _fit(validate_records([*stored, *new_records]) if stored else new, "rows")
            try:
                record = self.storage.add_upload(workload_id, device, new_records, revision or 0,
                                                 fit_summary(model), idem)
                break
            except RevisionConflict:
                # Another upload to this workload committed first: refit on its rows after a short pause.
                time.sleep(random.uniform(0.0, 0.02 * (attempt + 1)))
        else:
            raise ApiError(409, f"workload {workload_id!r} is being changed by other uploads; retry",
                           {"rows.workload": ["concurrent uploads to this workload; retry"]})
        self._remember(self._stored, workload_id, (record.revision, model))
        return upload_result(record, len(new_records)), False

    @staticmethod
    def _check_device(workload_id: str, device: str, stored: list[dict]) -> None:
        if stored and str(stored[0].get("device")) != device:
            raise InputError(f"workload {workload_id!r} is stored for device {stored[0]['device']!r}; "
                             f"rows for {device!r} need another workload id", "rows.device")

    def _upload_locked(self, workload_id: str, device: str, new: pd.DataFrame, new_records: list[dict],
                       idem: IdempotencyKey | None = None):
        fitted: dict[str, Any] = {}

        def refit(stored: list[dict]) -> dict[str, object]:
            self._check_device(workload_id, device, stored)
            fitted["model"] = _fit(validate_records([*stored, *new_records]) if stored else new, "rows")
            return fit_summary(fitted["model"])

        try:
            return (self.storage.add_upload_locked(workload_id, device, new_records, refit, idem),
                    fitted["model"])
        except RevisionConflict:
            return None, None

    def delete(self, workload_id: str) -> bool:
        with self._lock:
            self._stored.pop(workload_id, None)
        return self.storage.delete_workload(workload_id)

    # -- lookups ---------------------------------------------------------------------------------
    def stored(self, workload_id: str, field: str = "workload.id") -> Resolved:
        """The fitted model of a stored workload; :class:`UnknownWorkloadError` (404) if not stored."""
        problem = workload_id_problem(workload_id)
        if problem:  # never stored (uploads refuse such ids); and not every database takes it as text
            raise UnknownWorkloadError(f"workload is not stored: a workload id {problem}", field)
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
        rows = validate_client_rows(records, field)
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
