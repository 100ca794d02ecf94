"""``POST /v1/predictions``: epoch time, power and energy of a workload on a list of power modes.

The answer is JSON, or CSV (the CLI's ``predict --format csv`` columns) when ``Accept`` prefers
``text/csv``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from flask import Response, jsonify, request
from flask.views import MethodView
from flask_smorest import Blueprint

from api.routes.common import frame_records, services
from api.schemas import ErrorSchema, PredictionRequestSchema, PredictionResponseSchema, PredictionSchema
from models.catalogue import MODE_FIELDS, mode_label
from models.errors import InputError

blp = Blueprint("predictions", __name__, url_prefix="/v1/predictions",
                description="Predict epoch time and energy per power mode")

PREDICTION_COLUMNS = list(PredictionSchema().fields)
CSV_MIMETYPE = "text/csv"


def modes_argument(modes: str | list[dict]) -> str | pd.DataFrame:
    """``"presets"``/``"all"`` as is; a list of mode objects as a table (unlabelled modes get a label)."""
    if isinstance(modes, str):
        return modes
    rows = [{"mode": m.get("mode") or mode_label(*(m[k] for k in MODE_FIELDS)),
             **{k: m[k] for k in MODE_FIELDS}} for m in modes]
    return pd.DataFrame(rows, columns=["mode", *MODE_FIELDS])


def resolved_modes(device: str, modes: str | list[dict]) -> pd.DataFrame:
    """The modes checked against ``device``; errors are named under ``modes``."""
    from predictor.service import resolve_modes

    try:
        return resolve_modes(device, modes_argument(modes))
    except InputError as exc:
        if exc.field and not exc.field.startswith(("modes", "device")):
            exc.field = f"modes.{exc.field}"
        raise


def provenance(model: Any, device: str, workload_id: str | None) -> dict[str, Any]:
    return {"device": device, "workload_id": workload_id, "reference_source": str(model.reference_source),
            "profiled_modes": int(model.profiled_modes), "model_version": str(model.model_version)}


def wants_csv() -> bool:
    best = request.accept_mimetypes.best_match(["application/json", CSV_MIMETYPE])
    return best == CSV_MIMETYPE


@blp.route("")
class Predictions(MethodView):
    @blp.arguments(PredictionRequestSchema)
    @blp.response(200, PredictionResponseSchema)
    @blp.alt_response(200, schema={"type": "string"}, content_type=CSV_MIMETYPE, success=True,
                      description="the predictions as CSV, when Accept prefers text/csv")
    @blp.alt_response(404, schema=ErrorSchema, description="workload id not stored")
    def post(self, body: dict):
        """Predict every requested mode (a list, ``"presets"`` or ``"all"``) for a stored or inline workload.

        ``device`` defaults to the workload's own device; another device gives a cross-device prediction.
        """
        from predictor.service import predict

        svc = services()
        resolved = svc.workloads.resolve(body["workload"])
        model = resolved.model
        device = body.get("device") or model.device_id
        modes = resolved_modes(device, body["modes"])
        df = predict(model, modes, device_id=device, epochs=body.get("epochs"))
        svc.metrics.predictions.labels("predictions").inc(len(df))
        if wants_csv():
            return Response(df.to_csv(index=False, lineterminator="\n"), mimetype=CSV_MIMETYPE)
        records = frame_records(df, PREDICTION_COLUMNS)
        # Bypass marshmallow's per-row dump: "all" can be ~30k rows; frame_records already made them JSON.
        return jsonify({**provenance(model, device, resolved.workload_id), "epochs": body.get("epochs"),
                        "count": len(records), "predictions": records})
