"""A query body's optional fields mean what is documented: left out, one defaults to what the library's
function defaults to and the OpenAPI document states; a cap holds each mode's interval top to it, a top
exactly at the cap included."""

from __future__ import annotations

import inspect

from jetpredict.predictor.service import fleet_answer


def test_a_fleet_plan_without_epochs_plans_the_librarys_default_as_documented(client, stored):
    default = inspect.signature(fleet_answer).parameters["epochs"].default
    schema = client.get("/openapi.json").json["components"]["schemas"]["FleetPlanRequest"]
    assert schema["properties"]["epochs"]["default"] == default == 1
    body = {"workload": {"id": "my-resnet"}, "deadline_s": 3600,
            "clients": [{"id": "a", "device": "agx-xavier"}]}
    unsaid = client.post("/v1/fleet-plans", json=body)
    said = client.post("/v1/fleet-plans", json={**body, "epochs": default})
    assert unsaid.status_code == said.status_code == 200, unsaid.json
    assert unsaid.json["epochs"] == default
    assert unsaid.json["clients"] == said.json["clients"]


def test_a_power_cap_holds_the_intervals_top_and_takes_a_top_exactly_at_it(client, stored):
    ref = {"workload": {"id": "my-resnet"}, "objective": "min-time"}
    free = client.post("/v1/recommendations", json=ref).json["best"]
    point, top = free["avg_power_w"], free["avg_power_w_high"]
    assert point < top, free
    at = client.post("/v1/recommendations", json={**ref, "constraints": {"max_power_w": top}})
    assert at.status_code == 200 and at.json["best"]["mode"] == free["mode"], at.json
    # Between the point and the top: the fastest mode's interval reaches past the cap, so it is not chosen.
    cap_w = (point + top) / 2
    under = client.post("/v1/recommendations", json={**ref, "constraints": {"max_power_w": cap_w}}).json
    assert under["best"]["mode"] != free["mode"], under
    assert all(p["avg_power_w_high"] <= cap_w for p in [under["best"], *under["pareto"]]), under
