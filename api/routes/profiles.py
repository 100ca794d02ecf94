"""``POST /v1/profiles``: store the profile rows of a workload and fit it (API key required).

Idempotent: an upload is made under its ``Idempotency-Key`` header, or without one under the SHA-256 of
its rows. A retry (after a timeout or a broken connection) is stored once and answered with the original
answer (201, header ``Idempotent-Replayed: true``); the same key with a different body is a 422.
"""

from __future__ import annotations

from flask import jsonify
from flask.views import MethodView
from flask_smorest import Blueprint
from jetpredict.api.routes.common import SECURITY, require_api_key, services
from jetpredict.api.schemas import (
    UPLOAD_EXAMPLE,
    ErrorSchema,
    ProfileUploadSchema,
    UploadHeadersSchema,
    UploadResultSchema,
)

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
    @blp.alt_response(409, schema=ErrorSchema, description="too many concurrent uploads to this workload")
    @blp.alt_response(422, schema=ErrorSchema,
                      description="rows invalid or not fittable, or Idempotency-Key reused with another body")
    def post(self, body: dict, idempotency_key: str | None = None):
        """Store rows of one workload on one device and refit it.

        Rows for an existing workload id are added to it. Nothing is stored when the rows, together
        with those already stored, cannot be fitted (422 says why). A retried upload (same
        ``Idempotency-Key``, or the same rows when no key is sent) is stored once and answered with the
        original result.
        """
        svc = services()
        result, replayed = svc.workloads.upload(body["rows"], idempotency_key)
        if not replayed:
            svc.metrics.fits.labels("upload").inc()
        response = jsonify(UploadResultSchema().dump(result))
        response.status_code = 201
        response.headers[REPLAYED_HEADER] = "true" if replayed else "false"
        return response
