"""``POST /v1/predictions``: epoch time, power and energy of a workload on a list of power modes.

The answer is JSON rows, JSON columns (``layout: "columns"``), CSV (the CLI's ``predict --format csv``
columns) when ``Accept`` prefers ``text/csv``, or an Arrow stream (``Accept:
application/vnd.apache.arrow.stream``); gzip when accepted. See :mod:`api.answers`.
"""

from __future__ import annotations

from dataclasses import replace

from flask import Response
from flask.views import MethodView
from jetpredict.api import answers
from jetpredict.api.config import HEAVY_MODES
from jetpredict.api.query_schemas import PredictionRequestSchema, PredictionResponseSchema
from jetpredict.api.routes.common import (
    Blueprint,
    RepeatedBodyParser,
    doc_only,
    heavy_unless,
    request_workload,
    services,
    workload_error_docs,
)
from jetpredict.api.schemas import PREDICTION_EXAMPLE
from jetpredict.predictor.service import prediction_answer

blp = Blueprint("predictions", __name__, url_prefix="/v1/predictions",
                description="Predict epoch time and energy per power mode")
blp.ARGUMENTS_PARSER = RepeatedBodyParser()  # the same bodies come again and again

CSV_MIMETYPE = answers.CSV_MIMETYPE


def predictions_response(body: dict) -> Response:
    """The answer to a validated prediction request, in the form the client asked for.

    Answers for every mode are heavy work (:mod:`api.heavy`): computed once per fitted model, device,
    epochs, confidence, form and encoding, then served from the answer cache. So are lists of more than
    HEAVY_MODES modes; a shorter list is predicted directly while its device's every-mode prediction is not
    computed (``predictor.service.predict_knobs``).
    """
    svc = services()

    def counted(encoded: answers.Encoded) -> Response:
        svc.metrics.served("predictions").inc(encoded.count)
        return answers.response(encoded)

    fmt = answers.answer_format(body.get("layout", "rows"))
    gzip_ok = answers.accepts_gzip()
    resolved = request_workload(body["workload"], device=body.get("device"))
    model, modes = resolved.model, body["modes"]

    def compute():
        answer = prediction_answer(model, modes, body.get("device"), body.get("epochs"), body["confidence"],
                                   resolved.workload_id, fill_labels=True)
        # Which of the workload's devices' rows serve this device (own rows, or transferred from), and which
        # revision of a stored workload was fitted.
        answer = replace(answer, provenance={**answer.provenance, **resolved.answer_fields()})
        return answers.encode(answer, fmt, gzip_ok)

    if not isinstance(modes, str):  # a list: answered as asked, not kept
        # A short list is light: read from the device's every-mode prediction when computed, else predicted
        # directly (predictor.service.predict_knobs); a long one costs as "all" does.
        light = len(modes) <= HEAVY_MODES
        return counted(heavy_unless(light, f"a prediction of {len(modes):,} listed modes", compute))
    # "presets" and "all" are the same answer for every client of this model: computed once and kept.
    key = (modes, resolved.workload_id, resolved.revision, body.get("device") or model.device_id,
           body.get("epochs"), float(body["confidence"]), fmt, gzip_ok)
    encoded = svc.answers.get(model, key)
    if encoded is None and modes == "presets":
        encoded = compute()
        svc.answers.put(model, key, encoded)
    elif encoded is None:
        def build() -> answers.Encoded:
            cached = svc.answers.get(model, key)  # computed by another request while this one waited
            if cached is None:
                cached = compute()
                svc.answers.put(model, key, cached)
            return cached

        encoded = svc.heavy.run("an answer for every mode", build)
    return counted(encoded)


@blp.route("")
class Predictions(MethodView):
    @blp.arguments(PredictionRequestSchema(), example=PREDICTION_EXAMPLE)
    @doc_only(  # the view returns a ready Response: these only document it (no layer per request)
        blp.response(200, PredictionResponseSchema),
        blp.alt_response(200, schema={"type": "string"}, content_type=CSV_MIMETYPE, success=True,
                         description="the predictions as CSV, when Accept prefers text/csv"),
        blp.alt_response(200, schema={"type": "string", "format": "binary"}, content_type=answers.ARROW_MIMETYPE,
                         success=True, description="the predictions as an Apache Arrow IPC stream, when Accept "
                         "prefers it (406 when the server lacks pyarrow)"),
        *workload_error_docs(blp, {406: "Arrow asked for, pyarrow not installed"}))
    def post(self, body: dict) -> Response:
        """Predict every requested mode (a list, ``"presets"`` or ``"all"``) for a stored or inline workload.

        ``device`` defaults to the workload's own device; another device gives a cross-device prediction.
        """
        return predictions_response(body)
