"""``POST /v1/recommendations``: the best power mode for an objective under power/time constraints."""

from __future__ import annotations

from flask.views import MethodView
from jetpredict.api.query_schemas import RecommendationRequestSchema, RecommendationSchema
from jetpredict.api.routes.common import (
    Blueprint,
    RepeatedBodyParser,
    doc_only,
    heavy_unless,
    request_workload,
    services,
    workload_error_docs,
)
from jetpredict.api.schemas import RECOMMENDATION_EXAMPLE
from jetpredict.models.errors import InputError
from jetpredict.predictor.space import space_ready

blp = Blueprint("recommendations", __name__, url_prefix="/v1/recommendations",
                description="Best power mode under constraints")
blp.ARGUMENTS_PARSER = RepeatedBodyParser()  # the same bodies come again and again


@blp.route("")
class Recommendations(MethodView):
    @blp.arguments(RecommendationRequestSchema(), example=RECOMMENDATION_EXAMPLE)
    @blp.response(200, RecommendationSchema)
    @doc_only(*workload_error_docs(blp))
    def post(self, body: dict):
        """Best mode for ``min-time`` or ``min-energy`` within ``max_power_w`` / ``max_epoch_time_s``, with
        the time-energy Pareto front of the feasible modes the out-of-range rule lets stand. ``best`` is null
        when no mode fits."""
        from jetpredict.predictor.service import recommend, recommendation_answer

        resolved = request_workload(body["workload"], device=body.get("device"))
        services().metrics.served("recommendations").inc()
        # The choice reads the device's every-mode prediction: light when kept, else heavy work.
        light = space_ready(resolved.model, body.get("device"), body["confidence"])

        def answer_it() -> dict:
            # The same document as `recommend --format json` (predictor.service.recommendation_answer).
            result = recommend(resolved.model, body["objective"], device=body.get("device"),
                               epochs=body.get("epochs"), confidence=body["confidence"],
                               **body["constraints"])
            return recommendation_answer(resolved.model, result, resolved.workload_id)

        try:
            answer = heavy_unless(light, "a recommendation over every mode", answer_it)
        except InputError as exc:
            # The device's own cap check names the bare argument; the request nests it under constraints.
            if exc.field in body["constraints"]:
                raise InputError(exc.message, f"constraints.{exc.field}") from None
            raise
        # And which of the workload's devices' rows serve this device, and the stored revision fitted.
        return {**answer, **resolved.answer_fields()}
