"""``POST /v1/profiles``: store the profile rows of a workload and fit it (API key required)."""

from __future__ import annotations

from flask.views import MethodView
from flask_smorest import Blueprint
from jetpredict.api.routes.common import SECURITY, require_api_key, services
from jetpredict.api.schemas import UPLOAD_EXAMPLE, ErrorSchema, ProfileUploadSchema, UploadResultSchema

blp = Blueprint("profiles", __name__, url_prefix="/v1/profiles", description="Upload profile rows")


@blp.route("")
class Profiles(MethodView):
    @require_api_key
    @blp.doc(security=SECURITY)
    @blp.arguments(ProfileUploadSchema(), example=UPLOAD_EXAMPLE)
    @blp.response(201, UploadResultSchema)
    @blp.alt_response(401, schema=ErrorSchema, description="header X-API-Key missing")
    @blp.alt_response(403, schema=ErrorSchema, description="header X-API-Key wrong")
    @blp.alt_response(409, schema=ErrorSchema, description="too many concurrent uploads to this workload")
    def post(self, body: dict):
        """Store rows of one workload on one device and refit it.

        Rows for an existing workload id are added to it. Nothing is stored when the rows, together
        with those already stored, cannot be fitted (422 says why).
        """
        svc = services()
        record, stored = svc.workloads.upload(body["rows"])
        svc.metrics.fits.labels("upload").inc()
        return {"workload_id": record.id, "rows_stored": stored, "rows_total": record.rows_stored,
                "revision": record.revision, "device": record.device, **{
                    k: record.fit[k] for k in ("model_version", "reference_source", "profiled_modes",
                                               "has_power")}}
