"""``GET /v1/reference-workloads[/{device}/{workload}]``: the built-in workloads shipped with the package.

Every device carries reference sweeps (profile rows of a few well-known networks on many of its modes:
published measurements for AGX Xavier, digital-twin sweeps for every device). They are the prior of every
fit; here they are also offered as ready workloads, so that a client without profile rows of its own
(the mode-chooser page at ``/``, a first ``curl``) can predict them: fetch the rows, then send them as an
inline workload ``{"rows": [...]}`` to ``/v1/predictions`` or ``/v1/recommendations``. The rows keep their
``source`` column, so answers say whether the workload's rows are published, measured or simulated.
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd
from flask.views import MethodView
from jetpredict.api.errors import ApiError
from jetpredict.api.routes.common import Blueprint
from jetpredict.api.schemas import ErrorSchema, QuerySchema
from jetpredict.models.catalogue import device_ids, load_device
from jetpredict.models.errors import UnknownDeviceError
from jetpredict.models.profile_files import frame_records, read_profile_csv
from jetpredict.models.profile_rows import SOURCE_KINDS, source_kind
from marshmallow import Schema, fields, validate

blp = Blueprint("reference_workloads", __name__, url_prefix="/v1/reference-workloads",
                description="Built-in workloads: the bundled reference sweeps, usable as inline rows")

class ReferenceWorkloadSchema(Schema):
    device = fields.String(required=True)
    workload = fields.String(required=True)
    source = fields.String(required=True, metadata={"description": "published | measured | simulated"})
    citation = fields.String(allow_none=True, metadata={"description": "the rows' `source` text"})
    modes = fields.Integer(required=True, metadata={"description": "profiled power modes (one row each)"})


class ReferenceWorkloadListSchema(Schema):
    workloads = fields.List(fields.Nested(ReferenceWorkloadSchema), required=True)


class ReferenceWorkloadRowsSchema(ReferenceWorkloadSchema):
    rows = fields.List(fields.Dict(), required=True,
                       metadata={"description": 'profile rows, ready to send as {"workload": {"rows": rows}}'})


class ReferenceQuerySchema(QuerySchema):
    device = fields.String(load_default=None, metadata={"description": "only this device's workloads"})
    source = fields.String(load_default=None, validate=validate.OneOf(SOURCE_KINDS),
                           metadata={"description": "only this source kind"})


@lru_cache(maxsize=8)
def _device_rows(device_id: str) -> tuple[tuple[str, pd.DataFrame], ...]:
    """(source kind, rows) per reference CSV of ``device_id``, most trusted first (``SOURCE_KINDS``' order;
    read once)."""
    from jetpredict.predictor.reference import reference_csvs

    out = []
    for path in reference_csvs(device_id):
        rows = read_profile_csv(path)
        kind = source_kind(rows["source"].iloc[0]) if "source" in rows.columns and len(rows) else "measured"
        out.append((kind, rows))
    return tuple(sorted(out, key=lambda item: SOURCE_KINDS.index(item[0])))


def _check_device(device_id: str) -> None:
    try:
        load_device(device_id)
    except UnknownDeviceError as exc:
        raise ApiError(404, exc.message, {"device": [exc.message]}) from None


def reference_workloads(device_id: str | None = None, source: str | None = None) -> list[dict]:
    """Summaries of the built-in workloads (all devices unless ``device_id``), most trusted source first."""
    out = []
    for dev in [device_id] if device_id else device_ids():
        for kind, rows in _device_rows(dev):
            if source and kind != source:
                continue
            for workload, group in rows.groupby("workload", sort=True):
                citation = str(group["source"].iloc[0]) if "source" in group.columns else None
                out.append({"device": dev, "workload": str(workload), "source": kind,
                            "citation": citation, "modes": len(group)})
    return out


@blp.route("")
class ReferenceWorkloads(MethodView):
    @blp.arguments(ReferenceQuerySchema(), location="query")
    @blp.response(200, ReferenceWorkloadListSchema)
    @blp.alt_response(404, schema=ErrorSchema, description="unknown device")
    def get(self, query: dict):
        """The built-in workloads per device and source (published, simulated).

        Fetch one's rows from ``/v1/reference-workloads/{device}/{workload}`` and send them as
        ``{"workload": {"rows": rows}}`` to predict or recommend for it.
        """
        if query.get("device"):
            _check_device(query["device"])
        return {"workloads": reference_workloads(query.get("device"), query.get("source"))}


@blp.route("/<string:device>/<string:workload>")
class ReferenceWorkload(MethodView):
    @blp.arguments(ReferenceQuerySchema(only=("source",)), location="query")
    @blp.response(200, ReferenceWorkloadRowsSchema)
    @blp.alt_response(404, schema=ErrorSchema, description="unknown device or workload")
    def get(self, query: dict, device: str, workload: str):
        """The profile rows of one built-in workload (the most trusted source unless ``source``)."""
        _check_device(device)
        for kind, rows in _device_rows(device):
            if query.get("source") and kind != query["source"]:
                continue
            group = rows[rows["workload"] == workload]
            if len(group):
                records = frame_records(group, list(group.columns))
                citation = str(group["source"].iloc[0]) if "source" in group.columns else None
                return {"device": device, "workload": workload, "source": kind, "citation": citation,
                        "modes": len(records), "rows": records}
        known = sorted({w["workload"] for w in reference_workloads(device)})
        message = (f"no built-in workload {workload!r} for {device!r}"
                   f"{' with source ' + query['source'] if query.get('source') else ''}; "
                   f"built-in: {', '.join(known)}")
        raise ApiError(404, message, {"workload": [message]})
