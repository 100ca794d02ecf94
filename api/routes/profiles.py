"""``POST /v1/profiles``: store profile rows of one or more workloads and fit them (API key required).

Idempotent: an upload is made under its ``Idempotency-Key`` header, or without one under the SHA-256 of
its canonical rows (numbers as floats, text stripped: ``4`` and ``4.0`` are one value). A retry (after a
timeout or a broken connection), or the same rows formatted otherwise, is stored once and answered with
the original answer (201, header ``Idempotent-Replayed: true``); the same key with a different body is a
409. Rows already stored in their workload are not stored again.

A workload id may hold rows of several device types (one device per upload): each device's rows are
fitted on their own and serve that device; the answer's ``device`` is the upload's, ``devices`` lists all.
"""

from __future__ import annotations

from flask import jsonify
from flask.views import MethodView
from jetpredict.api.client_rows import DOTS_ONLY_WHY
from jetpredict.api.config import DEFAULT_HEAVY_FIT_ROWS
from jetpredict.api.routes.common import SECURITY, Blueprint, require_api_key, services
from jetpredict.api.schemas import (
    UPLOAD_EXAMPLE,
    ErrorSchema,
    ProfileUploadSchema,
    UploadHeadersSchema,
    UploadResultSchema,
)
from jetpredict.api.upload_groups import MAX_UPLOAD_WORKLOADS
from jetpredict.models.profile_rows import DUPLICATE_TIME_SPREAD

blp = Blueprint("profiles", __name__, url_prefix="/v1/profiles", description="Upload profile rows")
REPLAYED_HEADER = "Idempotent-Replayed"
_WORKLOAD_PATH = "#/paths/~1v1~1workloads~1{workload_id}"
_PARAMS = {"workload_id": "$response.body#/workload_id"}
#: OpenAPI links of the 201 (added to the document by api.app): what a client, or a stateful fuzzer, can
#: do with the stored workload next.
UPLOAD_LINKS = {
    "GetWorkload": {"operationRef": f"{_WORKLOAD_PATH}/get", "parameters": _PARAMS},
    "DeleteWorkload": {"operationRef": f"{_WORKLOAD_PATH}/delete", "parameters": _PARAMS},
    "PredictWorkload": {"operationRef": "#/paths/~1v1~1predictions/post",
                        "requestBody": {"workload": {"id": "$response.body#/workload_id"}, "modes": "presets"}},
}


@blp.route("")
class Profiles(MethodView):
    @require_api_key
    @blp.doc(security=SECURITY)
    @blp.arguments(UploadHeadersSchema(), location="headers", as_kwargs=True)
    @blp.arguments(ProfileUploadSchema(), example=UPLOAD_EXAMPLE)
    @blp.response(201, UploadResultSchema, headers={
        REPLAYED_HEADER: {"description": "true when this answers a retry of an upload already stored",
                          "schema": {"type": "string", "enum": ["true", "false"]}}})
    @blp.alt_response(401, schema=ErrorSchema, description="header X-API-Key missing")
    @blp.alt_response(403, schema=ErrorSchema, description="header X-API-Key wrong")
    @blp.alt_response(409, schema=ErrorSchema, description=(
        "the rows are valid alone but clash with what is stored: rows that contradict the workload's stored "
        "rows of the same device (a mode label with other knobs, the same mode measured more "
        f"than {DUPLICATE_TIME_SPREAD:g}x apart), a fit that fails only together with them; Idempotency-Key "
        "already used for another body; or too many concurrent uploads to a workload (retry)"))
    @blp.alt_response(422, schema=ErrorSchema,
                      description="rows invalid or not fittable on their own, rows of several devices, "
                      f"more than {MAX_UPLOAD_WORKLOADS} workloads, or a workload id made only of dots "
                      f"({DOTS_ONLY_WHY})")
    @blp.alt_response(503, schema=ErrorSchema, description=(
        "the store cannot write; or busy with heavy requests, when the refit covers more than "
        f"{DEFAULT_HEAVY_FIT_ROWS:,} stored and uploaded rows (by default): see Retry-After; nothing is stored"))
    def post(self, body: dict, idempotency_key: str | None = None):
        """Store rows of one or more workloads on one device and refit each.

        The rows may hold several workload ids (e.g. a sweep of two models); all rows of one upload have
        one device. Rows for an existing workload id are added to it, whatever devices it holds rows of
        already (each device is fitted on its own rows); rows it holds already (equal up to number
        formatting) are not stored again, and an upload of nothing new stores nothing (``rows_stored``
        0, the revision unchanged). Every workload of the upload is stored, or none is: nothing is
        stored when any workload's rows are bad (422) or clash with its stored rows (409); the error
        names ``rows.I.FIELD``. The answer describes the first workload, as a single-workload upload
        always did, and lists every workload in ``workloads``. A retried upload (same
        ``Idempotency-Key``, or the same rows up to number formatting when no key is sent) is stored
        once and answered with the original result.
        """
        svc = services()
        result, replayed = svc.workloads.upload(body["rows"], idempotency_key)
        if not replayed:  # one fit per workload that got rows (a retry after a delete skips the others)
            svc.metrics.fits.labels("upload").inc(sum(1 for w in result["workloads"] if w["rows_stored"]))
        response = jsonify(UploadResultSchema().dump(result))
        response.status_code = 201
        response.headers[REPLAYED_HEADER] = "true" if replayed else "false"
        return response
