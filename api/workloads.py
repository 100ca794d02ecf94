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
from jetpredict.api.storage import (
    IdempotencyKey,
    RevisionConflict,
    Storage,
    WorkloadRecord,
    WorkloadWrite,
    upload_result,
)
from jetpredict.models.errors import InputError, UnknownWorkloadError
from jetpredict.models.profile_rows import (
    ProfileRowsError,
    mode_conflicts,
    rows_to_records,
    unknown_columns,
    validate_records,
)

log = logging.getLogger("jetpredict.api")

MAX_WORKLOAD_ID_CHARS = 200
#: Workloads in one upload: each is fitted in the request (~5 ms each), and each has an idempotency key.
MAX_UPLOAD_WORKLOADS = 256
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


@dataclass(frozen=True, eq=False)
class _Group:
    """The rows of one workload in an upload: validated, as stored, and where they were in the upload."""

    workload_id: str
    indexes: list[int]  # 0-based, in the upload's rows
    frame: pd.DataFrame
    records: list[dict]


def _groups(new: pd.DataFrame) -> list[_Group]:
    """Validated upload rows grouped by workload, in order of first appearance; every id checked."""
    records = rows_to_records(new)
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
        problem = workload_id_problem(workload_id)
        if problem:
            errors[f"rows.{indexes[0]}.workload"] = [f"workload id {problem}"]
    if errors:
        shown = "; ".join(f"{k}: {v[0]}" for k, v in list(errors.items())[:5])
        raise FieldErrors(f"{len(errors)} bad workload id(s): {shown}", errors)
    return [_Group(workload_id, indexes, new.iloc[indexes].reset_index(drop=True),
                   [records[i] for i in indexes]) for workload_id, indexes in where.items()]


def _conflict(message: str, errors: dict[str, list[str]]) -> ApiError:
    return ApiError(409, message, errors)


def _fit_group(group: _Group, device: str, stored: list[dict], several: bool) -> Any:
    """The model of ``group``'s workload fitted on its stored rows and the new ones.

    :class:`ApiError` 409 when the new rows are valid alone but clash with the stored ones (another
    device, contradicting modes, a fit that fails only together with them); InputError (422) when they
    cannot be fitted even alone. ``several``: the upload holds other workloads, so messages name this one.
    """
    name = f"workload {group.workload_id!r}"
    first = group.indexes[0]
    if not stored:
        try:
            return _fit(group.frame, "rows")
        except InputError as exc:
            if several:
                raise FieldErrors(f"{name}: {exc.message}", {
                    k: [f"{name}: {m}" for m in v] for k, v in exc.as_errors().items()}) from None
            raise
    stored_device = str(stored[0].get("device"))
    if stored_device != device:
        raise _conflict(f"{name} is stored for device {stored_device!r}; rows for {device!r} need another "
                        "workload id", {f"rows.{first}.device": [
                            f"{name} is stored for device {stored_device!r}, not {device!r}"]})
    # Lines 1..S are the stored rows (in the order GET /v1/workloads/{id} lists them), S+1.. the new ones.
    lines = list(range(1, len(stored) + len(group.records) + 1))
    clashes = [p for p in mode_conflicts([*stored, *group.records], lines) if p.line > len(stored)]
    if clashes:
        errors: dict[str, list[str]] = {}
        for p in clashes:
            errors.setdefault(f"rows.{group.indexes[p.line - len(stored) - 1]}.{p.field}", []).append(
                f"contradicts the {len(stored)} rows stored for {name} (lines 1..{len(stored)} are the "
                f"stored rows, then this upload's rows of it): {p.message}")
        key, messages = next(iter(errors.items()))
        raise _conflict(f"{key}: {messages[0]}", errors)
    try:
        together = validate_records([*stored, *group.records], what=f"stored and new rows of {name}")
        return _fit(together, "rows")
    except InputError as exc:
        _fit_group(group, device, [], several)  # a 422 when the new rows cannot be fitted even alone
        message = f"{name} cannot be fitted with its {len(stored)} stored rows and these: {exc.message}"
        raise _conflict(message, {f"rows.{first}.workload": [message]}) from None


