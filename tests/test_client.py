"""``jetpredict.client.Client`` against a live ``jetpredict serve`` (tools.testing.LiveServer, SQLite in a temp
folder), and against tiny local stubs for what a healthy service does not do on demand: Retry-After on
503/429, an answer lost after the service acted, no answer at all."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from client_stub import error_body

from jetpredict.client import (
    API_KEY_ENV,
    IDEMPOTENCY_HEADER,
    SERVICE_KEYS_ENV,
    BadRequest,
    Client,
    Conflict,
    ConnectionFailed,
    NotFound,
    Overloaded,
    ServiceError,
    Unauthorized,
    default_api_key,
    read_rows_csv,
)
from tools.testing import LiveServer, free_port, published_rows

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

ROOT = Path(__file__).resolve().parents[1]
KEY = "client-test-key"
MODES = [{"cpu_cores": 4, "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "emc_mhz": 1600.0},
         {"cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377.0, "emc_mhz": 2133.0}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with LiveServer(tmp_path_factory.mktemp("service"), api_keys=f"{KEY},other-key", workers=1) as live:
        yield live


@pytest.fixture
def api(server):
    return Client(server.url, api_key=KEY, timeout_s=30, retries=0)


@pytest.fixture(scope="module")
def stored(server):
    """Workload ``client-resnet``: 4 published rows, uploaded once for the module."""
    answer = Client(server.url, api_key=KEY).upload_profiles(published_rows(as_id="client-resnet"))
    assert answer["workload_id"] == "client-resnet" and answer["rows_stored"] == 4
    return answer


# ----------------------------------------------------------------------------------------- live service

def test_health_devices_and_power_modes(api):
    assert api.health()["status"] == "ok"
    devices = {d["id"]: d for d in api.devices()["devices"]}
    assert {"agx-xavier", "orin-nano", "nano"} <= set(devices)
    assert devices["agx-xavier"]["knob_ranges"]["gpu_mhz"]["max"] > 1000
    presets = api.power_modes("orin-nano")
    assert presets["space"] == "presets" and presets["total"] == len(presets["modes"]) >= 2
    page = api.power_modes("orin-nano", space="all", limit=5, offset=10)
    assert page["total"] == devices["orin-nano"]["power_modes"] and len(page["modes"]) == 5
    modes = list(api.iter_power_modes("orin-nano", page_size=1000))
    assert len(modes) == page["total"] and modes[10:15] == page["modes"]


def test_upload_fit_list_predict_recommend_and_plan(api, stored):
    listed = api.workloads(search="client-res")
    assert [w["id"] for w in listed["workloads"]] == ["client-resnet"]
    detail = api.workload("client-resnet")
    assert detail["rows_stored"] == 4 and detail["profiled_modes"] == 4 and len(detail["rows"]) == 4
    answer = api.predictions("client-resnet", modes=MODES, epochs=3)
    assert answer["workload_id"] == "client-resnet" and len(answer["predictions"]) == 2
    fast, slow = answer["predictions"][1], answer["predictions"][0]
    assert fast["epoch_time_s"] < slow["epoch_time_s"]
    assert fast["epoch_time_s_low"] <= fast["epoch_time_s"] <= fast["epoch_time_s_high"]
    presets = api.predictions({"id": "client-resnet"}, device="agx-xavier")
    assert len(presets["predictions"]) == len(api.power_modes("agx-xavier")["modes"])
    best = api.recommendations("client-resnet", "min-time", max_power_w=15)
    assert best["feasible"] and best["best"]["avg_power_w_high"] <= 15 and best["pareto"]
    plan = api.fleet_plans("client-resnet", [{"id": "a", "device": "agx-xavier"}, {"id": "b", "device": "nano"}],
                           deadline_s=3600, epochs=1)
    assert [c["id"] for c in plan["clients"]] == ["a", "b"] and plan["total_energy_j"] > 0


def test_inline_rows_predict_without_a_stored_workload(api):
    inline = api.reference_workload("orin-nano", api.reference_workloads("orin-nano")["workloads"][0]["workload"])
    answer = api.predictions(inline["rows"], modes="presets")
    assert answer["device"] == "orin-nano" and answer["predictions"]


def test_a_lost_answer_is_retried_and_stored_once(server, stub):
    """The first answer is lost after the service stored the rows; the retry carries the same key, and the
    service answers it from the first upload instead of storing again."""
    proxy = stub(["drop", "forward"], upstream=server.url)
    answer = Client(proxy.url, api_key=KEY, retries=2, backoff_s=0.01).upload_profiles(
        published_rows(as_id="client-retry"))
    keys = [r["headers"].get(IDEMPOTENCY_HEADER) for r in proxy.requests]
    assert len(keys) == 2 and keys[0] == keys[1] and uuid.UUID(keys[0]).version == 4
    assert proxy.requests[0]["body"] == proxy.requests[1]["body"]
    assert answer["workload_id"] == "client-retry" and answer["rows_stored"] == 4  # the first answer
    assert Client(server.url).workload("client-retry")["rows_stored"] == 4
    # A new logical upload gets a new key; the same key for another body is refused, naming the header.
    again = Client(server.url, api_key=KEY).upload_profiles(published_rows(as_id="client-retry", n=3))
    assert again["rows_stored"] == 0
    with pytest.raises(Conflict) as err:
        Client(server.url, api_key=KEY).upload_profiles(published_rows(as_id="client-retry", n=2), idempotency_key=keys[0])
    assert err.value.status == 409 and err.value.field == f"headers.{IDEMPOTENCY_HEADER}"


def test_an_unsafe_request_is_not_resent_once_it_reached_the_service(api, server, stub):
    api.upload_profiles(published_rows(as_id="client-delete"))
    proxy = stub(["drop", "forward"], upstream=server.url)
    with pytest.raises(ConnectionFailed) as err:
        Client(proxy.url, api_key=KEY, retries=3, backoff_s=0.01).delete_workload("client-delete")
    assert len(proxy.requests) == 1 and err.value.attempts == 1 and not err.value.before_sending
    with pytest.raises(NotFound):
        api.workload("client-delete")  # the delete ran; a retry would have answered 404


def test_bad_rows_are_a_bad_request_naming_the_field(api):
    rows = published_rows(as_id="client-bad")
    rows[2]["gpu_mhz"] = 99999
    with pytest.raises(BadRequest) as err:
        api.upload_profiles(rows)
    assert err.value.status == 422 and err.value.field == "rows.2.gpu_mhz"
    assert "rows.2.gpu_mhz" in str(err.value) and "gpu_mhz" in err.value.message
    with pytest.raises(BadRequest) as err:
        api.predictions("client-bad", modes=[{"cpu_cores": 4, "cpu_mhz": 1190.4, "gpu_mhz": 675.75}])
    assert err.value.field == "modes.0.emc_mhz" and "required" in err.value.errors["modes.0.emc_mhz"][0].lower()


def test_unknown_things_are_not_found(api):
    with pytest.raises(NotFound) as err:
        api.workload("no-such-workload")
    assert err.value.status == 404 and err.value.field == "workload_id" and "no-such-workload" in str(err.value)
    with pytest.raises(NotFound) as err:
        api.power_modes("no-such-board")
    assert err.value.field == "device"


def test_writes_without_or_with_a_wrong_key_are_unauthorized(server):
    with pytest.raises(Unauthorized) as err:
        Client(server.url, api_key="").upload_profiles(published_rows(as_id="client-nokey"))
    assert err.value.status == 401 and err.value.field == "X-API-Key"
    with pytest.raises(Unauthorized) as err:
        Client(server.url, api_key="wrong").upload_profiles(published_rows(as_id="client-nokey"))
    assert err.value.status == 403 and "X-API-Key" in str(err.value)
    with pytest.raises(NotFound):
        Client(server.url).workload("client-nokey")  # nothing was stored


def test_the_default_key_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    monkeypatch.setenv(SERVICE_KEYS_ENV, " first , second")
    assert default_api_key() == "first" and Client("http://127.0.0.1:1").api_key == "first"
    monkeypatch.setenv(API_KEY_ENV, "mine")
    assert Client("http://127.0.0.1:1").api_key == "mine" and Client("http://127.0.0.1:1", api_key="").api_key is None
    with pytest.raises(ValueError, match="http"):
        Client("127.0.0.1:8080")


def test_the_example_queries_a_live_service(server):
    env = {**os.environ, API_KEY_ENV: KEY}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "query_service.py"), "--url", server.url,
                           "--max-power-w", "15", "--top", "3"], capture_output=True, text=True, timeout=60,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "agx-xavier" in out and "uploaded 4 new row(s) of example-resnet18" in out
    best = next(line for line in out.splitlines() if line.strip().startswith("best"))
    assert float(best.split(" W ")[0].split()[-1]) <= 15  # the best mode's power, W, under the cap
    # The front's heading counts what it lists: all of it, or "the first 3 of N".
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Pareto front"))
    listed = len(lines) - head - 1
    total = int(lines[head].split(" modes")[0].split()[-1])
    assert listed == min(3, total) and (("the first 3 of" in lines[head]) == (total > 3)), lines[head]


# ---------------------------------------------------------------------------------------------- stubs

def test_retry_after_is_honoured_on_503_and_429(stub):
    busy = stub([(503, {"Retry-After": "1"}, error_body(503, "busy with heavy requests")),
                 (429, {"Retry-After": "0"}, error_body(429, "rate limited")),
                 (200, {}, {"devices": []})])
    # The backoff is not used: Retry-After is given. Had the client backed off instead, it would have waited
    # min(max_wait_s, backoff_s x 2^k) x jitter (0.5..1) >= 15 s; the upper bounds sit well below that, so
    # only ignoring Retry-After (or a hang) fails them, not a slow machine.
    client = Client(busy.url, retries=2, backoff_s=60.0, max_wait_s=30.0)
    assert client.devices() == {"devices": []}
    assert len(busy.requests) == 3
    assert 0.95 <= busy.times[1] - busy.times[0] < 10.0  # Retry-After: 1 (the lower bound proves the wait)
    assert busy.times[2] - busy.times[1] < 10.0  # Retry-After: 0


def test_a_longer_retry_after_than_the_cap_is_raised_at_once(stub):
    full = stub([(503, {"Retry-After": "120"}, error_body(503, "the store cannot write (disk full)",
                                                      {"database": ["cannot write: disk full"]}))])
    t0 = time.monotonic()
    with pytest.raises(Overloaded) as err:
        Client(full.url, retries=3, max_wait_s=10).upload_profiles([{"device": "nano"}])
    # One request and no wait: the shortest wait the client could have chosen is the 10 s cap (120 s if it
    # honoured the answer), so 5 s fails only a client that waited, not a slow machine.
    assert time.monotonic() - t0 < 5.0 and len(full.requests) == 1
    assert err.value.status == 503 and err.value.retry_after_s == 120 and err.value.field == "database"
    assert "retry after 120 s" in str(err.value)


def test_retries_run_out(stub):
    busy = stub([(503, {"Retry-After": "0"}, error_body(503, "the database cannot be reached; retry later"))])
    with pytest.raises(Overloaded) as err:
        Client(busy.url, retries=2).workloads()
    assert len(busy.requests) == 3 and err.value.attempts == 3 and "after 3 attempts" in str(err.value)


def test_an_unsafe_request_is_retried_after_429_but_not_after_503(stub):
    """A 429 is refused before anything runs; a 503 (e.g. from a proxy) may come after the service acted."""
    limited = stub([(429, {"Retry-After": "0"}, error_body(429, "rate limited")), (204, {}, b"")])
    assert Client(limited.url, retries=1).delete_workload("x") is None and len(limited.requests) == 2
    busy = stub([(503, {"Retry-After": "0"}, error_body(503, "busy"))])
    with pytest.raises(Overloaded):
        Client(busy.url, retries=3).delete_workload("x")
    assert len(busy.requests) == 1


def test_connection_refused_is_retried_then_raised():
    client = Client(f"http://127.0.0.1:{free_port()}", retries=2, backoff_s=0.01)
    with pytest.raises(ConnectionFailed) as err:
        client.delete_workload("x")  # not sent at all: retried even though it is not idempotent
    assert err.value.status is None and err.value.before_sending and err.value.attempts == 3
    assert "refused" in str(err.value).lower()


def test_no_answer_within_the_timeout(stub):
    silent = stub(["sleep"], sleep_s=30.0)  # its handler thread is a daemon: closing the stub does not wait
    t0 = time.monotonic()
    with pytest.raises(ConnectionFailed, match="no answer within 0.3 s"):
        Client(silent.url, timeout_s=0.3, retries=0).health()
    # Well below the 30 s a client that ignored its timeout would wait for the stub to hang up: only that
    # fails, not a slow machine.
    assert time.monotonic() - t0 < 15.0


@pytest.mark.parametrize("status, cls", [(400, BadRequest), (406, BadRequest), (413, BadRequest), (414, BadRequest),
                                         (415, BadRequest), (422, BadRequest), (401, Unauthorized), (403, Unauthorized), (404, NotFound),
                                         (409, Conflict), (500, ServiceError)])
def test_statuses_map_to_error_classes(stub, status, cls):
    answer = stub([(status, {}, {"code": status, "status": "X", "message": "body: is not valid JSON",
                                 "errors": {"body": ["is not valid JSON"]}})])
    with pytest.raises(ServiceError) as err:
        Client(answer.url, retries=3).workloads()
    assert type(err.value) is cls and err.value.status == status and err.value.field == "body"
    assert len(answer.requests) == 1  # none of these is retried


NGINX_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
             b"</center>\r\n<hr><center>nginx/1.25.3</center>\r\n" + b"<!-- padding -->\r\n" * 40 + b"</body></html>")


def test_an_answer_that_is_not_json(stub):
    html = stub([(500, {"Content-Type": "text/html"}, NGINX_502.replace(b"502 Bad Gateway", b"Oops &amp; more")),
                 (200, {"Content-Type": "text/html"}, b"<html>hello</html>")])
    with pytest.raises(ServiceError) as err:
        Client(html.url).devices()
    # The status line and a short text excerpt, not the page's markup.
    assert str(err.value).endswith("answered 500: Internal Server Error (not a jetpredict error body: "
                                   "Oops & more Oops & more nginx/1.25.3)"), str(err.value)
    with pytest.raises(ServiceError, match="not JSON"):
        Client(html.url).devices()


@pytest.mark.parametrize("status", [502, 504])
def test_a_proxys_502_or_504_is_retried_when_repeating_is_harmless(stub, status):
    """A proxy answers 502/504 while the service behind it restarts or is slow: retried like 503 for reads and
    for uploads (their Idempotency-Key stores them once), not for a delete, which may have run."""
    page = {"Content-Type": "text/html"}, NGINX_502.replace(b"502 Bad Gateway", f"{status} Gateway".encode())
    proxy = stub([(status, *page), (status, *page), (200, {}, {"devices": []})])
    assert Client(proxy.url, retries=2, backoff_s=0.01).devices() == {"devices": []} and len(proxy.requests) == 3
    upload = stub([(status, *page), (201, {}, {"workload_id": "w"})])
    assert Client(upload.url, retries=1, backoff_s=0.01).upload_profiles([{"device": "nano"}]) == {"workload_id": "w"}
    keys = {r["headers"][IDEMPOTENCY_HEADER] for r in upload.requests}
    assert len(upload.requests) == 2 and len(keys) == 1
    delete = stub([(status, *page)])
    with pytest.raises(Overloaded) as err:
        Client(delete.url, retries=3, backoff_s=0.01).delete_workload("w")
    assert len(delete.requests) == 1 and err.value.status == status
    assert "<" not in str(err.value) and f"{status} Gateway nginx/1.25.3" in str(err.value)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed(stub, status):
    """urllib's default follows a redirect to any host with the API key, and turns a POST answered 301-303
    into a GET without its body whose answer it returns as the upload's. The client raises instead."""
    elsewhere = stub([(200, {}, {"workload_id": "not the upload's answer"})])
    moved = stub([(status, {"Location": f"{elsewhere.url}/v1/profiles"}, b"")])
    api = Client(moved.url, api_key="secret-key", retries=3, backoff_s=0.01)
    with pytest.raises(ServiceError) as err:
        api.upload_profiles([{"device": "nano"}])
    assert err.value.status == status and f"redirected to {elsewhere.url}/v1/profiles, not followed" in str(err.value)
    with pytest.raises(ServiceError):
        api.devices()
    assert elsewhere.requests == [] and len(moved.requests) == 2  # not resent elsewhere, nor retried
    same_host = stub([(status, {"Location": "/v1/devices/"}, b""), (200, {}, {"devices": []})])
    with pytest.raises(ServiceError, match="redirected to /v1/devices/"):
        Client(same_host.url, api_key="secret-key").devices()
    assert len(same_host.requests) == 1


