"""``POST /v1/recommendations``: the best power mode for an objective under power/time constraints."""

from __future__ import annotations

from flask.views import MethodView
from flask_smorest import Blueprint
from jetpredict.api.routes.common import clean, services
from jetpredict.api.routes.predictions import PREDICTION_COLUMNS
from jetpredict.api.schemas import (
    RECOMMENDATION_EXAMPLE,
    ErrorSchema,
    RecommendationRequestSchema,
    RecommendationSchema,
)

blp = Blueprint("recommendations", __name__, url_prefix="/v1/recommendations",
                description="Best power mode under constraints")


def _row(row: dict | None) -> dict | None:
    return None if row is None else {k: clean(row[k]) for k in PREDICTION_COLUMNS if k in row}


@blp.route("")
class Recommendations(MethodView):
    @blp.arguments(RecommendationRequestSchema(), example=RECOMMENDATION_EXAMPLE)
    @blp.response(200, RecommendationSchema)
    @blp.alt_response(404, schema=ErrorSchema, description="workload id not stored")
    def post(self, body: dict):
        """Best mode for ``min-time`` or ``min-energy`` within ``max_power_w`` / ``max_epoch_time_s``,
        with the time-energy Pareto front of the feasible modes. ``best`` is null when no mode fits."""
        from jetpredict.predictor.service import recommend, recommendation_answer

        svc = services()
        resolved = svc.workloads.resolve(body["workload"])
        model = resolved.model
        device = body.get("device") or model.device_id
        constraints = {k: v for k, v in body["constraints"].items() if v is not None}
        result = recommend(model, body["objective"], max_power_w=constraints.get("max_power_w"),
                           max_epoch_time_s=constraints.get("max_epoch_time_s"), device=device,
                           epochs=body.get("epochs"), confidence=body["confidence"])
        svc.metrics.predictions.labels("recommendations").inc()
        # The same document as `recommend --format json` (predictor.service.recommendation_answer).
        answer = recommendation_answer(model, result, resolved.workload_id)
        return {**answer, "best": _row(answer["best"]), "pareto": [_row(r) for r in answer["pareto"]]}
