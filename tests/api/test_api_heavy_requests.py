"""What counts as heavy work (api.heavy): long mode lists, and recommendations and fleet plans whose every-mode
prediction is not computed yet, go through the gate and answer 503 with Retry-After when it is full; the same
requests once computed stay light, and short mode lists always are. Long mode lists count against the every-mode
rate limit as "all" does. The fitted-model caches drop the least recently used workload."""

from __future__ import annotations

import pytest
from api_fixtures import HOLD_S, gate_held, published_rows
from jetpredict.models.catalogue import load_device

WORKLOAD = {"id": "my-resnet"}
#: A gate that takes one heavy request and queues none: a held gate refuses the next one at once.
ONE_SLOT = {"HEAVY_SLOTS": 1, "HEAVY_QUEUE": 0, "HEAVY_WAIT_S": HOLD_S}


def catalogue_modes(device: str, count: int) -> list[dict]:
    """The first ``count`` catalogue modes of ``device`` as a client lists them."""

    knobs = load_device(device).modes().arrays().columns()
    return [{"cpu_cores": int(knobs["cpu_cores"][i]), "cpu_mhz": float(knobs["cpu_mhz"][i]),
             "gpu_mhz": float(knobs["gpu_mhz"][i]), "emc_mhz": float(knobs["emc_mhz"][i])} for i in range(count)]


def _busy(response) -> bool:
    return response.status_code == 503 and int(response.headers["Retry-After"]) >= 1


def _stored_behind(make_app, auth, **gate):
    """An app with the heavy-request ``gate`` settings and the workload ``my-resnet`` stored."""
    app = make_app(**gate)
    assert app.test_client().post("/v1/profiles", json={"rows": published_rows()}, headers=auth).status_code == 201
    return app


@pytest.fixture
def gated(make_app, auth):
    """An app with a one-slot gate and the workload ``my-resnet`` stored."""
    return _stored_behind(make_app, auth, **ONE_SLOT)


def test_a_long_mode_list_is_heavy_and_a_short_one_is_not(gated):
    from jetpredict.api.config import HEAVY_MODES

    client = gated.test_client()
    modes = catalogue_modes("agx-xavier", HEAVY_MODES + 1)
    short = {"workload": WORKLOAD, "modes": modes[:HEAVY_MODES], "confidence": 0.9}
    long = {**short, "modes": modes}
    with gate_held(gated):
        assert client.post("/v1/predictions", json=short).json["count"] == HEAVY_MODES  # light: predicted directly
        assert _busy(client.post("/v1/predictions", json=long))
    assert client.post("/v1/predictions", json=long).json["count"] == HEAVY_MODES + 1


def test_a_heavy_request_queued_past_its_wait_is_a_503_not_run_beside_the_held_one(make_app, auth):
    """With the one slot held, a request let into the queue waits HEAVY_WAIT_S (1 s) for it, then is answered 503 with
    Retry-After: it never runs without a slot (two heavy computations at once) nor fails as a 500."""
    from jetpredict.api.config import HEAVY_MODES

    app = _stored_behind(make_app, auth, HEAVY_SLOTS=1, HEAVY_QUEUE=1, HEAVY_WAIT_S=1)
    client = app.test_client()
    long = {"workload": WORKLOAD, "modes": catalogue_modes("agx-xavier", HEAVY_MODES + 1)}
    with gate_held(app):
        queued = client.post("/v1/predictions", json=long)
        assert _busy(queued) and "service" in queued.json["errors"], (queued.status_code, queued.json)
    assert client.post("/v1/predictions", json=long).status_code == 200


def test_a_long_mode_list_counts_against_the_every_mode_rate_limit(make_app, auth):
    from jetpredict.api.config import HEAVY_MODES

    client = make_app(RATE_LIMIT="off", RATE_LIMIT_ALL_MODES="2/minute").test_client()
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth).status_code == 201
    modes = catalogue_modes("nano", HEAVY_MODES + 1)
    long = {"workload": WORKLOAD, "device": "nano", "modes": modes}
    assert [client.post("/v1/predictions", json=long).status_code for _ in range(3)] == [200, 200, 429]
    short = {**long, "modes": modes[:HEAVY_MODES]}
    assert client.post("/v1/predictions", json=short).status_code == 200  # not an every-mode request