def _fit_groups(groups: Sequence[_Group], device: str, stored: Mapping[str, tuple[int, list[dict]]]
                ) -> dict[str, Any]:
    """``{workload id: model}`` for every group, or one error naming every group's problems: 422 if any
    group's rows are bad on their own, else 409."""
    models: dict[str, Any] = {}
    failures: list[tuple[int, str, dict[str, list[str]]]] = []
    for group in groups:
        try:
            several = len(groups) > 1
            models[group.workload_id] = _fit_group(group, device, stored[group.workload_id][1], several)
        except ApiError as exc:
            failures.append((exc.code or 409, exc.message, exc.errors))
        except InputError as exc:
            failures.append((422, exc.message, exc.as_errors()))
    if failures:
        status = 422 if any(f[0] == 422 for f in failures) else 409
        errors: dict[str, list[str]] = {}
        for code, _, group_errors in failures:
            if code == status:
                for key, messages in group_errors.items():
                    errors.setdefault(key, []).extend(messages)
        raise ApiError(status, next(m for code, m, _ in failures if code == status), errors)
    return models


def _writes(groups: Sequence[_Group], models: Mapping[str, Any], device: str, revisions: Mapping[str, int]
            ) -> list[WorkloadWrite]:
    """The upload's writes: the groups that were fitted (``models``) with their rows, the others empty."""
    return [WorkloadWrite(g.workload_id, device, g.records, revisions[g.workload_id],
                          fit_summary(models[g.workload_id]))
            if g.workload_id in models else WorkloadWrite(g.workload_id, device, [], 0, {}) for g in groups]


