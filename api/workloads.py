"""Workloads: upload (validate, fit, store) and an in-memory cache of fitted models.

A fitted :class:`predictor.model.WorkloadModel` is only ever built here by fitting rows: the stored rows
of a workload (cached per revision, so a refit by another worker process is picked up on the next
request) or the inline rows of one request (cached by the SHA-256 of the rows). Nothing a client sends
is unpickled.

One workload id may hold rows of several device types (one device per upload): each device's rows are
fitted on their own (:class:`predictor.workload_devices.DeviceModels`), a request for a device with rows
is served by them, and one for a device without rows by the model of the workload's best other device,
moved across. Rows are compared in canonical form (:func:`api.client_rows.canonical_row`: numbers parsed, text
stripped): a row already stored is not stored again, and an upload identical to an earlier one up to
number formatting is that upload (replayed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import sqlalchemy as sa
from jetpredict.api.client_rows import (
    as_one_workload,
    canonical_row,
    check_scalar_cells,
    records_sha256,
    row_key,
    validate_client_rows,
    workload_id_problem,
)
from jetpredict.api.config import DEFAULT_HEAVY_FIT_ROWS
from jetpredict.api.errors import ApiError, FieldErrors
from jetpredict.api.heavy import HeavyGate
from jetpredict.api.schemas import IDEMPOTENCY_HEADER, UploadedWorkloadSchema
from jetpredict.api.storage import (
    FIT_FIELDS,
    IdempotencyKey,
    RevisionConflict,
    Storage,
    WorkloadRecord,
    WorkloadWrite,
    device_fits,
    fit_column,
    upload_result,
)
from jetpredict.api.store_failures import is_unreachable, write_failure
from jetpredict.api.upload_groups import MAX_UPLOAD_WORKLOADS, UploadGroup, group_upload, one_value
from jetpredict.models.catalogue import resolve_device
from jetpredict.models.errors import InputError, UnknownWorkloadError
from jetpredict.models.profile_files import rows_to_records
from jetpredict.models.profile_rows import mode_conflicts, validate_records
from jetpredict.predictor.model import MODEL_VERSION
from jetpredict.predictor.workload_devices import DeviceModels

log = logging.getLogger("jetpredict.api")
T = TypeVar("T")

_OPTIMISTIC_TRIES = 3  # then uploads to the workload queue on the write lock
_LOCKED_TRIES = 2
#: The fields each workload's entry of an upload's answer holds a value in (its schema requires them).
ANSWER_REQUIRED = tuple(name for name, field in UploadedWorkloadSchema().fields.items() if field.required)


@dataclass(frozen=True)
class Resolved:
    """The fitted model that serves a request and, for a stored workload, its id and revision.

    ``model`` is fitted on ``rows_device``'s rows: the device asked for when the workload holds rows of
    it, else the workload's best other device (the prediction is then cross-device). ``devices``: the
    device ids the workload holds rows of; ``models``: their fitted models.
    """

    model: Any  # predictor.model.WorkloadModel
    workload_id: str | None
    revision: int | None
    devices: tuple[str, ...] = ()
    rows_device: str | None = None
    models: DeviceModels | None = None

    def answer_fields(self) -> dict[str, object]:
        """What every answer says about the rows it rests on: ``workload_devices``, ``rows_device``, and the
        ``revision`` of a stored workload that was fitted (None for inline rows and reference workloads): a
        client holding answers of two fits tells them apart."""
        return {"workload_devices": list(self.devices or (self.model.device_id,)),
                "rows_device": self.rows_device or self.model.device_id, "revision": self.revision}


#: Fit-summary fields that :func:`fit_summary` never leaves null: a stored fit without one was written before it
#: was kept, and is refreshed on reading as one of an older model version is (``rows_scatter_rel`` may be null).
FIELDS_OF_EVERY_FIT = ("split_source",)


#: Seconds after which a listing starts no refit of a fit stored by another model version (after an upgrade): a
#: page of 1,000 such workloads, asked for without a key, would otherwise be 1,000 fits in one request.
LISTING_REFIT_S = 1.0


def fit_summary(model: Any, rows: pd.DataFrame | None = None) -> dict[str, object]:
    """The provenance of a fitted model that is stored with its workload and shown by the API (``rows``: the
    frame it was fitted on, where the caller holds it)."""
    from jetpredict.predictor.fit_check import fit_caveats
    from jetpredict.predictor.service import provenance

    # fit_caveats keeps them with the model: the answers served from this fit say the same, uncomputed.
    return {"device": model.device_id, **provenance(model), "has_power": bool(model.has_power),
            **fit_caveats(model, rows)}


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


def _conflict(message: str, errors: dict[str, list[str]]) -> ApiError:
    return ApiError(409, message, errors)


@dataclass(frozen=True)
class _Fitted:
    """A group's outcome: the rows to store (those not stored yet) and the model fitted with them (None
    when every row is stored already: nothing changes)."""

    model: Any
    records: list[dict]
    stored_devices: frozenset[str]  # the devices of the workload's stored rows, before this upload
    fitted_rows: pd.DataFrame | None = None  # the frame ``model`` was fitted on


def _fit_alone(group: UploadGroup, name: str, several: bool) -> Any:
    try:
        return _fit(group.frame, "rows")
    except InputError as exc:
        if several:
            raise FieldErrors(f"{name}: {exc.message}", {
                k: [f"{name}: {m}" for m in v] for k, v in exc.as_errors().items()}) from None
        raise


def _fit_group(group: UploadGroup, device: str, stored: list[dict], several: bool) -> _Fitted:
    """``group``'s new rows and its workload's model on ``device``, fitted on that device's stored rows
    and the new ones (rows of the workload's other devices are fitted on their own, and not here).

    Rows equal in canonical form (:func:`row_key`) to a stored row of the workload, or to an earlier row
    of the group, are not stored again. :class:`ApiError` 409 when the new rows are valid alone but clash
    with the stored ones (contradicting modes, a fit that fails only together with them); InputError
    (422) when they cannot be fitted even alone. ``several``: the upload holds other workloads, so
    messages name this one.
    """
    name = f"workload {group.workload_id!r}"
    first = group.indexes[0]
    devices = frozenset(str(r.get("device")) for r in stored)
    own = [r for r in stored if str(r.get("device")) == device]
    seen = {row_key(r) for r in own}
    keep: list[int] = []  # positions in the group of the rows not stored yet
    for i, record in enumerate(group.records):
        key = row_key(record)
        if key not in seen:
            seen.add(key)
            keep.append(i)
    if not keep:
        return _Fitted(None, [], devices)
    if len(keep) < len(group.records):
        group = UploadGroup(group.workload_id, [group.indexes[i] for i in keep],
                            group.frame.iloc[keep].reset_index(drop=True), [group.records[i] for i in keep])
    if not own:
        return _Fitted(_fit_alone(group, name, several), group.records, devices)
    on = f" on {device!r}" if devices != {device} else ""
    # Lines 1..S are the device's stored rows (in the order GET /v1/workloads/{id} lists them), S+1.. the
    # new ones.
    lines = list(range(1, len(own) + len(group.records) + 1))
    clashes = [p for p in mode_conflicts([*own, *group.records], lines) if p.line > len(own)]
    if clashes:
        errors: dict[str, list[str]] = {}
        for p in clashes:
            errors.setdefault(f"rows.{group.indexes[p.line - len(own) - 1]}.{p.field}", []).append(
                f"contradicts the {len(own)} rows stored for {name}{on} (lines 1..{len(own)} are the "
                f"stored rows, then this upload's rows of it): {p.message}")
        key, messages = next(iter(errors.items()))
        raise _conflict(f"{key}: {messages[0]}", errors)
    try:
        together = validate_records([*own, *group.records], what=f"stored and new rows of {name}", stored=len(own))
        return _Fitted(_fit(together, "rows"), group.records, devices, together)
    except InputError as exc:
        _fit_alone(group, name, several)  # a 422 when the new rows cannot be fitted even alone
        message = f"{name} cannot be fitted with its {len(own)} stored rows{on} and these: {exc.message}"
        raise _conflict(message, {f"rows.{first}.workload": [message]}) from None


def _fit_groups(groups: Sequence[UploadGroup], device: str, stored: Mapping[str, tuple[int, list[dict]]]
                ) -> dict[str, _Fitted]:
    """``{workload id: fitted}`` for every group, or one error naming every group's problems: 422 if any
    group's rows are bad on their own, else 409."""
    models: dict[str, _Fitted] = {}
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


def _writes(groups: Sequence[UploadGroup], models: Mapping[str, _Fitted], device: str, revisions: Mapping[str, int]
            ) -> list[WorkloadWrite]:
    """The upload's writes: the groups with new rows (``models``) with them, the others empty (stored by
    an earlier try, or every row already stored)."""
    out = []
    for g in groups:
        fitted = models.get(g.workload_id)
        if fitted is not None and fitted.model is not None:
            out.append(WorkloadWrite(g.workload_id, device, fitted.records, revisions[g.workload_id],
                                     fit_summary(fitted.model, fitted.fitted_rows)))
        else:
            out.append(WorkloadWrite(g.workload_id, device, [], 0, {}))
    return out


class WorkloadService:
    """Upload, look up and cache fitted workload models (thread-safe)."""

    def __init__(self, storage: Storage, cache_size: int = 64, gate: HeavyGate | None = None,
                 heavy_fit_rows: int = DEFAULT_HEAVY_FIT_ROWS) -> None:
        self.storage = storage
        self.cache_size = cache_size
        # Fits over more rows than ``heavy_fit_rows`` (an upload's refit, a stored workload fitted on
        # lookup) are heavy work on ``gate``; without a gate every fit runs where it is asked for.
        self.gate = gate
        self.heavy_fit_rows = heavy_fit_rows
        # id -> (revision, its models, or the InputError with which today's checks refuse its stored rows:
        # neither a prediction nor a listing reads and checks them again until the workload changes; an
        # error is kept as (error, the field it was raised for), since the field names the caller's path).
        self._stored: OrderedDict[str, tuple[int, DeviceModels | tuple[InputError, str]]] = OrderedDict()
        self._inline: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def _heavy_gate(self, rows: int) -> HeavyGate | None:
        """The gate a fit over ``rows`` rows goes through; None (it runs where it is asked for) up to
        ``heavy_fit_rows`` rows."""
        return self.gate if rows > self.heavy_fit_rows else None

    def _fit_work(self, rows: int, what: str, work: Callable[[], T]) -> T:
        """``work()``, a fit over ``rows`` rows, as heavy work beyond ``heavy_fit_rows`` (503 with
        Retry-After when the gate is full)."""
        gate = self._heavy_gate(rows)
        return work() if gate is None else gate.run(f"{what} of {rows:,} rows", work)

    def _recall(self, cache: OrderedDict, key: str) -> Any:
        """The cached value of ``key`` (None if absent), moved to the end: the least recently used entry,
        not the first inserted, is the one ``_remember`` drops."""
        with self._lock:
            value = cache.get(key)
            if value is not None:
                cache.move_to_end(key)
            return value

    def _remember(self, cache: OrderedDict, key: str, value: Any) -> None:
        with self._lock:
            cache[key] = value
            cache.move_to_end(key)
            while len(cache) > self.cache_size:
                cache.popitem(last=False)

    # -- uploads ---------------------------------------------------------------------------------
    def _replay(self, idem: IdempotencyKey, most_workloads: int, same: Collection[str] | None = None,
                clash: bool = True) -> tuple[set[str], dict[str, object] | None]:
        """(keys of ``idem`` already used, the original answer if the whole upload is still stored).

        ``most_workloads`` bounds the number of workloads in the upload (each has its key). The answer is
        replayed only when every workload of the upload still holds its part (its key is present) and it holds a
        value in every ``idem.required`` field (one kept before such a field was is answered afresh); see
        :class:`api.storage.IdempotencyKey`. ``same``: the request hashes that count as this request
        (default: ``idem``'s). A key used for another request body is a 409 (``clash``), or nothing found.
        """
        same = {idem.request_sha256} if same is None else set(same)
        found = self.storage.find_idempotent(idem.keys(min(max(1, most_workloads), MAX_UPLOAD_WORKLOADS)))
        if not found:
            return set(), None
        if any(sha256 not in same for sha256, _ in found.values()):
            if not clash:
                return set(), None
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
        whole = all(key in found for key in idem.keys(n)) and idem.holds_required(response)
        return set(found), (response if whole else None)

    def upload(self, records: Sequence[Mapping[str, object]], idempotency_key: str | None = None
               ) -> tuple[dict[str, object], bool]:
        """Validate, fit and store one upload; returns (the answer, replayed?).

        The rows may hold several workloads (a sweep of two models, say), all of one device: they are
        grouped by ``workload`` in order of first appearance, each group is fitted together with the rows
        already stored for it, and every group is stored in one transaction, or none is. Rows invalid on
        their own are a 422; rows that are valid alone but clash with what is stored (a
        label or a measured mode that the stored rows contradict, a fit that fails only together with the
        stored rows) are a 409; either way nothing is stored, and the error names ``rows.I.FIELD``.

        An upload is made under ``idempotency_key`` (the client's ``Idempotency-Key``) or, without one,
        under the SHA-256 of its canonical rows (:func:`api.client_rows.canonical_row`): a retry of an upload that was
        stored, or the same rows formatted differently, is answered with the original answer and stores
        nothing; the same key with another body is a 409. If a workload of the upload was deleted since,
        the retry stores that workload's part again and no other. Rows already stored in their workload
        (equal in canonical form) are not stored again: an upload of nothing new stores nothing
        (``rows_stored`` 0, the revision unchanged).

        The workload ids may hold rows of other devices: each device's rows are fitted on their own.
        """
        check_scalar_cells(records)
        raw_sha256 = records_sha256(records)
        # Validation maps a workload cell to a function of its text: distinct texts bound the workloads.
        most = len({str(r.get("workload")) for r in records if isinstance(r, Mapping)})
        # The byte-identical retry first, before validating (as earlier versions keyed their uploads).
        def key_for(sha256: str) -> IdempotencyKey:  # the client's key, else the rows' digest
            return IdempotencyKey(f"key:{idempotency_key}" if idempotency_key else f"sha256:{sha256}", sha256,
                                  ANSWER_REQUIRED)

        _, replay = self._replay(key_for(raw_sha256), most, clash=False)
        if replay is not None:
            return replay, True
        new = validate_client_rows(records)
        canonical_sha256 = records_sha256([canonical_row(r) for r in rows_to_records(new)])
        idem = key_for(canonical_sha256)
        used, replay = self._replay(idem, most, {canonical_sha256, raw_sha256})
        if replay is not None:
            return replay, True
        device = one_value(new, "device", "rows")
        groups = group_upload(new)
        keys = idem.keys(len(groups))
        fit_rows = len(new)  # the rows the refit covers, stored ones included once they are read
        for attempt in range(_OPTIMISTIC_TRIES + _LOCKED_TRIES):
            if attempt:
                used, replay = self._replay(idem, len(groups), {canonical_sha256, raw_sha256})
                if replay is not None:
                    return replay, True  # the conflict was a twin of this request that committed first
            # Parts whose key is present were stored by an earlier try, in workloads that still hold them. Every key
            # present yet no replay (the kept answer lacks a required field): every part is answered afresh.
            pending = groups if used >= set(keys) else [g for g, k in zip(groups, keys, strict=True) if k not in used]
            replaced = [key for key in keys if key in used]
            if attempt >= _OPTIMISTIC_TRIES:
                stored_records, models = self._upload_locked(groups, pending, device, idem, replaced, fit_rows)
                if stored_records is None:
                    continue
                break
            stored = {g.workload_id: self.storage.get_workload_rows(g.workload_id) for g in pending}
            revisions = {k: 0 if record is None else record.revision for k, (record, _) in stored.items()}
            fit_rows = len(new) + sum(len(stored_rows) for _, stored_rows in stored.values())
            models = self._fit_work(fit_rows, "an upload's refit", partial(
                _fit_groups, pending, device, {k: (revisions[k], part) for k, (_, part) in stored.items()}))
            # Parts given nothing new (or stored by an earlier try) are answered from their fits, refreshed if stale.
            for record in [r for r, _ in stored.values() if r is not None and models[r.id].model is None] + [
                    r for g in groups if g not in pending and (r := self.storage.get_workload(g.workload_id))]:
                self.current_record(record)
            writes = _writes(groups, models, device, revisions)
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
        counts: dict[str, int] = {}
        for record in stored_records:
            fitted = models.get(record.id)
            counts[record.id] = len(fitted.records) if fitted is not None else 0
            if fitted is not None and fitted.model is not None:
                self._cache_upload(record, fitted, device)
        return upload_result([(r, counts[r.id]) for r in stored_records], device), False

    def _cache_upload(self, record: WorkloadRecord, fitted: _Fitted, device: str) -> None:
        """Cache the workload's models after an upload that refitted ``device``: the other devices' models
        are those cached for the revision the upload was made against, when there are any."""
        if fitted.stored_devices <= {device}:  # the workload's only device
            self._remember(self._stored, record.id, (record.revision, DeviceModels.single(fitted.model)))
            return
        with self._lock:
            cached = self._stored.get(record.id)
        if cached is not None and cached[0] == record.revision - 1 and isinstance(cached[1], DeviceModels) and \
                set(cached[1].models) >= fitted.stored_devices - {device}:
            models = {**cached[1].models, device: fitted.model}
            self._remember(self._stored, record.id, (record.revision, DeviceModels(models, record.device)))

    def _upload_locked(self, groups: list[UploadGroup], pending: list[UploadGroup], device: str,
                       idem: IdempotencyKey, replaced: list[str], fit_rows: int
                       ) -> tuple[list[WorkloadRecord] | None, dict[str, Any]]:
        """The upload under the write locks of its workloads (refit on the rows read under the locks).
        ``fit_rows``: the rows the last refit covered; beyond ``heavy_fit_rows`` the gate admits the upload
        before any lock is taken, so no lock is held while it waits for a slot."""
        models: dict[str, Any] = {}
        # Stale stored fits are refreshed (current_record) before the locks, as the optimistic path does: the
        # refresh writes on a connection of its own. Which parts get nothing new is known only under the locks,
        # so every part's fit is refreshed if stale (one read each where none is), lest its answer say null.
        for group in groups:
            if (record := self.storage.get_workload(group.workload_id)) is not None:
                self.current_record(record)

        def refit(stored: dict[str, tuple[int, list[dict]]]) -> list[WorkloadWrite]:
            models.update(_fit_groups(pending, device, stored))
            return _writes(groups, models, device, {k: rev for k, (rev, _) in stored.items()})

        gate = self._heavy_gate(fit_rows)
        admitted = (contextlib.nullcontext() if gate is None
                    else gate.admit(f"an upload's refit of {fit_rows:,} rows"))
        try:
            # Every workload of the upload is locked (the parts stored by an earlier try too: their keys
            # are rewritten), so all of this transaction's locks are taken in one sorted order.
            with admitted:
                return (self.storage.add_uploads_locked([g.workload_id for g in groups], device, refit, idem,
                                                        replaced), models)
        except RevisionConflict:
            return None, {}

    def delete(self, workload_id: str) -> bool:
        with self._lock:
            self._stored.pop(workload_id, None)
        return self.storage.delete_workload(workload_id)

    # -- lookups ---------------------------------------------------------------------------------
    def stored(self, workload_id: str, field: str = "workload.id", device: str | None = None) -> Resolved:
        """The fitted model of a stored workload that serves ``device`` (default: the device of its first
        rows): that device's own model if the workload holds rows of it, else the model of its best other
        device (:class:`predictor.workload_devices.DeviceModels`). :class:`UnknownWorkloadError` (404) if
        not stored."""
        problem = workload_id_problem(workload_id)
        if problem:  # never stored (uploads refuse such ids); and not every database takes it as text
            raise UnknownWorkloadError(f"workload is not stored: a workload id {problem}", field)
        revision = self.storage.revision(workload_id)
        if revision is None:
            raise UnknownWorkloadError(f"workload {workload_id!r} is not stored; upload its rows with "
                                       "POST /v1/profiles", field)
        cached = self._recall(self._stored, workload_id)
        if cached is None or cached[0] != revision or (isinstance(cached[1], tuple) and cached[1][1] != field):
            revision, rows = self.storage.load_rows(workload_id)
            if revision is None:
                raise UnknownWorkloadError(f"workload {workload_id!r} is not stored", field)
            try:
                outcome: DeviceModels | tuple[InputError, str] = self._fit_work(
                    len(rows), f"a fit of stored workload {workload_id!r}", partial(fit_devices, rows, workload_id, field))
            except InputError as exc:
                log.warning("stored rows of workload %r no longer fit: %s", workload_id, exc.message)
                outcome = (exc, field)
            cached = (revision, outcome)
            self._remember(self._stored, workload_id, cached)
        if isinstance(cached[1], tuple):
            raise _fresh_error(cached[1][0])
        return self._served(cached[1], workload_id, revision, device)

    def current_records(self, records: Sequence[WorkloadRecord]) -> list[WorkloadRecord]:
        """``records`` as a listing shows them: each through :meth:`current_record` until :data:`LISTING_REFIT_S` has
        passed (no refit starts after it), the rest as stored (their ``model_version`` says which model fitted them)."""
        deadline = time.monotonic() + LISTING_REFIT_S
        return [self.current_record(r) if time.monotonic() < deadline else r for r in records]

    def current_record(self, record: WorkloadRecord) -> WorkloadRecord:
        """``record`` with the fit summaries of the running model. Those stored by another model version
        (before an upgrade), or before a field every fit now has was kept (:data:`FIELDS_OF_EVERY_FIT`), are
        refitted, as a prediction would be, and stored again where the store takes it; where today's checks
        refuse the stored rows the summaries are null: the workload is not fitted."""
        fits = device_fits(record)
        if all(fit.get("model_version") == MODEL_VERSION and all(fit.get(k) is not None for k in FIELDS_OF_EVERY_FIT)
               for fit in fits.values()):
            return record
        try:
            resolved = self.stored(record.id)
        except UnknownWorkloadError:
            return record  # deleted since it was read
        except InputError:  # logged once, by stored(), when the refusal was cached
            blank = dict.fromkeys(FIT_FIELDS)
            fit = fit_column(blank, {device: (had.get("rows"), blank) for device, had in fits.items()})
            return dataclasses.replace(record, fit=fit)
        models = resolved.models.models if resolved.models is not None else {}
        summaries = {device: fit_summary(models[device]) for device in fits if device in models}
        if len(summaries) != len(fits) or resolved.revision != record.revision:
            return record  # changed since it was read: the next read shows the new state
        fit = fit_column(summaries[record.device],
                         {device: (fits[device].get("rows"), summary) for device, summary in summaries.items()})
        try:
            self.storage.refresh_fit(record.id, record.revision, fit)
        except sa.exc.SQLAlchemyError as exc:  # a store that cannot write now refits (cached) on later reads
            if write_failure(exc) is None and not is_unreachable(exc):
                raise
        return dataclasses.replace(record, fit=fit)

    @staticmethod
    def _served(models: DeviceModels, workload_id: str | None, revision: int | None, device: str | None
                ) -> Resolved:
        served = models.serve(None if device is None else resolve_device(device))
        return Resolved(served.model, workload_id, revision, models.devices, served.rows_device, models)

    def inline(self, records: Sequence[Mapping[str, object]], field: str = "workload.rows") -> Resolved:
        """A model fitted from rows sent with the request (not stored)."""
        check_scalar_cells(records, field)
        rows = validate_client_rows(as_one_workload(records), field)
        key = records_sha256([canonical_row(r) for r in rows_to_records(rows)])  # 4 and 4.0: one entry
        model = self._recall(self._inline, key)
        if model is None:  # rows of a cached key passed every check below
            one_value(rows, "device", field)
            model = _fit(rows, field)
            self._remember(self._inline, key, model)
        return Resolved(model, None, None, (model.device_id,), model.device_id, DeviceModels.single(model))

    def resolve(self, workload: Mapping[str, object], field: str = "workload", device: str | None = None
                ) -> Resolved:
        """``{"id": ...}`` (stored) or ``{"rows": [...]}`` (inline); ``device``: the device the answer is
        for (a stored workload serves it with that device's own rows when it holds any)."""
        if workload.get("id") is not None:
            return self.stored(str(workload["id"]), f"{field}.id", device)
        return self.inline(workload.get("rows") or [], f"{field}.rows")


def _fresh_error(cached: InputError) -> InputError:
    """A new exception with ``cached``'s class and fields: raising the one cached object again would grow its
    traceback (and the request frames it holds) with every request, and share it between threads."""
    fresh = type(cached).__new__(type(cached))
    fresh.__dict__.update(cached.__dict__)
    fresh.args = cached.args
    return fresh


def fit_devices(rows: Sequence[Mapping[str, object]], workload_id: str, field: str) -> DeviceModels:
    """One model per device of a stored workload's rows; the primary device is that of its first row."""
    by_device: dict[str, list[Mapping[str, object]]] = {}
    for row in rows:
        by_device.setdefault(str(row.get("device")), []).append(row)
    models = {dev: _fit(validate_records(part, what=f"stored rows of {workload_id} on {dev}", stored=len(part)),
                        field)
              for dev, part in by_device.items()}
    return DeviceModels(models, str(rows[0].get("device")))