def test_a_recommendation_computing_every_mode_is_heavy_until_computed(gated):
    client = gated.test_client()
    body = {"workload": WORKLOAD, "objective": "min-energy", "confidence": 0.8123}
    with gate_held(gated):
        busy = client.post("/v1/recommendations", json=body)
        assert _busy(busy) and "service" in busy.json["errors"]
        assert client.get("/v1/devices").status_code == 200
    assert client.post("/v1/recommendations", json=body).status_code == 200
    with gate_held(gated):  # its every-mode prediction is kept now: light
        assert client.post("/v1/recommendations", json=body).status_code == 200
        assert _busy(client.post("/v1/recommendations", json={**body, "device": "orin-nx"}))


@pytest.mark.parametrize("modes", ["catalogue", "off the steps"])
def test_a_short_mode_list_is_light_before_its_device_is_computed(gated, modes):
    """A short list is predicted directly (the same numbers) while its device's every-mode prediction is not
    computed: it was heavy work until computed, so a burst of first requests (uploads racing queries, each
    revision a new model) got 503s, and a preset's off-step caps (AGX Xavier MODE_10W: GPU 520 MHz), never
    read from the space, were heavy on every request. Computing nothing, it leaves the space uncomputed."""
    from jetpredict.predictor.space import space_ready

    client = gated.test_client()
    listed = (catalogue_modes("agx-xavier", 3) if modes == "catalogue"
              else [load_device("agx-xavier").preset("MODE_10W").as_dict()])
    body = {"workload": WORKLOAD, "modes": listed, "confidence": 0.8234}
    with gate_held(gated):
        assert client.post("/v1/predictions", json=body).status_code == 200
    model = gated.extensions["jetpredict"].workloads.resolve(WORKLOAD).model
    assert not space_ready(model, "agx-xavier", 0.8234)


def test_a_small_fleet_plan_is_heavy_while_any_device_is_not_computed(gated):
    client = gated.test_client()
    one = {"workload": WORKLOAD, "deadline_s": 2000, "confidence": 0.8345,
           "clients": [{"id": "a", "device": "agx-xavier"}]}
    two = {**one, "clients": [*one["clients"], {"id": "b", "device": "orin-nx"}]}
    with gate_held(gated):
        busy = client.post("/v1/fleet-plans", json=one)
        assert _busy(busy) and "1 device" in busy.json["message"]
    assert client.post("/v1/fleet-plans", json=one).status_code == 200
    with gate_held(gated):
        assert client.post("/v1/fleet-plans", json=one).status_code == 200  # computed: light
        assert _busy(client.post("/v1/fleet-plans", json=two))  # orin-nx at this confidence is not
    assert client.post("/v1/fleet-plans", json=two).status_code == 200


def test_stored_models_are_dropped_least_recently_used_first(make_app, auth, monkeypatch):
    from jetpredict.api import workloads

    uploader = make_app().test_client()  # another worker uploads: the app below fits on lookup
    for name in "ABC":
        assert uploader.post("/v1/profiles", json={"rows": published_rows(as_id=name)},
                             headers=auth).status_code == 201
    fits: list[str] = []
    real_fit = workloads.fit_devices
    monkeypatch.setattr(workloads, "fit_devices", lambda rows, wid, field: fits.append(wid) or real_fit(rows, wid, field))
    client = make_app(MODEL_CACHE_SIZE=2).test_client()
    for name in "AABACA":
        assert client.post("/v1/predictions", json={"workload": {"id": name}, "modes": "presets"}).status_code == 200
    assert fits == ["A", "B", "C"]  # A, used last before C came, stays; B goes


def test_inline_models_are_dropped_least_recently_used_first(make_app, monkeypatch):
    from jetpredict.api import workloads

    fits: list[object] = []
    real_fit = workloads._fit
    monkeypatch.setattr(workloads, "_fit", lambda rows, field: fits.append(1) or real_fit(rows, field))
    client = make_app(MODEL_CACHE_SIZE=2).test_client()
    for name in "XXYXZX":
        body = {"workload": {"rows": published_rows(as_id=name)}, "modes": "presets"}
        assert client.post("/v1/predictions", json=body).status_code == 200
    assert len(fits) == 3  # X, Y, Z once each: X was used last before Z came
