"""``POST /v1/fleet-plans``: per-client power modes for a federated-learning round under a deadline."""

from __future__ import annotations

from flask.views import MethodView
from flask_smorest import Blueprint
from jetpredict.api.routes.common import clean, services
from jetpredict.api.schemas import FLEET_EXAMPLE, ErrorSchema, FleetPlanRequestSchema, FleetPlanSchema

blp = Blueprint("fleet_plans", __name__, url_prefix="/v1/fleet-plans",
                description="Plan a federated-learning round over a fleet of Jetsons")


def _provenance(model, clients) -> dict:
    """The least trusted reference over every client device (cross-device clients rest on its sweeps)."""
    from jetpredict.predictor.service import provenance
    from jetpredict.predictor.terms import least_trusted

    devices = sorted({str(c["device"]) for c in clients} | {model.device_id})
    per_device = [provenance(model, d) for d in devices]
    return {**per_device[0], "reference_source": least_trusted(p["reference_source"] for p in per_device)}


@blp.route("")
class FleetPlans(MethodView):
    @blp.arguments(FleetPlanRequestSchema(), example=FLEET_EXAMPLE)
    @blp.response(200, FleetPlanSchema)
    @blp.alt_response(404, schema=ErrorSchema, description="workload id not stored")
    def post(self, body: dict):
        """For each client, the mode that meets the round deadline with least energy; total energy of the
        round. Clients on other device types than the workload's get cross-device predictions."""
        from jetpredict.predictor.service import plan_fleet

        svc = services()
        resolved = svc.workloads.resolve(body["workload"])
        model = resolved.model
        plan = clean(plan_fleet(model, [dict(c) for c in body["clients"]], body["deadline_s"],
                                epochs=body["epochs"], confidence=body["confidence"]).as_dict())
        svc.metrics.predictions.labels("fleet-plans").inc(len(body["clients"]))
        return {"workload_id": resolved.workload_id, **_provenance(model, body["clients"]),
                "deadline_s": body["deadline_s"], "epochs": body["epochs"], **plan,
                "infeasible_clients": plan.get("infeasible_clients") or []}
