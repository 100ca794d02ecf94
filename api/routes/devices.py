"""``GET /v1/devices`` and ``GET /v1/devices/{device}/power-modes`` (presets, or the full space paged)."""

from __future__ import annotations

import functools
import json
from dataclasses import asdict

from flask import Response
from flask.views import MethodView
from jetpredict.api.errors import ApiError
from jetpredict.api.openapi_doc import EXCLUSIVE_PARAMETERS
from jetpredict.api.power_modes_schemas import (
    POWER_MODES_SYNONYMS,
    PowerModePageSchema,
    PowerModesQuerySchema,
)
from jetpredict.api.routes.common import Blueprint
from jetpredict.api.schemas import DeviceListSchema, ErrorSchema
from jetpredict.models.catalogue import Device, list_devices, load_device
from jetpredict.models.errors import UnknownDeviceError

blp = Blueprint("devices", __name__, url_prefix="/v1/devices", description="Jetson types and power modes")


@functools.cache
def _catalogue_body() -> bytes:
    """``GET /v1/devices`` as sent: the catalogue is fixed for the life of the process, so it is dumped
    through its schema and encoded once (the lightest request should stay light under load)."""
    document = DeviceListSchema().dump({"devices": [device_summary(d) for d in list_devices()]})
    return json.dumps(document, separators=(",", ":")).encode()


def device_summary(device: Device) -> dict:
    return {
        "id": device.id, "name": device.name, "specs": asdict(device.specs),
        "default_preset": device.default_preset, "presets": len(device.presets),
        "power_modes": len(device.modes()),
        "knob_ranges": {k: {"min": lo, "max": hi} for k, (lo, hi) in device.knob_ranges().items()},
        "sources": dict(device.sources),
    }


@blp.route("")
class Devices(MethodView):
    @blp.response(200, DeviceListSchema)
    def get(self):
        """Every Jetson type in the catalogue with its specs and power-mode counts."""
        return Response(_catalogue_body(), mimetype="application/json")


@blp.route("/<string:device>/power-modes")
class PowerModes(MethodView):
    @blp.arguments(PowerModesQuerySchema(), location="query")
    @blp.response(200, PowerModePageSchema)
    @blp.alt_response(404, schema=ErrorSchema, description="unknown device")
    @blp.alt_response(422, schema=ErrorSchema, description="a bad parameter, or both of a pair given: space and "
                      "modes, or limit/offset and page/page_size")
    @blp.doc(**{EXCLUSIVE_PARAMETERS: [list(map(list, pair)) for pair in POWER_MODES_SYNONYMS]})
    def get(self, query: dict, device: str):
        """The nvpmodel presets (``space=presets``) or a page of all custom modes (``space=all``; ``modes`` is
        the same parameter, and ``page``/``page_size`` page as ``limit``/``offset`` do)."""
        try:
            dev = load_device(device)
        except UnknownDeviceError as exc:
            raise ApiError(404, exc.message, {"device": [exc.message]}) from None
        limit, offset = query["limit"], query["offset"]
        if query["space"] == "presets":
            rows = [p.listing() for p in dev.presets]
            total = len(rows)
            rows = rows[offset:offset + limit]
        else:
            space = dev.modes()
            total = len(space)
            rows = [m.as_dict() for m in space[offset:offset + limit]]
        paged = {k: query[k] for k in ("page", "page_size") if k in query}
        return {"device": dev.id, "space": query["space"], "total": total, "limit": limit, "offset": offset,
                **paged, "modes": rows}