def test_read_rows_csv_drops_a_byte_order_mark(tmp_path):
    # Spreadsheets save "CSV UTF-8" with a BOM; read as plain utf-8 the first key would be "\ufeffdevice".
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffdevice,workload,mode,cpu_cores,epoch_time_s\nagx-xavier,w,a,8,1.5\n".encode())
    assert read_rows_csv(path) == [{"device": "agx-xavier", "workload": "w", "mode": "a", "cpu_cores": 8,
                                    "epoch_time_s": 1.5}]


@pytest.mark.parametrize("clients", [["orin-nx", "nano"], "orin-nx", [{"id": "a", "device": "nano"}, ("b", "nano")]])
def test_fleet_plans_names_a_client_that_is_not_a_mapping_before_sending(clients):
    """Device names for clients raised ``ValueError: dictionary update sequence element #0 ...`` (dict() of a
    string), naming neither the argument nor what it takes; nothing is sent (no service listens here)."""
    client = Client(f"http://127.0.0.1:{free_port()}", retries=0)
    bad = 1 if isinstance(clients[0], dict) else 0
    with pytest.raises(TypeError, match=rf"clients\[{bad}\] must be a mapping .*\{{\"id\": \.\.\., \"device\": "
                                        r"\.\.\.\}, got .*'"):
        client.fleet_plans("my-resnet", clients, 60.0)
