"""``GET /v1/workloads``, ``GET /v1/workloads/{id}``, ``DELETE /v1/workloads/{id}`` (API key)."""

from __future__ import annotations

from flask.views import MethodView
from jetpredict.api.client_rows import workload_id_problem
from jetpredict.api.routes.common import SECURITY, Blueprint, require_api_key, services
from jetpredict.api.schemas import (
    ID_CHARS_OUT,
    MAX_WORKLOAD_ID_CHARS,
    ErrorSchema,
    PageQuerySchema,
    WorkloadDetailSchema,
    WorkloadListSchema,
    storable_text,
)
from jetpredict.api.storage import WorkloadRecord, device_fits, stored_fit_fields
from jetpredict.models.errors import UnknownWorkloadError
from marshmallow import fields, validate

blp = Blueprint("workloads", __name__, url_prefix="/v1/workloads", description="Stored workloads")


class WorkloadQuerySchema(PageQuerySchema):
    """A page of stored workloads, optionally only those whose id contains ``search``."""

    # Only text an id can hold (api.schemas' id characters: no '/', '\\', control characters; PostgreSQL
    # refuses NUL); the document states the rule as a pattern, so a client can tell before it asks.
    search = fields.String(load_default="", validate=[
        validate.Length(0, MAX_WORKLOAD_ID_CHARS),
        validate.Regexp(rf"^[^{ID_CHARS_OUT}]*$", error="must not contain '/', '\\' or control characters"),
        storable_text],
        metadata={"description": "only workloads whose id contains this text (case-insensitive); empty: all"})


def workload_summary(record: WorkloadRecord) -> dict:
    """A workload as listed: its first device's fit at the top, every device's in ``devices``/``fits``
    (null fields where the running model cannot fit its rows: :meth:`WorkloadService.current_record`)."""
    fit = record.fit or {}
    fits = device_fits(record)
    return {"id": record.id, "device": record.device, "revision": record.revision,
            "rows_stored": record.rows_stored, "created_at": record.created_at,
            "updated_at": record.updated_at, **stored_fit_fields(fit), "devices": sorted(fits),
            "fits": [{"device": device, **fits[device]} for device in sorted(fits)]}


def _not_stored(workload_id: str) -> UnknownWorkloadError:
    return UnknownWorkloadError(f"workload {workload_id!r} is not stored", "workload_id")


def _storable(workload_id: str) -> str:
    """``workload_id`` as an upload stores it (stripped, as every text cell of a row) if it could be
    stored; else 404 before any query (PostgreSQL refuses NUL in text)."""
    if workload_id_problem(workload_id):
        raise _not_stored(workload_id)
    return workload_id.strip()


@blp.route("")
class Workloads(MethodView):
    @blp.arguments(WorkloadQuerySchema(), location="query")
    @blp.response(200, WorkloadListSchema)
    def get(self, query: dict):
        """Stored workloads, sorted by id (paged; ``search`` keeps those whose id contains it)."""
        svc = services()
        total, records = svc.storage.list_workloads(query["limit"], query["offset"], query["search"] or None)
        return {"total": total, "limit": query["limit"], "offset": query["offset"],
                "workloads": [workload_summary(r) for r in svc.workloads.current_records(records)]}


@blp.route("/<string:workload_id>")
class Workload(MethodView):
    @blp.response(200, WorkloadDetailSchema)
    @blp.alt_response(404, schema=ErrorSchema, description="workload not stored")
    def get(self, workload_id: str):
        """One stored workload with its profile rows and the provenance of its fit."""
        workload_id = _storable(workload_id)
        record, rows = services().storage.get_workload_rows(workload_id)  # one snapshot: they agree
        if record is None:
            raise _not_stored(workload_id)
        return {**workload_summary(services().workloads.current_record(record)), "rows": rows}

    @require_api_key
    @blp.doc(security=SECURITY)
    @blp.response(204)
    @blp.alt_response(401, schema=ErrorSchema, description="header X-API-Key missing")
    @blp.alt_response(403, schema=ErrorSchema, description="header X-API-Key wrong")
    @blp.alt_response(404, schema=ErrorSchema, description="workload not stored")
    def delete(self, workload_id: str):
        """Delete a workload with all its rows (its id uploaded again counts its revision on from here)."""
        if not services().workloads.delete(_storable(workload_id)):
            raise _not_stored(workload_id)