def as_one_workload(records: Sequence[object]) -> list[object]:
    """Inline rows relabelled with the first row's ``workload``: the rows of an inline workload are one
    workload by construction (it has no id), so their ``workload`` cells are labels. Relabelling keeps the
    checks across rows (one label, one set of knobs; repeats that agree) over all of them."""
    label = next((r.get("workload") for r in records if isinstance(r, Mapping) and r.get("workload")), None)
    return [{**r, "workload": label} if isinstance(r, Mapping) and r.get("workload") else r for r in records]


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
    def _replay(self, idem: IdempotencyKey, most_workloads: int
                ) -> tuple[set[str], dict[str, object] | None]:
        """(keys of ``idem`` already used, the original answer if the whole upload is still stored).

        ``most_workloads`` bounds the number of workloads in the upload (each has its key). The answer is
        replayed only when every workload of the upload still holds its part (its key is present); see
        :class:`api.storage.IdempotencyKey`. A key used for another request body is a 409.
        """
        found = self.storage.find_idempotent(idem.keys(min(max(1, most_workloads), MAX_UPLOAD_WORKLOADS)))
        if not found:
            return set(), None
        if any(sha256 != idem.request_sha256 for sha256, _ in found.values()):
            # 409, not 422: the request is valid; it clashes with what the server holds under that key.
            raise ApiError(409, f"{IDEMPOTENCY_HEADER} was already used for a different request body",
                           {f"headers.{IDEMPOTENCY_HEADER}": [
                               "was already used for a different request body; use a new key for a new upload"]})
        if idem.key not in found:  # the first workload was deleted: the upload is not whole
            return set(found), None
        response = found[idem.key][1]
        if "workloads" not in response:  # stored before uploads held several workloads: it held one
            response = {**response, "workloads": [dict(response)]}
        n = len(response["workloads"])  # type: ignore[arg-type]
        complete = all(key in found for key in idem.keys(n))
        return set(found), (response if complete else None)

    def upload(self, records: Sequence[Mapping[str, object]], idempotency_key: str | None = None
               ) -> tuple[dict[str, object], bool]:
        """Validate, fit and store one upload; returns (the answer, replayed?).

        The rows may hold several workloads (a sweep of two models, say), all of one device: they are
        grouped by ``workload`` in order of first appearance, each group is fitted together with the rows
        already stored for it, and every group is stored in one transaction, or none is. Rows invalid on
        their own are a 422; rows that are valid alone but clash with what is stored (another device, a
        label or a measured mode that the stored rows contradict, a fit that fails only together with the
        stored rows) are a 409; either way nothing is stored, and the error names ``rows.I.FIELD``.

        An upload is made under ``idempotency_key`` (the client's ``Idempotency-Key``) or, without one,
        under the SHA-256 of its rows: a retry of an upload that was stored is answered with the original
        answer and stores nothing; the same key with another body is a 409. If a workload of the upload
        was deleted since, the retry stores that workload's part again and no other.
        """
        check_scalar_cells(records)
        body_sha256 = hashlib.sha256(json.dumps(list(records), sort_keys=True, default=str).encode()).hexdigest()
        idem = IdempotencyKey(f"key:{idempotency_key}" if idempotency_key else f"sha256:{body_sha256}",
                              body_sha256)
        # Validation maps a workload cell to a function of its text: distinct texts bound the workloads.
        most = len({str(r.get("workload")) for r in records if isinstance(r, Mapping)})
        used, replay = self._replay(idem, most)
        if replay is not None:
            return replay, True
        new = validate_client_rows(records)
        device = _one(new, "device", "rows.device")
        groups = _groups(new)
        keys = idem.keys(len(groups))
        for attempt in range(_OPTIMISTIC_TRIES + _LOCKED_TRIES):
            if attempt:
                used, replay = self._replay(idem, len(groups))
                if replay is not None:
                    return replay, True  # the conflict was a twin of this request that committed first
            # Parts whose key is present were stored by an earlier try, in workloads that still hold them.
            pending = [g for g, key in zip(groups, keys, strict=True) if key not in used]
            replaced = [key for key in keys if key in used]
            if attempt >= _OPTIMISTIC_TRIES:
                stored_records, models = self._upload_locked(groups, pending, device, idem, replaced)
                if stored_records is None:
                    continue
                break
            stored = {g.workload_id: self.storage.load_rows(g.workload_id) for g in pending}
            models = _fit_groups(pending, device, {k: (rev or 0, rows) for k, (rev, rows) in stored.items()})
            writes = _writes(groups, models, device, {k: rev or 0 for k, (rev, _) in stored.items()})
            try:
                stored_records = self.storage.add_uploads(writes, idem, replaced)
                break
            except RevisionConflict:
                # Another upload to one of these workloads committed first: refit on its rows after a pause.
                time.sleep(random.uniform(0.0, 0.02 * (attempt + 1)))
        else:
            names = ", ".join(repr(g.workload_id) for g in groups[:5])
            raise ApiError(409, f"workload(s) {names} are being changed by other uploads; retry",
                           {"rows.workload": ["concurrent uploads to this workload; retry"]})
        for record in stored_records:
            if record.id in models:
                self._remember(self._stored, record.id, (record.revision, models[record.id]))
        counts = {g.workload_id: len(g.records) if g.workload_id in models else 0 for g in groups}
        return upload_result([(r, counts[r.id]) for r in stored_records]), False

    def _upload_locked(self, groups: list[_Group], pending: list[_Group], device: str, idem: IdempotencyKey,
                       replaced: list[str]) -> tuple[list[WorkloadRecord] | None, dict[str, Any]]:
        """The upload under the write locks of its workloads (refit on the rows read under the locks)."""
        models: dict[str, Any] = {}

        def refit(stored: dict[str, tuple[int, list[dict]]]) -> list[WorkloadWrite]:
            models.update(_fit_groups(pending, device, stored))
            return _writes(groups, models, device, {k: rev for k, (rev, _) in stored.items()})

        try:
            # Every workload of the upload is locked (the parts stored by an earlier try too: their keys
            # are rewritten), so all of this transaction's locks are taken in one sorted order.
            return (self.storage.add_uploads_locked([g.workload_id for g in groups], device, refit, idem,
                                                    replaced), models)
        except RevisionConflict:
            return None, {}

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
        rows = validate_client_rows(as_one_workload(records), field)
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
