"""``POST /v1/predictions``: epoch time, power and energy of a workload on a list of power modes.

The answer is JSON, or CSV (the CLI's ``predict --format csv`` columns) when ``Accept`` prefers
``text/csv``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from flask import Response, jsonify, request
from flask.views import MethodView
from flask_smorest import Blueprint
from jetpredict.api.routes.common import frame_records, services
from jetpredict.api.schemas import (
    PREDICTION_EXAMPLE,
    ErrorSchema,
    PredictionRequestSchema,
    PredictionResponseSchema,
    PredictionSchema,
)
from jetpredict.models.catalogue import MODE_FIELDS, load_device, mode_label
from jetpredict.models.errors import InputError
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE

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


def _float_list(values) -> list[float | None]:
    array = np.asarray(values, dtype=float)
    if np.isfinite(array).all():
        return array.tolist()
    out = array.astype(object)
    out[~np.isfinite(array)] = None
    return out.tolist()


def fast_predictions(model: Any, device_id: str, modes: str | list[dict], epochs: int | None,
                     confidence: float = DEFAULT_CONFIDENCE) -> list[dict[str, Any]] | None:
    """The rows of :func:`predictor.service.predict` for presets or a short list, without pandas.

    A request for a few modes is dominated by building data frames, not by the model; this path feeds
    the same :func:`predictor.service.prediction_columns` and keeps the columns of the response. None =
    take the full path: ``"all"``, or modes with an error that :func:`predict` reports with its row
    and field.
    """
    from jetpredict.predictor.service import prediction_columns

    if modes == "all":
        return None
    device = load_device(device_id)
    if modes == "presets":
        labels = [p.mode for p in device.presets]
        knobs = np.array([p.knobs() for p in device.presets], dtype=float)
    else:
        labels = [m.get("mode") or mode_label(*(m[k] for k in MODE_FIELDS)) for m in modes]
        knobs = np.array([[m[k] for k in MODE_FIELDS] for m in modes], dtype=float)
    arrays = dict(zip(MODE_FIELDS, knobs.T, strict=True))
    arrays["cpu_cores"] = arrays["cpu_cores"].astype(int)
    try:
        data = prediction_columns(model, labels, arrays, device_id, epochs, confidence)
    except InputError:
        return None
    exact = ("mode", "cpu_cores", "extrapolated", "extrapolated_knobs")  # not floats: as they are
    columns = {name: (_float_list(v) if name not in exact else list(np.asarray(v).tolist()))
               for name, v in data.items() if name in PREDICTION_COLUMNS and not np.isscalar(v)}
    scalars = {name: v for name, v in data.items() if name in PREDICTION_COLUMNS and np.isscalar(v)}
    names = list(columns)
    return [{**dict(zip(names, row, strict=True)), **scalars} for row in zip(*columns.values(), strict=True)]


def full_predictions(model: Any, device_id: str, modes: str | list[dict], epochs: int | None,
                     confidence: float = DEFAULT_CONFIDENCE) -> pd.DataFrame:
    """:func:`predictor.service.predict`, with mode errors named under ``modes``."""
    from jetpredict.predictor.service import predict

    try:
        return predict(model, modes_argument(modes), device=device_id, epochs=epochs, confidence=confidence)
    except InputError as exc:
        if exc.field and not exc.field.startswith(("modes", "device", "epochs", "confidence")):
            exc.field = f"modes.{exc.field}"
        raise


def provenance(model: Any, device: str, workload_id: str | None) -> dict[str, Any]:
    """Provenance of an answer for ``device``: across devices ``reference_source`` is that of the moved
    model (e.g. ``simulated``), as the CLI says; ``workload_source`` is where the workload's rows came from."""
    from jetpredict.predictor.service import provenance as predictor_provenance

    return {"device": device, "workload_id": workload_id, **predictor_provenance(model, device)}


def wants_csv() -> bool:
    best = request.accept_mimetypes.best_match(["application/json", CSV_MIMETYPE])
    return best == CSV_MIMETYPE


@blp.route("")
class Predictions(MethodView):
    @blp.arguments(PredictionRequestSchema(), example=PREDICTION_EXAMPLE)
    @blp.response(200, PredictionResponseSchema)
    @blp.alt_response(200, schema={"type": "string"}, content_type=CSV_MIMETYPE, success=True,
                      description="the predictions as CSV, when Accept prefers text/csv")
    @blp.alt_response(404, schema=ErrorSchema, description="workload id not stored")
    def post(self, body: dict):
        """Predict every requested mode (a list, ``"presets"`` or ``"all"``) for a stored or inline workload.

        ``device`` defaults to the workload's own device; another device gives a cross-device prediction.
        """
        svc = services()
        resolved = svc.workloads.resolve(body["workload"])
        model = resolved.model
        device = body.get("device") or model.device_id
        epochs = body.get("epochs")
        csv_out = wants_csv()
        confidence = body.get("confidence", DEFAULT_CONFIDENCE)
        records = None if csv_out else fast_predictions(model, device, body["modes"], epochs, confidence)
        if records is None:
            df = full_predictions(model, device, body["modes"], epochs, confidence)
            if csv_out:
                svc.metrics.predictions.labels("predictions").inc(len(df))
                return Response(df.to_csv(index=False, lineterminator="\n"), mimetype=CSV_MIMETYPE)
            records = frame_records(df, PREDICTION_COLUMNS)
        svc.metrics.predictions.labels("predictions").inc(len(records))
        # Bypass marshmallow's per-row dump: "all" can be ~30k rows; frame_records already made them JSON.
        return jsonify({**provenance(model, device, resolved.workload_id), "epochs": epochs,
                        "count": len(records), "predictions": records})
