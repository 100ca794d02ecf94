"""``POST /v1/fleet-plans``: per-client power modes for a federated-learning round under a deadline."""

from __future__ import annotations

from flask.views import MethodView
from jetpredict.api.answers import accepts_gzip, encode_json, response
from jetpredict.api.config import HEAVY_CLIENTS
from jetpredict.api.heavy import Encoded
from jetpredict.api.query_schemas import FleetPlanRequestSchema, FleetPlanSchema
from jetpredict.api.routes.common import (
    Blueprint,
    RepeatedBodyParser,
    doc_only,
    heavy_unless,
    request_workload,
    services,
    workload_error_docs,
)
from jetpredict.api.schemas import FLEET_EXAMPLE
from jetpredict.predictor.workload_devices import DeviceModels, spaces_to_compute

blp = Blueprint("fleet_plans", __name__, url_prefix="/v1/fleet-plans",
                description="Plan a federated-learning round over a fleet of Jetsons")
blp.ARGUMENTS_PARSER = RepeatedBodyParser()  # the same bodies come again and again


@blp.route("")
class FleetPlans(MethodView):
    @blp.arguments(FleetPlanRequestSchema(), example=FLEET_EXAMPLE)
    @blp.response(200, FleetPlanSchema)
    @doc_only(*workload_error_docs(blp))
    def post(self, body: dict):
        """For each client, the mode that meets the round deadline with least energy; total energy of the
        round. Clients on other device types than the workload's get cross-device predictions."""
        from jetpredict.predictor.service import fleet_answer

        svc = services()
        resolved = request_workload(body["workload"])
        clients = body["clients"]
        gzip_ok = accepts_gzip()

        models = resolved.models or DeviceModels.single(resolved.model)

        def plan() -> Encoded:
            # Every device of the workload's: each client is served by its own device's rows where stored.
            answer = fleet_answer(models, clients, body["deadline_s"],
                                  epochs=body["epochs"], confidence=body["confidence"],
                                  workload_id=resolved.workload_id)
            answer["workload_devices"] = resolved.answer_fields()["workload_devices"]
            # Encoded here, not by marshmallow's per-client dump: 10,000 clients are 8-12 MB of JSON.
            return encode_json(answer, gzip_ok)

        # Most of a small plan's cost is one every-mode prediction per device: heavy when
        # any is not computed yet, whatever the client count; and when clients are many (JSON of MBs).
        uncached = spaces_to_compute(models, (c["device"] for c in clients), body["confidence"])
        light = len(clients) <= HEAVY_CLIENTS and uncached == 0
        what = (f"a fleet plan of {len(clients):,} clients" if uncached == 0
                else f"a fleet plan computing {uncached} device(s)' every-mode predictions")
        encoded = heavy_unless(light, what, plan)
        svc.metrics.served("fleet-plans").inc(len(clients))
        return response(encoded)
